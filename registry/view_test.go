package registry_test

import (
	"encoding/json"
	"errors"
	"fmt"
	"testing"
	"time"

	"github.com/toolgate/toolgate/internal/testenv"
	"github.com/toolgate/toolgate/registry"
)

func TestViewFollowsKeys(t *testing.T) {
	env := testenv.NewRegistry(t)
	store, ctx := env.Store, env.Ctx
	view := env.View

	if _, err := store.CreateAccount(ctx, registry.Account{ID: "acme", Name: "Acme"}); err != nil {
		t.Fatal(err)
	}
	k, secret, err := store.CreateKey(ctx, registry.NewKeyRequest{Account: "acme", Name: "ci"})
	if err != nil {
		t.Fatal(err)
	}
	if len(secret) != len(registry.KeyPrefix)+43 || secret[:3] != "tg_" {
		t.Fatalf("key %q: want tg_ and 43 base62 characters", secret[:8])
	}
	testenv.Eventually(t, time.Second, "new key authenticates", func() bool {
		_, err := view.Snapshot().AuthenticateKey(secret, time.Now())
		return err == nil
	})
	if _, err := view.Snapshot().AuthenticateKey(secret+"x", time.Now()); !errors.Is(err, registry.ErrUnauthenticated) {
		t.Fatalf("wrong key: got %v, want ErrUnauthenticated", err)
	}

	hash, _ := view.Snapshot().KeyByID(k.ID)
	if hash != registry.Hash(secret) {
		t.Fatal("key id does not lead to the key's hash")
	}
	start := time.Now()
	if _, err := store.RevokeKey(ctx, hash); err != nil {
		t.Fatal(err)
	}
	testenv.Eventually(t, time.Second, "revoked key refused", func() bool {
		_, err := view.Snapshot().AuthenticateKey(secret, time.Now())
		return errors.Is(err, registry.ErrUnauthenticated)
	})
	t.Logf("revocation visible after %v", time.Since(start))
}

func TestViewDropsPresenceWhenHeartbeatsStop(t *testing.T) {
	env := testenv.NewRegistry(t)
	store, ctx := env.Store, env.Ctx
	view := env.View

	if err := store.PutPresence(ctx, registry.Presence{Tool: "echo", Instance: "a", StartedAt: time.Now()}); err != nil {
		t.Fatal(err)
	}
	testenv.Eventually(t, time.Second, "presence seen", func() bool { return view.Snapshot().Instances("echo") == 1 })
	testenv.Eventually(t, 5*time.Second, "expired presence dropped", func() bool { return view.Snapshot().Instances("echo") == 0 })
}

func TestMethodValidation(t *testing.T) {
	env := testenv.NewRegistry(t)
	store, ctx := env.Store, env.Ctx
	view := env.View

	schema := json.RawMessage(`{"type":"object","properties":{"to":{"type":"string","format":"email"},"subject":{"type":"string"}},"required":["to","subject"]}`)
	if err := store.PutTool(ctx, registry.Tool{ID: "email", Methods: []registry.Method{{Name: "send_email", InputSchema: schema}}}); err != nil {
		t.Fatal(err)
	}
	testenv.Eventually(t, time.Second, "tool seen", func() bool { return view.Snapshot().RawTool("email") != nil })
	m := view.Snapshot().RawTool("email").Method("send_email")

	tests := []struct {
		name   string
		params string
		want   []registry.Violation
	}{
		{"a valid call passes", `{"to":"a@example.com","subject":"hi"}`, nil},
		{"a missing field is named by its pointer", `{"to":"a@example.com"}`, []registry.Violation{{Pointer: "/subject", Message: "required field is missing"}}},
		{"an unknown field is refused", `{"to":"a@example.com","subject":"s","cc":"x"}`, []registry.Violation{{Pointer: "/cc", Message: "field is not allowed"}}},
		{"a malformed e-mail is refused", `{"to":"nope","subject":"s"}`, []registry.Violation{{Pointer: "/to"}}},
		{"a wrong type is refused", `{"to":"a@example.com","subject":3}`, []registry.Violation{{Pointer: "/subject"}}},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			err := m.Validate([]byte(tt.params))
			if tt.want == nil {
				if err != nil {
					t.Fatalf("got %v, want no error", err)
				}
				return
			}
			var verr *registry.ValidationError
			if !errors.As(err, &verr) {
				t.Fatalf("got %v, want a ValidationError", err)
			}
			if len(verr.Violations) != len(tt.want) {
				t.Fatalf("got %+v, want %+v", verr.Violations, tt.want)
			}
			for i, w := range tt.want {
				got := verr.Violations[i]
				if got.Pointer != w.Pointer || (w.Message != "" && got.Message != w.Message) || got.Message == "" {
					t.Errorf("violation %d: got %+v, want %+v", i, got, w)
				}
			}
		})
	}
}

