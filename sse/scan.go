package sse

import (
	"encoding/json"
	"strconv"

	"github.com/modelcontextprotocol/go-sdk/mcp"
)

// Every MCP request an edge serves is a JSON-RPC envelope, and every tools/call has
// the same three params. Reading them with encoding/json's reflection was the largest
// part of the edge's own work on an MCP call, so the shapes clients send are read
// here by a scan of the bytes instead: keys exactly as the specification writes them,
// values taken as they stand. Anything else (a key in other case or with escapes, an
// unknown member, a value of an unusual kind) makes the scan give up, and
// encoding/json reads the message as before; so the answer is always encoding/json's,
// only cheaper when the message is plain.

// scanMessage reads the common shape of a JSON-RPC message into w. ok is false when
// data is not that shape, w then being undefined. The raw members in w are slices
// of data, which must not change while they are in use.
func scanMessage(data []byte, w *wireMessage) (ok bool) {
	if !json.Valid(data) {
		return false
	}
	*w = wireMessage{}
	return eachMember(data, func(key, value []byte) bool {
		switch string(key) {
		case `"jsonrpc"`:
			w.Version, ok = plainString(value)
			return ok
		case `"id"`:
			return scanID(value, &w.ID)
		case `"method"`:
			w.Method = value
		case `"params"`:
			w.Params = value
		case `"result"`:
			w.Result = value
		default: // "error", rarer and structured; any other member
			return false
		}
		return true
	})
}

// scanID reads a JSON-RPC id as encoding/json reads one into an interface: nil,
// a string, or a float64.
func scanID(value []byte, id *any) bool {
	switch c := value[0]; {
	case c == 'n':
		*id = nil
	case c == '"':
		s, ok := plainString(value)
		if !ok {
			return false
		}
		*id = s
	case c == '-' || '0' <= c && c <= '9':
		f, err := strconv.ParseFloat(string(value), 64)
		if err != nil {
			return false
		}
		*id = f
	default:
		return false
	}
	return true
}

// scanCallParams reads the params of a tools/call that has no other members than
// name, arguments and _meta. ok is false for anything else.
func scanCallParams(params []byte, p *mcp.CallToolParamsRaw) (ok bool) {
	if len(params) == 0 || !json.Valid(params) {
		return false
	}
	*p = mcp.CallToolParamsRaw{}
	return eachMember(params, func(key, value []byte) bool {
		switch string(key) {
		case `"name"`:
			p.Name, ok = plainString(value)
			return ok
		case `"arguments"`:
			p.Arguments = value
		case `"_meta"`:
			// A map of anything: encoding/json's own reading, when there is one.
			p.Meta = nil
			return json.Unmarshal(value, &p.Meta) == nil
		default:
			return false
		}
		return true
	})
}

// eachMember calls fn with the key (quotes and all) and the value of each member of
// the JSON object obj, in order, until fn returns false. obj must be valid JSON; the
// result is false when it is not an object or fn returned false. Values are slices of
// obj, capped at their end.
func eachMember(obj []byte, fn func(key, value []byte) bool) bool {
	i := skipSpace(obj, 0)
	if obj[i] != '{' {
		return false
	}
	i = skipSpace(obj, i+1)
	if obj[i] == '}' {
		return true
	}
	for {
		end := skipString(obj, i)
		key := obj[i:end]
		i = skipSpace(obj, skipSpace(obj, end)+1) // past the colon
		end = skipValue(obj, i)
		if !fn(key, obj[i:end:end]) {
			return false
		}
		i = skipSpace(obj, end)
		if obj[i] == '}' {
			return true
		}
		i = skipSpace(obj, i+1) // past the comma
	}
}

func skipSpace(b []byte, i int) int {
	for i < len(b) && (b[i] == ' ' || b[i] == '\t' || b[i] == '\n' || b[i] == '\r') {
		i++
	}
	return i
}

// skipString returns the index just past the string starting at b[i].
func skipString(b []byte, i int) int {
	for i++; ; i++ {
		switch b[i] {
		case '\\':
			i++
		case '"':
			return i + 1
		}
	}
}

// skipValue returns the index just past the value starting at b[i].
func skipValue(b []byte, i int) int {
	switch b[i] {
	case '"':
		return skipString(b, i)
	case '{', '[':
		depth := 0
		for {
			switch b[i] {
			case '"':
				i = skipString(b, i)
				continue
			case '{', '[':
				depth++
			case '}', ']':
				if depth--; depth == 0 {
					return i + 1
				}
			}
			i++
		}
	}
	for i < len(b) {
		switch b[i] {
		case ',', '}', ']', ' ', '\t', '\n', '\r':
			return i
		}
		i++
	}
	return i
}
