package registry_test

import (
	"encoding/json"
	"errors"
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