// TestValidationOfOpenSchemas: a schema that asks only for an object takes any object
// and still refuses what is not one; a schema with any constraint beyond that is
// checked in full.
func TestValidationOfOpenSchemas(t *testing.T) {
	env := testenv.NewRegistry(t)
	tests := []struct {
		name   string
		schema string
		params string
		ok     bool
	}{
		{"an object schema takes any object", `{"type":"object"}`, `{"a":1,"b":[true]}`, true},
		{"additional properties allowed take any object", `{"type":"object","additionalProperties":true,"description":"anything"}`, ` {"a":{}} `, true},
		{"a draft-07 object schema takes any object", `{"$schema":"http://json-schema.org/draft-07/schema#","type":"object"}`, `{}`, true},
		{"an object schema refuses an array", `{"type":"object"}`, `[1]`, false},
		{"an object schema refuses broken JSON", `{"type":"object"}`, `{"a":`, false},
		{"typed additional properties are checked", `{"type":"object","additionalProperties":{"type":"string"}}`, `{"a":1}`, false},
		{"a property count is checked", `{"type":"object","minProperties":1}`, `{}`, false},
	}
	for i, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			tool := registry.Tool{ID: fmt.Sprintf("open-%d", i), Methods: []registry.Method{{Name: "m", InputSchema: json.RawMessage(tt.schema)}}}
			if err := env.Store.PutTool(env.Ctx, tool); err != nil {
				t.Fatal(err)
			}
			testenv.Eventually(t, time.Second, "tool seen", func() bool { return env.View.Snapshot().RawTool(tool.ID) != nil })
			err := env.View.Snapshot().RawTool(tool.ID).Method("m").Validate([]byte(tt.params))
			var verr *registry.ValidationError
			switch {
			case tt.ok && err != nil:
				t.Fatalf("got %v, want no error", err)
			case !tt.ok && (!errors.As(err, &verr) || len(verr.Violations) == 0):
				t.Fatalf("got %v, want violations", err)
			}
		})
	}
}

func TestCheckInputSchema(t *testing.T) {
	for _, tt := range []struct {
		name, schema string
		ok           bool
	}{
		{"a 2020-12 object schema with local refs compiles", `{"$schema":"https://json-schema.org/draft/2020-12/schema","type":"object","$defs":{"a":{"type":"string"}},"properties":{"a":{"$ref":"#/$defs/a"}}}`, true},
		{"a draft-07 schema compiles", `{"$schema":"http://json-schema.org/draft-07/schema#","type":"object"}`, true},
		{"an unknown type does not", `{"type":"nope"}`, false},
		{"a reference to nowhere does not", `{"type":"object","properties":{"a":{"$ref":"#/$defs/missing"}}}`, false},
	} {
		t.Run(tt.name, func(t *testing.T) {
			if err := registry.CheckInputSchema(json.RawMessage(tt.schema)); (err == nil) != tt.ok {
				t.Fatalf("CheckInputSchema: %v", err)
			}
		})
	}
}
