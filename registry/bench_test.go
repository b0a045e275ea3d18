package registry_test

import (
	"encoding/json"
	"fmt"
	"testing"
	"time"

	"github.com/toolgate/toolgate/internal/testenv"
	"github.com/toolgate/toolgate/registry"
)

// BenchmarkAuthenticateKey is the first check of every HTTP call: a key's hash looked
// up in the view's snapshot, with the key's account.
func BenchmarkAuthenticateKey(b *testing.B) {
	env := testenv.NewRegistry(b)
	if _, err := env.Store.CreateAccount(env.Ctx, registry.Account{ID: "acme"}); err != nil {
		b.Fatal(err)
	}
	_, secret, err := env.Store.CreateKey(env.Ctx, registry.NewKeyRequest{Account: "acme", Name: "bench"})
	if err != nil {
		b.Fatal(err)
	}
	testenv.WaitFor(b, "key seen", func() bool {
		_, err := env.View.Snapshot().AuthenticateKey(secret, time.Now())
		return err == nil
	})
	snap := env.View.Snapshot()
	now := time.Now()

	b.ReportAllocs()
	for b.Loop() {
		if _, err := snap.AuthenticateKey(secret, now); err != nil {
			b.Fatal(err)
		}
	}
}

// BenchmarkValidate checks a typical call's parameters, an object of three fields,
// against its method's compiled input schema; and the same parameters against a
// schema that takes any object (an echo's).
func BenchmarkValidate(b *testing.B) {
	env := testenv.NewRegistry(b)
	schemas := map[string]json.RawMessage{
		"three fields": json.RawMessage(`{"type":"object","properties":{
			"to":{"type":"string","format":"email"},"subject":{"type":"string","maxLength":200},"body":{"type":"string"}},
			"required":["to","subject"]}`),
		"any object": json.RawMessage(`{"type":"object","additionalProperties":true}`),
	}
	params := []byte(`{"to":"ada@example.com","subject":"Hello","body":"Nice to meet you."}`)
	for i, name := range []string{"three fields", "any object"} {
		b.Run(name, func(b *testing.B) {
			id := fmt.Sprintf("tool-%d", i)
			if err := env.Store.PutTool(env.Ctx, registry.Tool{ID: id, Methods: []registry.Method{{Name: "send_email", InputSchema: schemas[name]}}}); err != nil {
				b.Fatal(err)
			}
			testenv.WaitFor(b, "tool seen", func() bool { return env.View.Snapshot().RawTool(id) != nil })
			m := env.View.Snapshot().RawTool(id).Method("send_email")

			b.ReportAllocs()
			for b.Loop() {
				if err := m.Validate(params); err != nil {
					b.Fatal(err)
				}
			}
		})
	}
}
