package mcphttp

import (
	"bytes"
	"encoding/json"
	"fmt"
	"math"
	"net/http"
	"strconv"
	"strings"
)

// A tool's input schema may name, with x-mcp-header on a property, a header that a
// 2026-07-28 tools/call mirrors the argument in: Mcp-Param-<name>, its value as
// EncodeHeaderValue writes it (SEP-2243). The client sets it; the server checks it
// against the body.

// HeaderParamPrefix begins the header of a mirrored argument.
const HeaderParamPrefix = "Mcp-Param-"

// ParamBinding is one argument a tool mirrors in a header: the property's path in the
// arguments, and the header's name after Mcp-Param-.
type ParamBinding struct {
	Path   []string
	Header string
}

type schemaProperty struct {
	Header     json.RawMessage           `json:"x-mcp-header"`
	Properties map[string]schemaProperty `json:"properties"`
}

// ParamBindings reads the x-mcp-header annotations of an input schema, nested
// properties included; none for a schema without any.
func ParamBindings(schema json.RawMessage) []ParamBinding {
	if !bytes.Contains(schema, []byte(`"x-mcp-header"`)) {
		return nil // spares every other schema the decoding
	}
	var root schemaProperty
	if json.Unmarshal(schema, &root) != nil {
		return nil
	}
	var out []ParamBinding
	var walk func(props map[string]schemaProperty, prefix []string)
	walk = func(props map[string]schemaProperty, prefix []string) {
		for name, p := range props {
			path := append(append([]string(nil), prefix...), name)
			var header string
			if json.Unmarshal(p.Header, &header) == nil && header != "" {
				out = append(out, ParamBinding{Path: path, Header: header})
			}
			walk(p.Properties, path)
		}
	}
	walk(root.Properties, nil)
	return out
}

// argument finds the value at path in a tools/call's arguments; ok is false when it
// is absent or null.
func argument(args map[string]json.RawMessage, path []string) (json.RawMessage, bool) {
	cur := json.RawMessage(nil)
	for i, part := range path {
		if i > 0 {
			args = nil
			if json.Unmarshal(cur, &args) != nil {
				return nil, false
			}
		}
		v, ok := args[part]
		if !ok {
			return nil, false
		}
		cur = v
	}
	return cur, len(cur) > 0 && string(cur) != "null"
}

// primitive renders a mirrored argument as its header's decoded value: a string as
// it is, an integer in decimal, a boolean as true or false; ok is false for anything
// else (numbers with a fraction, objects, arrays).
func primitive(raw json.RawMessage) (string, bool) {
	var v any
	if json.Unmarshal(raw, &v) != nil {
		return "", false
	}
	switch v := v.(type) {
	case string:
		return v, true
	case bool:
		return strconv.FormatBool(v), true
	case float64:
		if v != math.Trunc(v) || math.Abs(v) > 1<<53-1 {
			return "", false
		}
		return strconv.FormatInt(int64(v), 10), true
	}
	return "", false
}

func callArguments(params json.RawMessage) map[string]json.RawMessage {
	var p struct {
		Arguments map[string]json.RawMessage `json:"arguments"`
	}
	_ = json.Unmarshal(params, &p)
	return p.Arguments
}

// SetParamHeaders mirrors a tools/call's annotated arguments in h.
func SetParamHeaders(h http.Header, bindings []ParamBinding, params json.RawMessage) {
	if len(bindings) == 0 {
		return
	}
	args := callArguments(params)
	for _, b := range bindings {
		raw, ok := argument(args, b.Path)
		if !ok {
			continue
		}
		if v, ok := primitive(raw); ok {
			h.Set(HeaderParamPrefix+b.Header, EncodeHeaderValue(v))
		}
	}
}

// CheckParamHeaders reports how a tools/call's Mcp-Param headers disagree with its
// arguments, or nil: every annotated argument present must have its header, with its
// value; an absent one must have none.
func CheckParamHeaders(h http.Header, bindings []ParamBinding, params json.RawMessage) error {
	if len(bindings) == 0 {
		return nil
	}
	args := callArguments(params)
	for _, b := range bindings {
		name := HeaderParamPrefix + b.Header
		got, has := h[http.CanonicalHeaderKey(name)]
		raw, present := argument(args, b.Path)
		path := strings.Join(b.Path, ".")
		switch {
		case !present && has:
			return fmt.Errorf("%s header sent for absent argument %q", name, path)
		case !present:
			continue
		case !has:
			return fmt.Errorf("%s header required: it mirrors argument %q", name, path)
		}
		want, ok := primitive(raw)
		if !ok {
			return fmt.Errorf("argument %q, mirrored in %s, must be a string, an integer or a boolean", path, name)
		}
		value, ok := DecodeHeaderValue(got[0])
		if !ok {
			return fmt.Errorf("%s header is not valid base64 between =?base64? and ?=", name)
		}
		if value != want {
			return fmt.Errorf("%s header value %q does not match argument %q", name, value, path)
		}
	}
	return nil
}
