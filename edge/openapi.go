package edge

import (
	"bytes"
	"encoding/json"
	"net/http"
	"strings"

	"github.com/gin-gonic/gin"

	"github.com/toolgate/toolgate/registry"
)

// openAPIDoc is an OpenAPI 3.1 document. The fields are in the order people read them.
type openAPIDoc struct {
	OpenAPI  string              `json:"openapi"`
	Info     openAPIInfo         `json:"info"`
	Servers  []map[string]string `json:"servers"`
	Security []map[string][]any  `json:"security"`
	Paths    map[string]any      `json:"paths"`
	Comps    map[string]any      `json:"components"`
}

type openAPIInfo struct {
	Title       string `json:"title"`
	Description string `json:"description,omitempty"`
	Version     string `json:"version"`
}

// errorCodes are the envelope codes a tool call can answer with.
var errorCodes = []string{
	CodeInvalidJSON, CodeInvalidParams, CodeInvalidRequest, CodeUnauthenticated, CodeForbidden,
	CodeToolNotFound, CodeMethodNotFound, CodePayloadTooLarge, CodeUnsupportedMediaType,
	CodeRateLimited, CodeQuotaExceeded, CodeToolError, CodeToolUnavailable, CodeToolTimeout, CodeInternal,
}

// openAPI answers GET /tools/{tool}/openapi.json.
func (e *Edge) openAPI(c *gin.Context) {
	t, err := e.view.Snapshot().Tool(principal(c), c.Param("tool"))
	if err != nil {
		e.fail(c, err)
		return
	}
	c.JSON(http.StatusOK, e.openAPIFor(t.Tool))
}

// openAPIFor documents a tool's methods as the direct tool API serves them: each
// method a POST of its parameters to {api_url}/{method}, answered as the tool answers
// or with the error envelope.
func (e *Edge) openAPIFor(t *registry.Tool) *openAPIDoc {
	title := t.Title
	if title == "" {
		title = t.ID
	}
	version := t.Version
	if version == "" {
		version = "unversioned"
	}
	schemas := map[string]any{"Error": envelopeSchema()}
	doc := &openAPIDoc{
		OpenAPI:  "3.1.0",
		Info:     openAPIInfo{Title: title, Description: t.Description, Version: version},
		Servers:  []map[string]string{{"url": e.links(nil, t.ID).APIURL}},
		Security: []map[string][]any{{"apiKey": {}}, {"bearer": {}}},
		Paths:    map[string]any{},
		Comps:    e.openAPIComponents(schemas),
	}
	for _, m := range t.Methods {
		doc.Paths["/"+m.Name] = map[string]any{"post": methodOperation(m, schemas)}
	}
	return doc
}

// openAPIComponents are what every method's operation refers to: the ways to
// authenticate, the call's headers, the error responses, and schemas, which the
// methods' operations add their own to.
func (e *Edge) openAPIComponents(schemas map[string]any) map[string]any {
	return map[string]any{
		"securitySchemes": map[string]any{
			"apiKey": map[string]any{"type": "apiKey", "in": "header", "name": "SERVICE_API_KEY",
				"description": "The account's API key."},
			"bearer": map[string]any{"type": "http", "scheme": "bearer",
				"description": "The account's API key, as a bearer token."},
		},
		"parameters": map[string]any{
			"Timeout": map[string]any{"name": e.cfg.TimeoutHeader, "in": "header", "required": false,
				"description": "Shortens the call's deadline: a duration such as 2s or 1500ms, or milliseconds. The method's own timeout still applies.",
				"schema":      map[string]any{"type": "string"}},
			"RequestID": map[string]any{"name": headerRequestID, "in": "header", "required": false,
				"description": "Names the request in logs, traces and error envelopes (letters, digits, - and _, at most 64).",
				"schema":      map[string]any{"type": "string", "pattern": "^[A-Za-z0-9_-]{1,64}$"}},
		},
		"headers": map[string]any{
			"RetryAfter": map[string]any{"description": "Seconds to wait before trying again.",
				"schema": map[string]any{"type": "integer", "minimum": 1}},
			"ServerTiming": map[string]any{"description": "tool;dur= the bus round trip, the tool's time, and gateway;dur= the rest of the edge's handling, in milliseconds.",
				"schema": map[string]any{"type": "string"}},
		},
		"responses": map[string]any{
			"Error": map[string]any{
				"description": "The gateway's error envelope.",
				"content":     map[string]any{"application/json": map[string]any{"schema": ref("schemas", "Error")}},
			},
			"RetryableError": map[string]any{
				"description": "The gateway's error envelope; try again after Retry-After seconds.",
				"headers":     map[string]any{"Retry-After": ref("headers", "RetryAfter")},
				"content":     map[string]any{"application/json": map[string]any{"schema": ref("schemas", "Error")}},
			},
		},
		"schemas": schemas,
	}
}

