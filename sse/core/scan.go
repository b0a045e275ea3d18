package core

import (
	"encoding/json"
	"strconv"

	"github.com/modelcontextprotocol/go-sdk/mcp"

	"github.com/toolgate/toolgate/internal/jsonscan"
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
	return jsonscan.Members(data, func(key, value []byte) bool {
		switch string(key) {
		case `"jsonrpc"`:
			w.Version, ok = jsonscan.PlainString(value)
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
		s, ok := jsonscan.PlainString(value)
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
	return jsonscan.Members(params, func(key, value []byte) bool {
		switch string(key) {
		case `"name"`:
			p.Name, ok = jsonscan.PlainString(value)
			return ok
		case `"arguments"`:
			p.Arguments = value
		case `"_meta"`:
			// A map of anything: encoding/json's own reading, into the map a repeated
			// _meta filled already, as encoding/json merges them.
			return json.Unmarshal(value, &p.Meta) == nil
		default:
			return false
		}
		return true
	})
}
