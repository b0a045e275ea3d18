package credentials

import (
	"bytes"
	"os"
	"path/filepath"
	"strings"
	"testing"
)

func TestKeyFile(t *testing.T) {
	dir := t.TempDir()
	path := filepath.Join(dir, "kek")
	line := NewKeyLine()
	if err := os.WriteFile(path, []byte("# the current key first\n"+line+"\n"), 0o644); err != nil {
		t.Fatal(err)
	}
	if _, err := ReadKeyFile(path); err == nil || !strings.Contains(err.Error(), "chmod 600") {
		t.Fatalf("a key file others may read: %v, want it refused", err)
	}
	for _, mode := range []os.FileMode{0o660, 0o604} {
		if err := os.Chmod(path, mode); err != nil {
			t.Fatal(err)
		}
		if _, err := ReadKeyFile(path); err == nil {
			t.Fatalf("a key file of mode %v: read, want it refused", mode)
		}
	}
	if err := os.Chmod(path, 0o440); err != nil { // a Kubernetes secret read through fsGroup
		t.Fatal(err)
	}
	if _, err := ReadKeyFile(path); err != nil {
		t.Fatalf("a key file of mode 0440: %v", err)
	}
	if err := os.Chmod(path, 0o600); err != nil {
		t.Fatal(err)
	}
	r, err := ReadKeyFile(path)
	if err != nil {
		t.Fatal(err)
	}
	if id, _, _ := strings.Cut(line, " "); r.Current().ID != id {
		t.Fatalf("current key %s, want %s", r.Current().ID, id)
	}
	for _, bad := range []string{"", "k1", "k1 abcd", "k/1 " + strings.Repeat("00", 32), line + "\n" + line} {
		if _, err := ParseKeyring(bad); err == nil {
			t.Errorf("ParseKeyring(%q): no error", bad)
		}
	}
}

// TestEnvelopeIsBoundToItsConnection: values sealed for one connection do not open
// as another's, nor under a key they were not wrapped with, and the ciphertext does
// not hold them.
func TestEnvelopeIsBoundToItsConnection(t *testing.T) {
	r, err := ParseKeyring(NewKeyLine())
	if err != nil {
		t.Fatal(err)
	}
	env, err := r.seal(map[string]string{"token": "s3cret-token"}, "acme", "mail")
	if err != nil {
		t.Fatal(err)
	}
	if bytes.Contains(env.Data, []byte("s3cret-token")) {
		t.Fatal("the ciphertext holds the value")
	}
	if v, err := r.open(&env, "acme", "mail"); err != nil || v["token"] != "s3cret-token" {
		t.Fatalf("open: %v %v", v, err)
	}
	if _, err := r.open(&env, "other", "mail"); err == nil {
		t.Fatal("a record opened as another account's")
	}
	other, _ := ParseKeyring(NewKeyLine())
	if _, err := other.open(&env, "acme", "mail"); err == nil {
		t.Fatal("a record opened under a key that did not wrap it")
	}
	if r.Fingerprint("acme", "mail", "token", "a") == other.Fingerprint("acme", "mail", "token", "a") {
		t.Fatal("fingerprints under two keys agree")
	}
}
