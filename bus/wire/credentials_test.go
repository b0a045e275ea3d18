package wire

import (
	"bytes"
	"testing"

	"github.com/nats-io/nkeys"
)

// TestSealKeys: a tool's seal key derives the same from the same secret, differs
// between tools, and is found again in a credentials file by its tool alone.
func TestSealKeys(t *testing.T) {
	a, _ := DeriveSealKey([]byte("deployment secret"), "mail")
	b, _ := DeriveSealKey([]byte("deployment secret"), "mail")
	c, _ := DeriveSealKey([]byte("deployment secret"), "chat")
	pa, _ := a.PublicKey()
	pb, _ := b.PublicKey()
	pc, _ := c.PublicKey()
	if pa != pb || pa == pc || !nkeys.IsValidPublicCurveKey(pa) {
		t.Fatalf("mail %s and %s, chat %s: want mail's twice the same curve key, chat's another", pa, pb, pc)
	}
	block, err := SealKeyBlock(a, "mail")
	if err != nil {
		t.Fatal(err)
	}
	creds := append([]byte("-----BEGIN NATS USER JWT-----\nx\n------END NATS USER JWT------\n"), block...)
	found, err := ParseSealKey(creds, "mail")
	if pf, _ := found.PublicKey(); err != nil || pf != pa {
		t.Fatalf("ParseSealKey: %s, %v", pf, err)
	}
	if _, err := ParseSealKey(creds, "chat"); err == nil {
		t.Fatal("a file of mail's carries chat's key")
	}

	sender, _ := nkeys.CreateCurveKeys()
	sealed, err := SealCredentials(sender, pa, "acme", "mail", map[string]string{"token": "plain-token"})
	if err != nil || bytes.Contains([]byte(sealed), []byte("plain-token")) {
		t.Fatalf("sealed %q, %v", sealed, err)
	}
	if v, err := OpenCredentials(a, sealed, "acme", "mail"); err != nil || v["token"] != "plain-token" {
		t.Fatalf("open: %v %v", v, err)
	}
	for _, tc := range []struct {
		kp            nkeys.KeyPair
		account, tool string
	}{{c, "acme", "mail"}, {a, "other", "mail"}, {a, "acme", "chat"}} {
		if _, err := OpenCredentials(tc.kp, sealed, tc.account, tc.tool); err == nil {
			t.Errorf("opened with another key, or as %s's call of %s", tc.account, tc.tool)
		}
	}
}
