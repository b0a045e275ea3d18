package wire

import (
	"bytes"
	"crypto/hmac"
	"crypto/sha256"
	"encoding/base64"
	"encoding/json"
	"errors"
	"fmt"
	"net/url"
	"regexp"
	"strings"

	"github.com/nats-io/nkeys"
)

// HeaderCredentials carries, on a call of a tool whose connection needs values, the
// calling account's values sealed to the tool's key (SealCredentials): only a worker
// holding the tool's seal key opens them.
const HeaderCredentials = "Tg-Credentials"

// Connection is what an account's connection to a tool needs, in the tool's record.
type Connection struct {
	// Fields are the values an account gives for its connection (a token, an API
	// key, a user name), each named once.
	Fields []Field `json:"fields,omitempty"`
	// OAuth is the OAuth 2 provider an account authorizes the tool at, when the
	// tool acts with an access token of the account's: each call brings it as the
	// value OAuthTokenField.
	OAuth *OAuthProvider `json:"oauth,omitempty"`
	// SealKey is the tool's X25519 public key (an nkeys curve key, "X..."), to which
	// an edge seals an account's values for each call.
	SealKey string `json:"seal_key,omitempty"`
}

// OAuthTokenField names, among a call's values, the account's OAuth access token
// for a tool whose connection declares a provider.
const OAuthTokenField = "access_token"

// The gateway's OAuth client paths, on the deployment's base URL: where providers
// send the account holder's browser back (the redirect URI registered with each), and
// the gateway's client ID metadata document, whose URL is its client id at an
// authorization server that takes such documents.
const (
	OAuthCallbackPath = "/oauth/callback"
	OAuthClientPath   = "/oauth/client"
)

// MissingOAuth names, among the values a connection misses, its authorization at
// the tool's OAuth provider.
const MissingOAuth = "oauth"

// OAuthProvider is where an account's connection to a tool is authorized: an issuer
// whose metadata names the endpoints (OpenID Connect discovery or RFC 8414), or the
// endpoints themselves; the scopes asked; and the client the deployment registered
// there. The client's secret, if it has one, is never in the record: the deployment
// sets it at the gateway (PUT /admin/tools/{tool}/oauth-client), which keeps it as
// it keeps credentials.
type OAuthProvider struct {
	Issuer           string   `json:"issuer,omitempty"`
	AuthorizationURL string   `json:"authorization_url,omitempty"`
	TokenURL         string   `json:"token_url,omitempty"`
	Scopes           []string `json:"scopes,omitempty"`
	ClientID         string   `json:"client_id"`
	// Resource is the resource indicator (RFC 8707) sent with the authorization
	// and token requests: the protected resource the token is for (a remote MCP
	// server's URL).
	Resource string `json:"resource,omitempty"`
	// IssResponse: the provider sends its issuer in the authorization response
	// (RFC 9207), which the callback then requires. A callback that brings another
	// issuer is refused either way.
	IssResponse bool `json:"iss_response,omitempty"`
	// RegistrationURL is where the gateway registers a client of its own (RFC 7591)
	// when the record names no ClientID; the registration, its secret included, is
	// kept enveloped by the edges, never in the record.
	RegistrationURL string `json:"registration_url,omitempty"`
	// TokenAuthMethods are the ways the token endpoint takes a client's
	// authentication (RFC 8414 token_endpoint_auth_methods_supported); none said:
	// client_secret_basic.
	TokenAuthMethods []string `json:"token_auth_methods,omitempty"`
}

// Needs reports whether an account's connection to the tool needs anything: values
// or an authorization.
func (c *Connection) Needs() bool {
	return c != nil && (len(c.Fields) > 0 || c.OAuth != nil)
}

// Field is one value of a connection.
type Field struct {
	Name        string `json:"name"`
	Secret      bool   `json:"secret,omitempty"`
	Description string `json:"description,omitempty"`
	// Optional: a connection without it is ready all the same.
	Optional bool `json:"optional,omitempty"`
}

// Field returns the field named name, or nil.
func (c *Connection) Field(name string) *Field {
	for i := range c.Fields {
		if c.Fields[i].Name == name {
			return &c.Fields[i]
		}
	}
	return nil
}

var fieldNamePattern = regexp.MustCompile(`^[A-Za-z_][A-Za-z0-9_]{0,63}$`)

// CheckConnection returns why c cannot be a tool's connection, or nil.
func CheckConnection(c *Connection) error {
	seen := map[string]bool{}
	for _, f := range c.Fields {
		if !fieldNamePattern.MatchString(f.Name) {
			return fmt.Errorf("connection field %q: must match %s", f.Name, fieldNamePattern)
		}
		if seen[f.Name] {
			return fmt.Errorf("connection field %s: declared twice", f.Name)
		}
		seen[f.Name] = true
	}
	if c.OAuth != nil {
		if err := checkOAuth(c.OAuth); err != nil {
			return err
		}
		if seen[OAuthTokenField] {
			return fmt.Errorf("connection field %s: the name of the OAuth access token, which a connection with a provider brings", OAuthTokenField)
		}
	}
	if c.SealKey != "" && !nkeys.IsValidPublicCurveKey(c.SealKey) {
		return errors.New("connection: seal key: not an X25519 public key")
	}
	return nil
}

// sealedCredentials is what HeaderCredentials seals: the values, bound to the
// account and tool they were sealed for, so that a value cannot be handed to a call
// of another account.
type sealedCredentials struct {
	Account string            `json:"account"`
	Tool    string            `json:"tool"`
	Values  map[string]string `json:"values"`
}

