package credentials

import (
	"testing"

	"github.com/nats-io/nkeys"

	"github.com/toolgate/toolgate/bus/wire"
)

// BenchmarkOpenAndSeal is what a call costs the edge for its account's values when
// its copy has no seal of the record's revision yet: the envelope opened under the
// KEK, the values sealed to the tool's key. Later calls of the revision reuse the
// seal.
func BenchmarkOpenAndSeal(b *testing.B) {
	r, _ := ParseKeyring(NewKeyLine())
	env, _ := r.seal(map[string]string{"token": "ghp_0123456789abcdef0123456789abcdef0123"}, "acme", "github")
	tool, _ := nkeys.CreateCurveKeys()
	pub, _ := tool.PublicKey()
	sender, _ := nkeys.CreateCurveKeys()
	b.ReportAllocs()
	for b.Loop() {
		values, err := r.open(&env, "acme", "github")
		if err != nil {
			b.Fatal(err)
		}
		if _, err := wire.SealCredentials(sender, pub, "acme", "github", values); err != nil {
			b.Fatal(err)
		}
	}
}

// BenchmarkOpenSealed is what a worker pays to open a call's values.
func BenchmarkOpenSealed(b *testing.B) {
	tool, _ := nkeys.CreateCurveKeys()
	pub, _ := tool.PublicKey()
	sender, _ := nkeys.CreateCurveKeys()
	sealed, _ := wire.SealCredentials(sender, pub, "acme", "github", map[string]string{"token": "ghp_0123456789abcdef0123456789abcdef0123"})
	b.ReportAllocs()
	for b.Loop() {
		if _, err := wire.OpenCredentials(tool, sealed, "acme", "github"); err != nil {
			b.Fatal(err)
		}
	}
}
