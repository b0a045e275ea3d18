// Package credentials keeps the values an account gives for its connection to a tool
// (a token, an API key): encrypted at rest in the tg-credentials bucket, each record
// under a data key of its own wrapped by the deployment's key-encryption key (KEK),
// which only edges hold, read from a file; and sealed, for each call, to the tool's
// own X25519 key, so that only the tool's workers read them. Values are write-only:
// what the package answers about a record is its field names, when each was set, and
// a keyed fingerprint of each value.
package credentials

import (
	"crypto/rand"
	"encoding/hex"
	"errors"
	"fmt"
	"os"
	"regexp"
	"strings"
	"time"
)

// Key is one key-encryption key, named by its id in every record it wraps.
type Key struct {
	ID     string
	secret []byte // 32 bytes: AES-256
}

// Keyring holds the deployment's KEKs: the first is current (it wraps every record
// written), the others still open records they wrapped, while a rotation re-wraps
// those under the current one (Vault.Rotate).
type Keyring struct {
	keys []Key
}

var keyIDPattern = regexp.MustCompile(`^[A-Za-z0-9_-]{1,64}$`)

// ParseKeyring reads a KEK file's text: one key a line, its id and 32 bytes in hex,
// separated by a space; blank lines and lines starting with # are skipped.
func ParseKeyring(text string) (*Keyring, error) {
	r := &Keyring{}
	seen := map[string]bool{}
	for n, line := range strings.Split(text, "\n") {
		line = strings.TrimSpace(line)
		if line == "" || strings.HasPrefix(line, "#") {
			continue
		}
		id, hexKey, ok := strings.Cut(line, " ")
		secret, err := hex.DecodeString(strings.TrimSpace(hexKey))
		switch {
		case !ok || !keyIDPattern.MatchString(id):
			return nil, fmt.Errorf("credentials: key file line %d: want an id (letters, digits, - and _), a space and the key in hex", n+1)
		case err != nil || len(secret) != 32:
			return nil, fmt.Errorf("credentials: key file line %d (key %s): want 32 bytes in hex", n+1, id)
		case seen[id]:
			return nil, fmt.Errorf("credentials: key file line %d: key %s twice", n+1, id)
		}
		seen[id] = true
		r.keys = append(r.keys, Key{ID: id, secret: secret})
	}
	if len(r.keys) == 0 {
		return nil, errors.New("credentials: key file: no key")
	}
	return r, nil
}

// ReadKeyFile reads the KEK file at path, which only its owner may write and others
// may not read: a file others may read, or its group write, is refused. Its group may
// read it, as a Kubernetes secret's fsGroup does (mode 0440).
func ReadKeyFile(path string) (*Keyring, error) {
	fi, err := os.Stat(path)
	if err != nil {
		return nil, fmt.Errorf("credentials: key file: %w", err)
	}
	if fi.Mode().Perm()&0o037 != 0 {
		return nil, fmt.Errorf("credentials: key file %s: mode %v: others must have no access, and the group at most read (chmod 600)", path, fi.Mode().Perm())
	}
	b, err := os.ReadFile(path)
	if err != nil {
		return nil, fmt.Errorf("credentials: key file: %w", err)
	}
	return ParseKeyring(string(b))
}

// NewKeyLine is a line of a KEK file holding a fresh key, its id naming the day it
// was made.
func NewKeyLine() string {
	b := make([]byte, 32)
	if _, err := rand.Read(b); err != nil {
		panic("credentials: crypto/rand: " + err.Error()) // cannot happen on supported platforms
	}
	suffix := make([]byte, 3)
	_, _ = rand.Read(suffix)
	return fmt.Sprintf("k%s-%s %s", time.Now().UTC().Format("20060102"), hex.EncodeToString(suffix), hex.EncodeToString(b))
}

// Current is the key that wraps what is written now.
func (r *Keyring) Current() Key { return r.keys[0] }

// IDs are the keys' ids, the current one first.
func (r *Keyring) IDs() []string {
	ids := make([]string, len(r.keys))
	for i, k := range r.keys {
		ids[i] = k.ID
	}
	return ids
}

func (r *Keyring) key(id string) (Key, bool) {
	for _, k := range r.keys {
		if k.ID == id {
			return k, true
		}
	}
	return Key{}, false
}
