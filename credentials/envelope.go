package credentials

import (
	"crypto/aes"
	"crypto/cipher"
	"crypto/hmac"
	"crypto/rand"
	"crypto/sha256"
	"encoding/hex"
	"encoding/json"
	"fmt"
	"slices"
)

// Envelope is a record's values at rest: encrypted with AES-256-GCM under a data key
// of the record's own, which is itself encrypted (wrapped) under the KEK named KeyID.
// Both are bound to the record's account and tool (GCM's additional data), so that a
// ciphertext copied under another connection's key does not open.
type Envelope struct {
	KeyID      string `json:"kek"`
	WrappedKey []byte `json:"wrapped_key"` // the nonce, then the data key sealed under the KEK
	Data       []byte `json:"data"`        // the nonce, then the values (JSON) sealed under the data key
}

// boundTo is the additional data of a record's encryption: its connection.
func boundTo(account, tool string) []byte {
	return []byte("toolgate-credentials\x00" + account + "\x00" + tool)
}

func gcm(key []byte) (cipher.AEAD, error) {
	block, err := aes.NewCipher(key)
	if err != nil {
		return nil, err
	}
	return cipher.NewGCM(block)
}

func random(n int) []byte {
	b := make([]byte, n)
	if _, err := rand.Read(b); err != nil {
		panic("credentials: crypto/rand: " + err.Error()) // cannot happen on supported platforms
	}
	return b
}

// binding is what a ciphertext is bound to (GCM's additional data), and how errors
// name it: a connection's record, or another secret kept under the deployment's KEK.
type binding struct {
	aad  []byte
	name string
}

func connection(account, tool string) binding {
	return binding{aad: boundTo(account, tool), name: account + "/" + tool}
}

// secret binds a secret other than a connection's values, kept for purpose under
// name (an OAuth signing key: "oauth-signing-key", its id): no connection's
// ciphertext opens as one, nor one secret's as another's.
func secret(purpose, name string) binding {
	return binding{aad: []byte("toolgate-" + purpose + "\x00" + name), name: purpose + " " + name}
}

// seal encrypts values under a new data key, wrapped under the current KEK.
func (r *Keyring) seal(values map[string]string, account, tool string) (Envelope, error) {
	plain, err := json.Marshal(values)
	if err != nil {
		return Envelope{}, fmt.Errorf("credentials: encode: %w", err)
	}
	defer clear(plain)
	return r.sealBytes(plain, connection(account, tool))
}

// SealSecret encrypts plain as it does a connection's values (a data key of its
// own, wrapped under the current KEK), bound to purpose and name.
func (r *Keyring) SealSecret(plain []byte, purpose, name string) (Envelope, error) {
	return r.sealBytes(plain, secret(purpose, name))
}

// OpenSecret decrypts what SealSecret sealed for purpose and name.
func (r *Keyring) OpenSecret(env Envelope, purpose, name string) ([]byte, error) {
	return r.openBytes(&env, secret(purpose, name))
}

// RewrapSecret wraps the data key of what SealSecret sealed under the current KEK,
// as Vault.Rotate does a connection's. It reports whether anything changed.
func (r *Keyring) RewrapSecret(env *Envelope, purpose, name string) (bool, error) {
	return r.rewrap(env, secret(purpose, name))
}

func (r *Keyring) sealBytes(plain []byte, b binding) (Envelope, error) {
	dataKey := random(32)
	defer clear(dataKey)
	aead, err := gcm(dataKey)
	if err != nil {
		return Envelope{}, fmt.Errorf("credentials: data key: %w", err)
	}
	nonce := random(aead.NonceSize())
	env := Envelope{Data: aead.Seal(nonce, nonce, plain, b.aad)}
	if err := r.wrap(&env, dataKey, b); err != nil {
		return Envelope{}, err
	}
	return env, nil
}

// wrap wraps dataKey under the current KEK into env.
func (r *Keyring) wrap(env *Envelope, dataKey []byte, b binding) error {
	kek := r.Current()
	aead, err := gcm(kek.secret)
	if err != nil {
		return fmt.Errorf("credentials: key %s: %w", kek.ID, err)
	}
	nonce := random(aead.NonceSize())
	env.KeyID = kek.ID
	env.WrappedKey = aead.Seal(nonce, nonce, dataKey, append(slices.Clone(b.aad), "\x00"+kek.ID...))
	return nil
}

// unwrap opens env's data key with the KEK it names.
func (r *Keyring) unwrap(env *Envelope, b binding) ([]byte, error) {
	kek, ok := r.key(env.KeyID)
	if !ok {
		return nil, fmt.Errorf("credentials: %s: wrapped under key %s, which this edge's key file does not hold", b.name, env.KeyID)
	}
	aead, err := gcm(kek.secret)
	if err != nil {
		return nil, fmt.Errorf("credentials: key %s: %w", kek.ID, err)
	}
	n := aead.NonceSize()
	if len(env.WrappedKey) < n {
		return nil, fmt.Errorf("credentials: %s: wrapped key too short", b.name)
	}
	dataKey, err := aead.Open(nil, env.WrappedKey[:n], env.WrappedKey[n:], append(slices.Clone(b.aad), "\x00"+kek.ID...))
	if err != nil {
		return nil, fmt.Errorf("credentials: %s: the data key does not open under key %s", b.name, kek.ID)
	}
	return dataKey, nil
}

// open decrypts env's values.
func (r *Keyring) open(env *Envelope, account, tool string) (map[string]string, error) {
	plain, err := r.openBytes(env, connection(account, tool))
	if err != nil {
		return nil, err
	}
	defer clear(plain)
	var values map[string]string
	if err := json.Unmarshal(plain, &values); err != nil {
		return nil, fmt.Errorf("credentials: %s/%s: decode", account, tool)
	}
	return values, nil
}

func (r *Keyring) openBytes(env *Envelope, b binding) ([]byte, error) {
	dataKey, err := r.unwrap(env, b)
	if err != nil {
		return nil, err
	}
	defer clear(dataKey)
	aead, err := gcm(dataKey)
	if err != nil {
		return nil, fmt.Errorf("credentials: data key: %w", err)
	}
	n := aead.NonceSize()
	if len(env.Data) < n {
		return nil, fmt.Errorf("credentials: %s: ciphertext too short", b.name)
	}
	plain, err := aead.Open(nil, env.Data[:n], env.Data[n:], b.aad)
	if err != nil {
		return nil, fmt.Errorf("credentials: %s: the values do not open", b.name)
	}
	return plain, nil
}

// rewrap wraps env's data key under the current KEK, leaving its values' ciphertext
// as it is. It reports whether anything changed.
func (r *Keyring) rewrap(env *Envelope, b binding) (bool, error) {
	if env.KeyID == r.Current().ID {
		return false, nil
	}
	dataKey, err := r.unwrap(env, b)
	if err != nil {
		return false, err
	}
	defer clear(dataKey)
	return true, r.wrap(env, dataKey, b)
}

// Fingerprint is a short keyed digest of a value, to tell whether a value was
// changed or is the one an administrator holds without showing it: HMAC-SHA256 under
// a key derived from the current KEK, so that it says nothing to whoever lacks the
// KEK, cut to 12 hex digits.
func (r *Keyring) Fingerprint(account, tool, field, value string) string {
	k := hmac.New(sha256.New, r.Current().secret)
	k.Write([]byte("toolgate-credential-fingerprint"))
	m := hmac.New(sha256.New, k.Sum(nil))
	m.Write([]byte(account + "\x00" + tool + "\x00" + field + "\x00" + value))
	return hex.EncodeToString(m.Sum(nil)[:6])
}
