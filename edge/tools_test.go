package edge_test

import (
	"context"
	"encoding/json"
	"net/http"
	"strings"
	"testing"

	"github.com/getkin/kin-openapi/openapi3"

	"github.com/toolgate/toolgate/edge"
	"github.com/toolgate/toolgate/registry"
)

// TestGetTools: the account's tools, each with its status, methods and links.
func TestGetTools(t *testing.T) {
	e := newEnv(t)
	key := e.account("acme", registry.Limits{})
	e.account("other", registry.Limits{})
	e.serve(emailTool, echo)
	e.deploy(registry.Tool{ID: "clock", Methods: []registry.Method{{Name: "now"}}})
	e.deploy(registry.Tool{ID: "secret", Methods: []registry.Method{{Name: "x"}}})
	emailConn := e.connect("acme", "email")
	clockConn := e.connect("acme", "clock")
	e.connect("other", "secret")
	e.connect("acme", "not-deployed-yet")

	r := e.do(http.MethodGet, "/get-tools", "", "SERVICE_API_KEY", key)
	if r.status != http.StatusOK {
		t.Fatalf("status %d; %s", r.status, r.body)
	}
	list := decode[edge.ToolList](t, r)
	if len(list.Tools) != 2 || list.Tools[0].ID != "clock" || list.Tools[1].ID != "email" {
		t.Fatalf("tools %+v: want clock and email, by id", list.Tools)
	}
	clock, email := list.Tools[0], list.Tools[1]
	if email.Status != edge.StatusOnline || email.Instances != 1 || clock.Status != edge.StatusOffline || clock.Instances != 0 {
		t.Fatalf("status: email %s/%d, clock %s/%d", email.Status, email.Instances, clock.Status, clock.Instances)
	}
	if email.Title != "E-mail" || email.Description != "Sends e-mail." || email.Version != "1.0.0" {
		t.Fatalf("email record: %+v", email)
	}
	token := e.signer.Token("acme", "email", emailConn.LinkNonce)
	want := edge.Links{
		SSEURL:     e.url + "/mcp/" + token + "/sse",
		MCPURL:     e.url + "/mcp/" + token,
		APIURL:     e.url + "/tools/email",
		OpenAPIURL: e.url + "/tools/email/openapi.json",
	}
	if email.Links != want {
		t.Fatalf("links %+v, want %+v", email.Links, want)
	}
	if clock.MCPURL != e.url+"/mcp/"+e.signer.Token("acme", "clock", clockConn.LinkNonce) {
		t.Fatalf("clock's link %s is not its own", clock.MCPURL)
	}
	if len(email.Methods) != 1 || email.Methods[0].Name != "send_email" || email.Methods[0].Description != "Send one message." ||
		!jsonEqual(email.Methods[0].InputSchema, emailSchema) || len(email.Methods[0].OutputSchema) == 0 {
		t.Fatalf("methods %+v", email.Methods)
	}
	if string(clock.Methods[0].InputSchema) != `{"type":"object"}` {
		t.Fatalf("a method without a schema takes any object, got %s", clock.Methods[0].InputSchema)
	}

	// The raw document, as a client that knows nothing of Go reads it.
	var raw struct {
		Tools []map[string]json.RawMessage `json:"tools"`
	}
	_ = json.Unmarshal(r.body, &raw)
	for _, field := range []string{"id", "title", "description", "status", "instances", "methods", "sse_url", "mcp_url", "api_url"} {
		if _, ok := raw.Tools[1][field]; !ok {
			t.Errorf("get-tools entry lacks %q", field)
		}
	}

	one := e.do(http.MethodGet, "/tools/email", "", "SERVICE_API_KEY", key)
	if one.status != http.StatusOK {
		t.Fatalf("GET /tools/email: status %d; %s", one.status, one.body)
	}
	if got := decode[edge.ToolInfo](t, one); !jsonEqual(got, email) {
		t.Fatalf("GET /tools/email is not the get-tools entry:\n%+v\n%+v", got, email)
	}

	// A scoped key sees only its tools.
	scoped := e.key("acme", []string{"clock"})
	list = decode[edge.ToolList](t, e.do(http.MethodGet, "/get-tools", "", "SERVICE_API_KEY", scoped))
	if len(list.Tools) != 1 || list.Tools[0].ID != "clock" {
		t.Fatalf("scoped key sees %+v, want clock only", list.Tools)
	}
}

// TestLinksFollowTheBaseURL: a base URL with a path prefix prefixes every link.
func TestLinksFollowTheBaseURL(t *testing.T) {
	e := newEnv(t, withEdge(func(c *edge.Config) { c.BaseURL = "https://gw.example.com/toolgate/" }))
	key := e.account("acme", registry.Limits{})
	e.deploy(echoTool)
	e.connect("acme", "echo")
	info := decode[edge.ToolInfo](t, e.do(http.MethodGet, "/tools/echo", "", "SERVICE_API_KEY", key))
	if info.APIURL != "https://gw.example.com/toolgate/tools/echo" || !strings.HasPrefix(info.SSEURL, "https://gw.example.com/toolgate/mcp/tgl_") {
		t.Fatalf("links %+v", info.Links)
	}
}

