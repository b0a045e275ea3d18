package audit_test

import (
	"encoding/json"
	"slices"
	"strings"
	"testing"

	"github.com/toolgate/toolgate/audit"
)

// secretSchema marks secret, each in its own way: a property (writeOnly), a nested
// object's member (x-secret), the members of an array's elements through $ref, an
// array's element by position (prefixItems), a member through allOf, the members of a
// map (additionalProperties) and of names matching a pattern, and members through
// oneOf and anyOf.
const secretSchema = `{
	"type": "object",
	"properties": {
		"user": {"type": "string"},
		"password": {"type": "string", "writeOnly": true},
		"profile": {"type": "object", "properties": {"name": {"type": "string"}, "api_key": {"type": "string", "x-secret": true}}},
		"tokens": {"type": "array", "items": {"$ref": "#/$defs/token"}},
		"pair": {"type": "array", "prefixItems": [{"type": "string"}, {"type": "string", "writeOnly": true}]},
		"mixed": {"allOf": [{"type": "object"}, {"properties": {"pin": {"x-secret": true}}}]},
		"vault": {"type": "object", "additionalProperties": {"type": "string", "x-secret": true}},
		"alt": {"oneOf": [{"type": "string"}, {"type": "object", "properties": {"code": {"writeOnly": true}}}]},
		"any": {"anyOf": [{"type": "object", "properties": {"otp": {"x-secret": true}}}]}
	},
	"patternProperties": {"^secret_": {"writeOnly": true}},
	"$defs": {"token": {"type": "object", "properties": {"label": {"type": "string"}, "value": {"type": "string", "x-secret": true}}}}
}`

func TestKeepLeavesSecretsOut(t *testing.T) {
	args := `{"user":"ada","password":"S1","profile":{"name":"Ada","api_key":"S2"},
		"tokens":[{"label":"a","value":"S3"},{"label":"b","value":"S4"}],"pair":["x","S5"],
		"mixed":{"pin":"S6","note":"n"},"vault":{"k1":"S7","k2":"S8"},"secret_x":"S9","other":1.50,
		"alt":{"code":"SA"},"any":{"otp":"SB","kept":"k"}}`
	k := audit.Keep([]byte(args), json.RawMessage(secretSchema), 4096, false)
	for _, s := range []string{"S1", "S2", "S3", "S4", "S5", "S6", "S7", "S8", "S9", "SA", "SB"} {
		if strings.Contains(string(k.Data), `"`+s+`"`) {
			t.Errorf("kept %s: %s", s, k.Data)
		}
	}
	var got map[string]any
	if err := json.Unmarshal(k.Data, &got); err != nil || got["user"] != "ada" || k.Cut || !strings.Contains(string(k.Data), `"other":1.50`) ||
		!strings.Contains(string(k.Data), `"label":"b"`) || !strings.Contains(string(k.Data), `"pair":["x",null]`) {
		t.Fatalf("kept %s (%v), cut %v", k.Data, err, k.Cut)
	}
	slices.Sort(k.Secret)
	want := []string{"/alt/code", "/any/otp", "/mixed/pin", "/pair/1", "/password", "/profile/api_key", "/secret_x", "/tokens/0/value", "/tokens/1/value", "/vault/k1", "/vault/k2"}
	if !slices.Equal(k.Secret, want) {
		t.Fatalf("secret %v, want %v", k.Secret, want)
	}
}

func TestKeepCutsAtTheBound(t *testing.T) {
	long := `{"user":"` + strings.Repeat("é", 100) + `","password":"S1"}`
	k := audit.Keep([]byte(long), json.RawMessage(secretSchema), 51, false)
	var s string
	if err := json.Unmarshal(k.Data, &s); err != nil || !k.Cut || len(s) > 51 || strings.Contains(s, "S1") || !strings.HasPrefix(s, `{"user":"éé`) {
		t.Fatalf("cut: %s (%v) cut %v", k.Data, err, k.Cut)
	}
	if k := audit.Keep([]byte(`{"user":"ada"}`), nil, 14, false); k.Cut || string(k.Data) != `{"user":"ada"}` {
		t.Fatalf("at the bound: %s cut %v", k.Data, k.Cut)
	}
	if k := audit.Keep([]byte(`{"user":"ada"}`), nil, 13, false); !k.Cut || k.Size != 14 {
		t.Fatalf("a byte past the bound: %s cut %v", k.Data, k.Cut)
	}
}

func TestKeepOthers(t *testing.T) {
	// Not JSON: kept as text when nothing is secret, left out when something may be.
	if k := audit.Keep([]byte("plain text"), nil, 100, false); string(k.Data) != `"plain text"` {
		t.Errorf("text: %s", k.Data)
	}
	if k := audit.Keep([]byte("S1 text"), json.RawMessage(secretSchema), 100, false); k.Data != nil || len(k.Secret) != 1 {
		t.Errorf("text of a schema with secrets: %s %v", k.Data, k.Secret)
	}
	// An MCP result: its structured content walked with the schema; its text content,
	// which may repeat the values, left out.
	out := `{"type":"object","properties":{"session":{"type":"string","writeOnly":true},"user":{"type":"string"}}}`
	res := `{"content":[{"type":"text","text":"{\"session\":\"S1\"}"}],"structuredContent":{"session":"S1","user":"ada"},"isError":false}`
	k := audit.Keep([]byte(res), json.RawMessage(out), 1000, true)
	if strings.Contains(string(k.Data), "S1") || !strings.Contains(string(k.Data), `"user":"ada"`) || !slices.Contains(k.Secret, "/content") {
		t.Errorf("MCP result: %s %v", k.Data, k.Secret)
	}
	// A schema that refers to itself ends.
	self := `{"$ref":"#","properties":{"next":{"$ref":"#"},"key":{"x-secret":true}}}`
	if k := audit.Keep([]byte(`{"next":{"next":{"key":"S1"}}}`), json.RawMessage(self), 1000, false); strings.Contains(string(k.Data), "S1") {
		t.Errorf("self-referring schema: %s", k.Data)
	}
}