// SealCredentials seals account's values for tool to the tool's public key, from
// sender (a curve key pair of the sealing edge): the value of HeaderCredentials, the
// sender's public key and the sealed box.
func SealCredentials(sender nkeys.KeyPair, toolKey, account, tool string, values map[string]string) (string, error) {
	b, err := json.Marshal(sealedCredentials{Account: account, Tool: tool, Values: values})
	if err != nil {
		return "", fmt.Errorf("wire: credentials: %w", err)
	}
	box, err := sender.Seal(b, toolKey)
	clear(b)
	if err != nil {
		return "", fmt.Errorf("wire: credentials: seal: %w", err)
	}
	pub, err := sender.PublicKey()
	if err != nil {
		return "", fmt.Errorf("wire: credentials: %w", err)
	}
	return pub + "." + base64.RawURLEncoding.EncodeToString(box), nil
}

// OpenCredentials opens a HeaderCredentials value with the tool's key pair, and
// checks it was sealed for account and tool.
func OpenCredentials(kp nkeys.KeyPair, header, account, tool string) (map[string]string, error) {
	sender, enc, ok := strings.Cut(header, ".")
	box, err := base64.RawURLEncoding.DecodeString(enc)
	if !ok || err != nil {
		return nil, errors.New("wire: credentials: not a sealed value")
	}
	b, err := kp.Open(box, sender)
	if err != nil {
		return nil, fmt.Errorf("wire: credentials: open (sealed to another key?): %w", err)
	}
	defer clear(b)
	var s sealedCredentials
	if err := json.Unmarshal(b, &s); err != nil {
		return nil, errors.New("wire: credentials: not the sealed form")
	}
	if s.Account != account || s.Tool != tool {
		return nil, errors.New("wire: credentials: sealed for another account or tool")
	}
	return s.Values, nil
}

// The block of a tool's seal key in a worker's credentials file: beside the NATS
// user's JWT and seed, which NATS clients read as the first two blocks and which
// this one follows.
const (
	sealBlockBegin = "-----BEGIN TOOLGATE SEAL KEY %s-----\n"
	sealBlockEnd   = "------END TOOLGATE SEAL KEY %s------\n"
)

// DeriveSealKey is tool's seal key pair derived from secret (the deployment's
// account seed): every credentials file issued for the tool carries the same key, and
// only those files do.
func DeriveSealKey(secret []byte, tool string) (nkeys.KeyPair, error) {
	m := hmac.New(sha256.New, secret)
	m.Write([]byte("toolgate-seal-key\x00" + tool))
	// An X25519 private key is any 32 bytes: the HMAC is the key's seed itself.
	seed, err := nkeys.EncodeSeed(nkeys.PrefixByteCurve, m.Sum(nil))
	if err != nil {
		return nil, fmt.Errorf("wire: seal key of %s: %w", tool, err)
	}
	defer clear(seed)
	return nkeys.FromCurveSeed(seed)
}

// SealKeyBlock is the block of tool's seal key pair kp, to append to a credentials
// file.
func SealKeyBlock(kp nkeys.KeyPair, tool string) ([]byte, error) {
	seed, err := kp.Seed()
	if err != nil {
		return nil, fmt.Errorf("wire: seal key of %s: %w", tool, err)
	}
	return fmt.Appendf(nil, "\n"+sealBlockBegin+"%s\n"+sealBlockEnd, tool, seed, tool), nil
}

// ErrNoSealKey: a credentials file carries no seal key for the tool.
var ErrNoSealKey = errors.New("no seal key for the tool")

// ParseSealKey finds tool's seal key in a credentials file's contents.
func ParseSealKey(creds []byte, tool string) (nkeys.KeyPair, error) {
	_, rest, ok := bytes.Cut(creds, fmt.Appendf(nil, sealBlockBegin, tool))
	if !ok {
		return nil, ErrNoSealKey
	}
	seed, _, ok := bytes.Cut(rest, fmt.Appendf(nil, sealBlockEnd, tool))
	if !ok {
		return nil, ErrNoSealKey
	}
	kp, err := nkeys.FromCurveSeed(bytes.TrimSpace(seed))
	if err != nil {
		return nil, fmt.Errorf("wire: seal key of %s: %w", tool, err)
	}
	return kp, nil
}

// checkOAuth returns why p cannot be a connection's provider, or nil.
func checkOAuth(p *OAuthProvider) error {
	if p.ClientID == "" && p.RegistrationURL == "" {
		return errors.New("connection: oauth: client_id or registration_url: required")
	}
	if p.Issuer == "" && (p.AuthorizationURL == "" || p.TokenURL == "") {
		return errors.New("connection: oauth: an issuer, or both authorization_url and token_url, required")
	}
	if p.IssResponse && p.Issuer == "" {
		return errors.New("connection: oauth: iss_response: the issuer is required to check it")
	}
	for name, raw := range map[string]string{"issuer": p.Issuer, "authorization_url": p.AuthorizationURL, "token_url": p.TokenURL, "resource": p.Resource, "registration_url": p.RegistrationURL} {
		if raw == "" {
			continue
		}
		if u, err := url.Parse(raw); err != nil || (u.Scheme != "https" && u.Scheme != "http") || u.Host == "" || u.Fragment != "" {
			return fmt.Errorf("connection: oauth: %s: %q is not an absolute http(s) URL", name, raw)
		}
	}
	for _, s := range p.Scopes {
		if s == "" || strings.ContainsAny(s, " \t\n\"\\") {
			return fmt.Errorf("connection: oauth: scope %q: a scope is one token, without spaces or quotes", s)
		}
	}
	return nil
}