// TestOpenAPIDocument: the direct tool API's document loads and validates as OpenAPI
// 3.1 with kin-openapi, with one POST per method.
func TestOpenAPIDocument(t *testing.T) {
	e := newEnv(t)
	key := e.account("acme", registry.Limits{})
	withDefs := registry.Method{Name: "create-event", Title: "Create an event", InputSchema: json.RawMessage(`{
		"$schema": "https://json-schema.org/draft/2020-12/schema",
		"type": "object",
		"properties": {
			"title": {"type": "string"},
			"at": {"$ref": "#/$defs/time"},
			"attendees": {"type": "array", "items": {"$ref": "#/$defs/person"}}
		},
		"required": ["title", "at"],
		"$defs": {
			"time": {"type": "string", "format": "date-time"},
			"person": {"type": "object", "properties": {"email": {"type": "string", "format": "email"}, "manager": {"$ref": "#/$defs/person"}}}
		}
	}`)}
	draft07 := registry.Method{Name: "legacy", InputSchema: json.RawMessage(`{
		"$schema": "http://json-schema.org/draft-07/schema#",
		"type": "object",
		"properties": {"where": {"$ref": "#/definitions/place"}},
		"definitions": {"place": {"type": "object", "properties": {"city": {"type": "string"}}}}
	}`)}
	tool := emailTool
	tool.ID = "calendar"
	tool.Methods = append([]registry.Method{withDefs, draft07, {Name: "ping"}}, tool.Methods...)
	e.deploy(tool)
	e.connect("acme", "calendar")

	r := e.do(http.MethodGet, "/tools/calendar/openapi.json", "", "SERVICE_API_KEY", key)
	if r.status != http.StatusOK {
		t.Fatalf("status %d; %s", r.status, r.body)
	}
	loader := openapi3.NewLoader()
	doc, err := loader.LoadFromData(r.body)
	if err != nil {
		t.Fatalf("load: %v\n%s", err, r.body)
	}
	if err := doc.Validate(context.Background()); err != nil {
		t.Fatalf("validate: %v\n%s", err, r.body)
	}
	if !doc.IsOpenAPI31OrLater() {
		t.Fatalf("openapi %q, want 3.1", doc.OpenAPI)
	}
	if len(doc.Servers) != 1 || doc.Servers[0].URL != e.url+"/tools/calendar" {
		t.Fatalf("servers %+v", doc.Servers)
	}
	for _, m := range tool.Methods {
		item := doc.Paths.Find("/" + m.Name)
		if item == nil || item.Post == nil {
			t.Fatalf("no POST /%s", m.Name)
		}
		op := item.Post
		if op.OperationID != m.Name || op.RequestBody == nil || op.RequestBody.Value.Content.Get("application/json") == nil {
			t.Fatalf("POST /%s: %+v", m.Name, op)
		}
		for _, status := range []int{400, 401, 404, 413, 415, 429, 502, 503, 504} {
			resp := op.Responses.Status(status)
			if resp == nil || resp.Value.Content.Get("application/json").Schema.Value.Properties["error"] == nil {
				t.Fatalf("POST /%s: response %d is not the error envelope", m.Name, status)
			}
		}
	}
	in := doc.Paths.Find("/create-event").Post.RequestBody.Value.Content.Get("application/json").Schema.Value
	if in.Properties["at"].Value.Format != "date-time" || in.Properties["attendees"].Value.Items.Value.Properties["email"] == nil {
		t.Fatalf("create-event's $defs did not resolve: %+v", in.Properties)
	}
	where := doc.Paths.Find("/legacy").Post.RequestBody.Value.Content.Get("application/json").Schema.Value.Properties["where"]
	if where.Value.Properties["city"] == nil {
		t.Fatalf("legacy's definitions did not resolve")
	}
	scheme := doc.Components.SecuritySchemes["apiKey"].Value
	if scheme.Type != "apiKey" || scheme.In != "header" || scheme.Name != "SERVICE_API_KEY" {
		t.Fatalf("security scheme %+v", scheme)
	}
	if len(doc.Security) == 0 {
		t.Fatal("the document requires no security")
	}
}

// TestToolLinks: the addresses the edge shows, and the dashboard with it, of a tool
// on an edge and of an account's MCP links to it.
func TestToolLinks(t *testing.T) {
	const base = "https://gw.example.com/toolgate"
	tests := []struct{ name, got, want string }{
		{"the SSE link", edge.ToolLinks(base, "email", "tgl_x").SSEURL, base + "/mcp/tgl_x/sse"},
		{"the Streamable HTTP link", edge.ToolLinks(base, "email", "tgl_x").MCPURL, base + "/mcp/tgl_x"},
		{"the direct tool API", edge.ToolLinks(base, "email", "").APIURL, base + "/tools/email"},
		{"the OpenAPI document", edge.ToolLinks(base, "email", "").OpenAPIURL, base + "/tools/email/openapi.json"},
		{"no MCP link without a connection", edge.ToolLinks(base, "email", "").SSEURL + edge.ToolLinks(base, "email", "").MCPURL, ""},
		{"the tool-call route", edge.ToolCallURL(base, "email", "send"), base + "/tool-call/email/send"},
	}
	for _, tc := range tests {
		t.Run(tc.name, func(t *testing.T) {
			if tc.got != tc.want {
				t.Errorf("%q, want %q", tc.got, tc.want)
			}
		})
	}
}