// methodOperation is the POST operation of method m, whose schemas it adds to
// schemas.
func methodOperation(m registry.Method, schemas map[string]any) map[string]any {
	input := m.Name + ".input"
	schemas[input] = componentSchema(m.InputSchema, input, schemas)
	ok := map[string]any{"description": "The tool's answer, with the status and content type the tool gave it.",
		"headers": map[string]any{"Server-Timing": ref("headers", "ServerTiming")}}
	if len(m.OutputSchema) > 0 {
		output := m.Name + ".output"
		schemas[output] = componentSchema(m.OutputSchema, output, schemas)
		ok["content"] = map[string]any{"application/json": map[string]any{"schema": ref("schemas", output)}}
	}
	summary := m.Title
	if summary == "" {
		summary = m.Name
	}
	op := map[string]any{
		"operationId": m.Name,
		"summary":     summary,
		"parameters":  []any{ref("parameters", "Timeout"), ref("parameters", "RequestID")},
		"requestBody": map[string]any{
			"required": true,
			"content":  map[string]any{"application/json": map[string]any{"schema": ref("schemas", input)}},
		},
		"responses": map[string]any{
			"200": ok,
			"400": ref("responses", "Error"), "401": ref("responses", "Error"),
			"403": ref("responses", "Error"), "404": ref("responses", "Error"),
			"413": ref("responses", "Error"), "415": ref("responses", "Error"),
			"429": ref("responses", "RetryableError"), "502": ref("responses", "Error"),
			"503": ref("responses", "RetryableError"), "504": ref("responses", "Error"),
		},
	}
	if m.Description != "" {
		op["description"] = m.Description
	}
	return op
}

func ref(kind, name string) map[string]any {
	return map[string]any{"$ref": "#/components/" + kind + "/" + name}
}

func envelopeSchema() map[string]any {
	return map[string]any{
		"type":     "object",
		"required": []string{"error"},
		"properties": map[string]any{
			"error": map[string]any{
				"type":     "object",
				"required": []string{"code", "message", "request_id"},
				"properties": map[string]any{
					"code":       map[string]any{"type": "string", "enum": errorCodes},
					"message":    map[string]any{"type": "string"},
					"request_id": map[string]any{"type": "string"},
					"details": map[string]any{"type": "array", "items": map[string]any{"type": "object"},
						"description": "invalid_params: {pointer, message} per violation; tool_error: the tool's {code, message}."},
				},
			},
		},
	}
}

// componentSchema makes a method's JSON Schema fit to live under
// #/components/schemas/name: its $defs (or draft-07 definitions) move to components of
// their own, named name.<def>, and every local $ref is rewritten to match. $schema
// and $id go: inside an OpenAPI 3.1 document the dialect is the document's, and an $id
// would move the base that references resolve against.
func componentSchema(raw json.RawMessage, name string, schemas map[string]any) any {
	if len(raw) == 0 {
		return map[string]any{"type": "object"}
	}
	dec := json.NewDecoder(bytes.NewReader(raw))
	dec.UseNumber()
	var s any
	if err := dec.Decode(&s); err != nil {
		return map[string]any{"type": "object"}
	}
	obj, ok := s.(map[string]any)
	if !ok {
		return s // a boolean schema
	}
	delete(obj, "$schema")
	delete(obj, "$id")
	rename := map[string]string{"#": "#/components/schemas/" + name}
	var defs []map[string]any
	for _, key := range []string{"$defs", "definitions"} {
		d, ok := obj[key].(map[string]any)
		if !ok {
			continue
		}
		delete(obj, key)
		defs = append(defs, d)
		for def := range d {
			rename["#/"+key+"/"+def] = "#/components/schemas/" + name + "." + componentName(def)
		}
	}
	for _, d := range defs {
		for def, v := range d {
			schemas[name+"."+componentName(def)] = rewriteRefs(v, rename)
		}
	}
	return rewriteRefs(obj, rename)
}

// componentName keeps the characters OpenAPI allows in a component's name.
func componentName(s string) string {
	return strings.Map(func(r rune) rune {
		switch {
		case r >= 'a' && r <= 'z', r >= 'A' && r <= 'Z', r >= '0' && r <= '9', r == '.', r == '-', r == '_':
			return r
		}
		return '_'
	}, s)
}

// rewriteRefs replaces each local $ref by its renamed target, keeping any pointer that
// reaches further into it.
func rewriteRefs(v any, rename map[string]string) any {
	switch x := v.(type) {
	case map[string]any:
		for k, val := range x {
			if k == "$ref" {
				if s, ok := val.(string); ok {
					x[k] = renameRef(s, rename)
				}
				continue
			}
			x[k] = rewriteRefs(val, rename)
		}
	case []any:
		for i := range x {
			x[i] = rewriteRefs(x[i], rename)
		}
	}
	return v
}

func renameRef(ref string, rename map[string]string) string {
	if !strings.HasPrefix(ref, "#") {
		return ref
	}
	best := ""
	for from := range rename {
		if (ref == from || strings.HasPrefix(ref, from+"/")) && len(from) > len(best) {
			best = from
		}
	}
	if best == "" {
		return ref
	}
	return rename[best] + strings.TrimPrefix(ref, best)
}
