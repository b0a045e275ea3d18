package oauth_test

import (
	"bytes"
	"crypto/ecdsa"
	"encoding/base64"
	"testing"
	"time"

	"github.com/toolgate/toolgate/credentials"
	"github.com/toolgate/toolgate/internal/testenv"
	"github.com/toolgate/toolgate/oauth"
	"github.com/toolgate/toolgate/registry"
)

// privateD is the private key's d parameter as a JWK writes it.
func privateD(t *testing.T, keys *oauth.Keys, at time.Time) []byte {
	t.Helper()
	jwk, err := keys.Signing(testenv.Context(t), at)
	if err != nil {
		t.Fatal(err)
	}
	priv := jwk.Key.(*ecdsa.PrivateKey)
	return []byte(base64.RawURLEncoding.EncodeToString(priv.D.FillBytes(make([]byte, 32))))
}

// rawStreamHolds reports whether any message the key bucket's stream holds contains b.
func rawStreamHolds(t *testing.T, store *registry.Store, b []byte) bool {
	t.Helper()
	ctx := testenv.Context(t)
	st, err := store.JetStream().Stream(ctx, "KV_"+oauth.KeyBucket)
	if err != nil {
		t.Fatal(err)
	}
	info, err := st.Info(ctx)
	if err != nil {
		t.Fatal(err)
	}
	for seq := info.State.FirstSeq; seq <= info.State.LastSeq && seq > 0; seq++ {
		m, err := st.GetMsg(ctx, seq)
		if err != nil {
			continue // purged
		}
		if bytes.Contains(m.Data, b) {
			return true
		}
	}
	return false
}

// TestSigningKeysAreSealedUnderTheCredentialsKey: with the credentials keyring, the
// key bucket's stream holds no private key's d (without it, it does: the search
// finds what is there); a token one edge signs another verifies, across a signing
// key's rotation and across a rotation of the keyring's KEK (rotate-key's Rewrap),
// after which an edge holding only the new KEK reads every key.
func TestSigningKeysAreSealedUnderTheCredentialsKey(t *testing.T) {
	ctx, now := testenv.Context(t), time.Now()
	plainStore := testenv.Store(t, testenv.Conn(t, testenv.Server(t).ClientURL()), 1)
	plain, err := oauth.OpenKeys(ctx, plainStore, time.Hour, nil)
	if err != nil {
		t.Fatal(err)
	}
	if !rawStreamHolds(t, plainStore, privateD(t, plain, now)) {
		t.Fatal("a plain key's d is not in the bucket's stream: the search cannot find it")
	}

	url := testenv.Server(t).ClientURL()
	storeA, storeB := testenv.Store(t, testenv.Conn(t, url), 1), testenv.Store(t, testenv.Conn(t, url), 1)
	oldLine := credentials.NewKeyLine()
	oldRing, err := credentials.ParseKeyring(oldLine)
	if err != nil {
		t.Fatal(err)
	}
	open := func(store *registry.Store, ring *credentials.Keyring) *oauth.Issuer {
		keys, err := oauth.OpenKeys(ctx, store, time.Hour, ring)
		if err != nil {
			t.Fatal(err)
		}
		return oauth.NewIssuer("https://gw.example", keys)
	}
	newLine := credentials.NewKeyLine()
	bothRing, err := credentials.ParseKeyring(newLine + "\n" + oldLine)
	if err != nil {
		t.Fatal(err)
	}
	onlyNew, err := credentials.ParseKeyring(newLine)
	if err != nil {
		t.Fatal(err)
	}
	// Edges a and b hold the old KEK; r holds the new one first and the old after it,
	// as an edge restarted during a rotation does.
	a, b, r := open(storeA, oldRing), open(storeB, oldRing), open(storeA, bothRing)
	const resource = "https://gw.example/mcp/tgl_a"
	mint := func(is *oauth.Issuer, at time.Time) string {
		raw, err := is.Mint(ctx, oauth.Token{Account: "acme", Resource: resource, Scope: "kit:list"}, at, 3*time.Hour)
		if err != nil {
			t.Fatal(err)
		}
		return raw
	}
	verify := func(is *oauth.Issuer, raw string, at time.Time, what string) {
		t.Helper()
		if _, err := is.Verify(ctx, raw, resource, at); err != nil {
			t.Fatalf("%s: %v", what, err)
		}
	}
	first, dFirst := mint(a, now), privateD(t, a.Keys(), now)
	verify(b, first, now, "a's token at b")

	if n, total, err := r.Keys().Rewrap(ctx); err != nil || n != 1 || total != 1 {
		t.Fatalf("Rewrap: %d of %d, %v; want 1 of 1", n, total, err)
	}
	c := open(storeB, onlyNew) // reads the key only as wrapped again under the new KEK
	verify(c, first, now, "a's token at an edge with only the new KEK")

	next := now.Add(time.Hour) // the next rotation period: a new key signs
	second, dSecond := mint(c, next), privateD(t, c.Keys(), next)
	verify(r, second, next, "c's token of the next key at r")
	verify(r, first, next, "a's token of the previous key at r, after the rotation")
	for i, d := range [][]byte{dFirst, dSecond} {
		if rawStreamHolds(t, storeA, d) {
			t.Fatalf("the key bucket's stream holds key %d's private key in plain", i)
		}
	}
}
