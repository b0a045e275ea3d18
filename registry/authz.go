package registry

import (
	"slices"
	"time"
)

// Authorization: who a request is made for (a Principal, from an API key or a link)
// and what it may see and call. Every door asks here, against one Snapshot: the edge's
// HTTP API and MCP routes, the MCP server (sse) for each request and for the sessions
// a credential opened, the dashboard for its sign-ins, and the gateway for each call.
// Nothing here reads the network: a Snapshot holds everything it needs.

// Principal is who a call is made for: an account, reached through an API key or
// through the SSE link of one tool.
type Principal struct {
	Account string
	Key     *Key   // set when authenticated by API key
	Tool    string // set when authenticated by link or access token: the only tool it reaches
	// Set when authenticated by an OAuth access token: the client it was issued to,
	// the user who signed in (if any), and the grant it came from.
	Client, User, Grant string
}

// ManagesKeys reports whether p may make and revoke its account's keys: only a key
// that reaches every tool of the account may, or a key scoped to one tool could mint
// itself a wider one.
func (p Principal) ManagesKeys() bool { return p.Key != nil && len(p.Key.Scopes) == 0 }

// AuthenticateKey finds the usable key secret names. Every failure is
// ErrUnauthenticated, so the answer does not tell unknown from revoked or expired.
func (s *Snapshot) AuthenticateKey(secret string, now time.Time) (Principal, error) {
	if secret == "" {
		return Principal{}, ErrUnauthenticated
	}
	h := hashHex(secret)
	return s.keyPrincipal(string(h[:]), s.keys[string(h[:])], now)
}

// keyPrincipal is the principal of key k, filed under hash, if it authenticates at
// now: it is neither revoked nor expired, and its account exists.
func (s *Snapshot) keyPrincipal(hash string, k *Key, now time.Time) (Principal, error) {
	if k == nil || !k.Usable(now) || s.accounts[k.Account] == nil || s.Revoked(RevokedKey, hash) || s.revokedAccount(k.Account, "") {
		return Principal{}, ErrUnauthenticated
	}
	return Principal{Account: k.Account, Key: k}, nil
}

// AuthenticateKeyID finds again a key that authenticated before, by its id: the
// principal of a sign-in or an MCP session it opened, as long as the key still
// authenticates for account at now (it exists, under hash when hash is not empty, is
// neither revoked nor expired, and its account exists). Every failure is
// ErrUnauthenticated.
func (s *Snapshot) AuthenticateKeyID(id, hash, account string, now time.Time) (Principal, error) {
	h, k := s.KeyByID(id)
	if k == nil || (hash != "" && h != hash) || k.Account != account || !k.Usable(now) || s.accounts[account] == nil ||
		s.Revoked(RevokedKey, h) || s.revokedAccount(account, "") {
		return Principal{}, ErrUnauthenticated
	}
	return Principal{Account: account, Key: k}, nil
}

// AuthenticateLink finds the live link token names.
func (s *Snapshot) AuthenticateLink(token string) (Principal, error) {
	if token == "" {
		return Principal{}, ErrUnauthenticated
	}
	h := hashHex(token)
	return s.linkPrincipal(string(h[:]), s.links[string(h[:])])
}

// linkPrincipal is the principal of link l, filed under hash, if its account and
// connection exist and it was not revoked.
func (s *Snapshot) linkPrincipal(hash string, l *Link) (Principal, error) {
	if l == nil || s.accounts[l.Account] == nil || s.conns[l.Account][l.Tool] == nil || s.Revoked(RevokedLink, hash) ||
		s.revokedAccount(l.Account, l.Tool) {
		return Principal{}, ErrUnauthenticated
	}
	return Principal{Account: l.Account, Tool: l.Tool}, nil
}

// Tool returns the tool id as p may see it: ErrToolNotFound when it does not exist or
// is not connected to p's account, ErrForbidden when p's key is scoped away from it.
// Of a tool whose methods differ per account, p's account sees only its own.
func (s *Snapshot) Tool(p Principal, id string) (*ToolEntry, error) {
	t := s.tools[id]
	if t == nil || s.conns[p.Account][id] == nil || (p.Tool != "" && p.Tool != id) || s.revokedAccount(p.Account, id) {
		return nil, ErrToolNotFound
	}
	if p.Key != nil && !p.Key.Allows(id) {
		return nil, ErrForbidden
	}
	return t.forAccount(p.Account), nil
}

// Method returns a method of a tool as p may see it.
func (s *Snapshot) Method(p Principal, tool, method string) (*MethodEntry, error) {
	t, err := s.Tool(p, tool)
	if err != nil {
		return nil, err
	}
	m := t.Method(method)
	if m == nil {
		return nil, ErrMethodNotFound
	}
	return m, nil
}

// Tools lists, by id, the tools p may call: connected to its account, deployed, and
// within its key's scopes.
func (s *Snapshot) Tools(p Principal) []*ToolEntry {
	conns := s.conns[p.Account]
	out := make([]*ToolEntry, 0, len(conns))
	for id := range conns {
		if t, err := s.Tool(p, id); err == nil {
			out = append(out, t)
		}
	}
	slices.SortFunc(out, func(a, b *ToolEntry) int { return cmpString(a.Tool.ID, b.Tool.ID) })
	return out
}

// Usable reports whether the key authenticates at now.
func (k *Key) Usable(now time.Time) bool {
	if k.RevokedAt != nil {
		return false
	}
	return k.ExpiresAt == nil || now.Before(*k.ExpiresAt)
}

// Allows reports whether the key's scopes include tool.
func (k *Key) Allows(tool string) bool {
	if len(k.Scopes) == 0 {
		return true
	}
	return slices.Contains(k.Scopes, tool)
}
