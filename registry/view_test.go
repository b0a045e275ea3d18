package registry_test

import (
	"encoding/json"
	"errors"
	"fmt"
	"log/slog"
	"strings"
	"testing"
	"time"

	"github.com/nats-io/nats.go/jetstream"

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
	testenv.WaitFor(t, "new key authenticates", func() bool {
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
	testenv.WaitFor(t, "revoked key refused", func() bool {
		_, err := view.Snapshot().AuthenticateKey(secret, time.Now())
		return errors.Is(err, registry.ErrUnauthenticated)
	})
	t.Logf("revocation visible after %v", time.Since(start))
}

// TestViewDropsPresenceWhenHeartbeatsStop: a presence nobody refreshes expires with
// the bucket's TTL (which bounds every worker's own), and leaves the view.
func TestViewDropsPresenceWhenHeartbeatsStop(t *testing.T) {
	srv := testenv.Server(t)
	ctx := testenv.Context(t)
	store, err := registry.Open(ctx, testenv.Conn(t, srv.ClientURL()), registry.Options{Replicas: 1, PresenceTTL: 2 * time.Second})
	if err != nil {
		t.Fatal(err)
	}
	view := testenv.View(t, store)

	if err := store.PutPresence(ctx, registry.Presence{Tool: "echo", Instance: "a", StartedAt: time.Now()}); err != nil {
		t.Fatal(err)
	}
	testenv.WaitFor(t, "presence seen", func() bool { return view.Snapshot().Instances("echo") == 1 })
	testenv.WaitFor(t, "expired presence dropped", func() bool { return view.Snapshot().Instances("echo") == 0 })
}

func TestMethodValidation(t *testing.T) {
	env := testenv.NewRegistry(t)
	store, ctx := env.Store, env.Ctx
	view := env.View

	schema := json.RawMessage(`{"type":"object","properties":{"to":{"type":"string","format":"email"},"subject":{"type":"string"}},"required":["to","subject"]}`)
	if err := store.PutTool(ctx, registry.Tool{ID: "email", Methods: []registry.Method{{Name: "send_email", InputSchema: schema}}}); err != nil {
		t.Fatal(err)
	}
	testenv.WaitFor(t, "tool seen", func() bool { return view.Snapshot().RawTool("email") != nil })
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
			testenv.WaitFor(t, "tool seen", func() bool { return env.View.Snapshot().RawTool(tool.ID) != nil })
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

// TestViewChecksToolRecords: workers write their tool records themselves, so the view
// checks what it reads. A record under another tool's key, or with a method name the
// bus cannot carry, is ignored (the tool is absent), and logged; a method whose input
// schema does not compile refuses its calls, logged once; a good record written after
// a bad one brings the tool back.
func TestViewChecksToolRecords(t *testing.T) {
	env := testenv.NewRegistry(t)
	var logs testenv.Buffer
	view, err := registry.NewView(env.Ctx, env.Store, slog.New(slog.NewJSONHandler(&logs, nil)))
	if err != nil {
		t.Fatal(err)
	}
	js, err := jetstream.New(env.Conn)
	if err != nil {
		t.Fatal(err)
	}
	kv, err := js.KeyValue(env.Ctx, registry.BucketTools)
	if err != nil {
		t.Fatal(err)
	}
	put := func(key, record string) {
		t.Helper()
		if _, err := kv.Put(env.Ctx, key, []byte(record)); err != nil {
			t.Fatal(err)
		}
	}
	put("good", `{"id":"good","methods":[{"name":"m"}]}`)
	put("impostor", `{"id":"good","methods":[{"name":"m"},{"name":"stolen"}]}`)
	put("dotted", `{"id":"dotted","methods":[{"name":"a.b"}]}`)
	put("twice", `{"id":"twice","methods":[{"name":"m"},{"name":"m"}]}`)
	put("garbled", `{"id":`)
	put("schema", `{"id":"schema","methods":[{"name":"m","input_schema":{"type":"nope"}}]}`)
	testenv.WaitFor(t, "the view has loaded the tools", func() bool { return view.Snapshot().RawTool("schema") != nil })

	s := view.Snapshot()
	for _, id := range []string{"impostor", "dotted", "twice", "garbled"} {
		if s.RawTool(id) != nil {
			t.Errorf("the view took the bad record of %s", id)
		}
		if !strings.Contains(logs.String(), `"key":"`+id+`"`) {
			t.Errorf("no word in the log of %s's bad record:\n%s", id, logs.String())
		}
	}
	if g := s.RawTool("good"); g == nil || g.Method("stolen") != nil {
		t.Errorf("the impostor's record changed tool good: %+v", g)
	}
	m := s.RawTool("schema").Method("m")
	for range 2 {
		var verr *registry.ValidationError
		if err := m.Validate([]byte(`{}`)); !errors.As(err, &verr) || !strings.Contains(err.Error(), "does not compile") {
			t.Fatalf("a call of a method whose schema does not compile: %v", err)
		}
	}
	if n := strings.Count(logs.String(), "input schema does not compile"); n != 1 {
		t.Errorf("the schema that does not compile was logged %d times, want once", n)
	}

	put("dotted", `{"id":"dotted","methods":[{"name":"a_b"}]}`)
	testenv.WaitFor(t, "a good record brings the tool back", func() bool { return view.Snapshot().RawTool("dotted") != nil })
}

// TestDerivedOncePerRecord: what is derived from a tool's record is worked out once
// for as long as the record stands, and anew once the record changes.
func TestDerivedOncePerRecord(t *testing.T) {
	env := testenv.NewRegistry(t)
	store, ctx, view := env.Store, env.Ctx, env.View
	type methods struct{}
	derivations := 0
	count := func(tool *registry.Tool) any { derivations++; return len(tool.Methods) }
	put := func(names ...string) {
		t.Helper()
		tool := registry.Tool{ID: "kit"}
		for _, n := range names {
			tool.Methods = append(tool.Methods, registry.Method{Name: n})
		}
		if err := store.PutTool(ctx, tool); err != nil {
			t.Fatal(err)
		}
		testenv.WaitFor(t, "the view holds the record", func() bool {
			e := view.Snapshot().RawTool("kit")
			return e != nil && len(e.Tool.Methods) == len(names)
		})
	}
	put("a")
	for range 3 {
		if n := view.Snapshot().RawTool("kit").Derived(methods{}, count); n != 1 {
			t.Fatalf("derived %v from a record of one method", n)
		}
	}
	if derivations != 1 {
		t.Fatalf("derived %d times from one record, want once", derivations)
	}
	put("a", "b")
	if n := view.Snapshot().RawTool("kit").Derived(methods{}, count); n != 2 || derivations != 2 {
		t.Fatalf("after the record changed: derived %v (%d derivations), want 2 from a second derivation", n, derivations)
	}
}
