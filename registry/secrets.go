package registry

import (
	"crypto/hmac"
	"crypto/rand"
	"crypto/sha256"
	"encoding/hex"
	"errors"
	"math/big"
)

const base62Alphabet = "0123456789ABCDEFGHIJKLMNOPQRSTUVWXYZabcdefghijklmnopqrstuvwxyz"

// Secret prefixes: a key and a link token can be told apart at a glance, and by
// secret scanners.
const (
	KeyPrefix  = "tg_"
	LinkPrefix = "tgl_"
	// KeyPrefixLen is how many characters of a key are kept to recognise it by.
	KeyPrefixLen = len(KeyPrefix) + 6
)

// base62 encodes b as a fixed-width base62 string (43 characters for 32 bytes).
func base62(b []byte) string {
	n := new(big.Int).SetBytes(b)
	width := (len(b)*8*1000 + 5953) / 5954 // ceil(bits / log2(62))
	out := make([]byte, width)
	base := big.NewInt(62)
	mod := new(big.Int)
	for i := width - 1; i >= 0; i-- {
		n.DivMod(n, base, mod)
		out[i] = base62Alphabet[mod.Int64()]
	}
	return string(out)
}

func randomBytes(n int) []byte {
	b := make([]byte, n)
	if _, err := rand.Read(b); err != nil {
		panic("registry: crypto/rand: " + err.Error()) // cannot happen on supported platforms
	}
	return b
}

// NewKey returns a fresh API key: "tg_" and 32 random bytes in base62.
func NewKey() string { return KeyPrefix + base62(randomBytes(32)) }

// NewID returns a short random identifier with the given prefix, for records that
// need a public name (key ids, session ids, nonces).
func NewID(prefix string) string { return prefix + base62(randomBytes(16)) }

// Hash is the hex sha256 under which a secret's record is filed. Lookups go by this
// hash, so finding a record reveals nothing about how close a wrong secret came.
func Hash(secret string) string {
	h := hashHex(secret)
	return string(h[:])
}

// hashHex is Hash in an array, for lookups in maps keyed by Hash: indexing a map with
// string(h[:]) copies nothing, and a request's key is looked up on every request.
func hashHex(secret string) [2 * sha256.Size]byte {
	sum := sha256.Sum256([]byte(secret))
	var h [2 * sha256.Size]byte
	hex.Encode(h[:], sum[:])
	return h
}

// LinkSigner derives SSE link tokens from a deployment secret. A link token must be
// shown again after it is made (the dashboard, get-tools and the installer show it),
// yet only its hash may be stored; deriving it as an HMAC of the connection and a
// per-link nonce lets any edge holding the secret show it, and rotating the nonce
// kills the old link.
type LinkSigner struct {
	secret []byte
}

// ErrShortLinkSecret is returned for a link secret too short to be a key.
var ErrShortLinkSecret = errors.New("link secret: must be at least 32 bytes")

// NewLinkSigner returns a signer for secret (at least 32 bytes).
func NewLinkSigner(secret []byte) (*LinkSigner, error) {
	if len(secret) < 32 {
		return nil, ErrShortLinkSecret
	}
	return &LinkSigner{secret: append([]byte(nil), secret...)}, nil
}

// NewLinkSecret returns 32 random bytes, hex-encoded, to keep in a file.
func NewLinkSecret() string { return hex.EncodeToString(randomBytes(32)) }

// Token is the link token of account's connection to tool with nonce.
func (s *LinkSigner) Token(account, tool, nonce string) string {
	m := hmac.New(sha256.New, s.secret)
	m.Write([]byte("toolgate-link\x00" + account + "\x00" + tool + "\x00" + nonce))
	return LinkPrefix + base62(m.Sum(nil))
}
