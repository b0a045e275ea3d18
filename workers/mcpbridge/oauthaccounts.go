package mcpbridge

import (
	"cmp"
	"context"
	"crypto/sha256"
	"fmt"
	"maps"
	"net/http"
	"slices"
	"strings"
	"sync"
	"time"

	"github.com/modelcontextprotocol/go-sdk/oauthex"

	"github.com/toolgate/toolgate/bus/wire"
	"github.com/toolgate/toolgate/workers"
)

// A remote server that requires OAuth (Config.OAuth) refuses everything without an
// account's token, its tools/list included, so the bridge cannot list the tool's
// methods at start as it does for other servers. It declares the server's OAuth
// provider as the tool's connection instead, with no methods, and opens no shared
// session. Every request of an account then goes to an upstream session of that
// account's own, whose every HTTP request carries the account's access token; the
// first such session that lists the server's tools (an MCP client's tools/list,
// which edges send to the bridge with the account's sealed token) makes the tools
// the tool's methods, and the latest list any account's session read stays so after
// the session ends.

// CodeConnectionRequired is the error code of a call whose account's token the
// server refused: 401, or 403 for a scope the token lacks. The gateway answers it as
// its own connection_required, with the tool's connect URL.
const CodeConnectionRequired = "connection_required"

// maxRefusals bounds the refused tokens remembered; past it the oldest are forgotten.
const maxRefusals = 4096

// refusal is what the server answered an account's token with.
type refusal struct {
	status int
	scope  string // the scope a 403 insufficient_scope asked for
	at     time.Time
}

// oauthState is the bridge's state for a server that requires OAuth.
type oauthState struct {
	mu       sync.Mutex
	refused  map[[32]byte]refusal // by the token's hash
	provider *wire.OAuthProvider
	asked    []string // scopes the server asked for (403 insufficient_scope), not yet declared
	known    *session // holds the latest tools an account's session listed
	moving            // the provider found again after a refusal (oauthmove.go)
}

// startOAuth finds the server's provider and makes the tool that declares it as its
// connection, with no methods yet, holding its client sessions (SessionTools,
// SessionState) so that a client's tools/list reaches the bridge.
func (b *Bridge) startOAuth(ctx context.Context) (workers.Tool, error) {
	p, err := DiscoverOAuth(ctx, b.cfg.URL, *b.cfg.OAuth)
	if err != nil {
		return workers.Tool{}, fmt.Errorf("mcp: tool %s: %w", b.cfg.Tool, err)
	}
	b.oauth.provider = p
	b.log.Info("the server requires OAuth; each account connects at its provider", "issuer", p.Issuer, "resource", p.Resource, "scopes", p.Scopes)
	return workers.Tool{ID: b.cfg.Tool, Title: cmp.Or(b.cfg.Title, b.cfg.Tool), OAuth: p,
		Capabilities: workers.Capabilities{SessionTools: true, SessionState: true}}, nil
}

// tokenOf is the account's access token among a call's values.
func tokenOf(values map[string]string) string { return values["access_token"] }

// noteRefusal remembers that the server refused the token in values with res.
func (b *Bridge) noteRefusal(values map[string]string, res *http.Response) {
	r := refusal{status: res.StatusCode, at: time.Now()}
	if res.StatusCode == http.StatusForbidden {
		challenges, _ := oauthex.ParseWWWAuthenticate(res.Header.Values("WWW-Authenticate"))
		for _, ch := range challenges {
			// RFC 6750's error; a server that sends none (the go-sdk's bearer check)
			// still names the scope it requires.
			if e := ch.Params["error"]; ch.Scheme == "bearer" && (e == "insufficient_scope" || e == "") {
				r.scope = ch.Params["scope"]
			}
		}
		if r.scope == "" {
			return // refused for something else than the token
		}
	}
	o := b.oauth
	o.mu.Lock()
	defer o.mu.Unlock()
	if len(o.refused) >= maxRefusals {
		clear(o.refused)
	}
	o.refused[sha256.Sum256([]byte(tokenOf(values)))] = r
	if r.status == http.StatusUnauthorized {
		b.rediscover()
	}
	if r.scope != "" {
		b.log.Warn("the server asks for a larger scope; the account must connect again", "scope", r.scope)
		o.asked = append(o.asked, strings.Fields(r.scope)...)
		select {
		case b.changed <- struct{}{}: // the record is put again, with the scope (stepUp)
		default:
		}
	}
}

// stepUp adds the scopes the server asked for to those the tool's provider
// declares, so that the next authorization of an account asks for them too. Only
// the goroutine that puts the tool's record (follow) calls it: the worker reads the
// provider there.
func (b *Bridge) stepUp() {
	if b.oauth == nil {
		return
	}
	o := b.oauth
	o.mu.Lock()
	defer o.mu.Unlock()
	o.move()
	scopes := slices.Clone(o.provider.Scopes)
	for _, s := range o.asked {
		if !slices.Contains(scopes, s) {
			scopes = append(scopes, s)
		}
	}
	o.provider.Scopes, o.asked = scopes, nil
}

// refused is the error of a call whose token the server refused, or nil.
func (b *Bridge) refused(values map[string]string) error {
	if b.oauth == nil {
		return nil
	}
	o := b.oauth
	o.mu.Lock()
	r, ok := o.refused[sha256.Sum256([]byte(tokenOf(values)))]
	o.mu.Unlock()
	switch {
	case !ok:
		return nil
	case r.scope != "":
		return &workers.Error{Code: CodeConnectionRequired, Status: http.StatusConflict, Data: map[string]string{"scope": r.scope},
			Message: "the server requires the scope " + r.scope + ", which the account's authorization lacks: connect again"}
	}
	return &workers.Error{Code: CodeConnectionRequired, Status: http.StatusConflict,
		Message: "the server refused the account's token: connect again"}
}

// notConnected is the error of a request that brings no token.
func notConnected() error {
	return &workers.Error{Code: CodeConnectionRequired, Status: http.StatusConflict,
		Message: "the account has not connected the tool at its OAuth provider"}
}

// oauthHeader adds the account's token to h.
func oauthHeader(h http.Header, values map[string]string) {
	if t := tokenOf(values); t != "" {
		h.Set("Authorization", "Bearer "+t)
	}
}

// knownTools keeps, for a server that requires OAuth, the latest list an account's
// session read among sessions (sorted newest first) as a session of its own, so that
// the tool keeps its methods once that session ends; it returns sessions with it.
func (b *Bridge) knownTools(sessions []*session) []*session {
	if b.oauth == nil {
		return sessions
	}
	known := b.oauth.known
	for _, s := range sessions {
		if s != known && s.tools != nil && s.listedAt.After(known.listedAt) {
			known.tools, known.listedAt = s.tools, s.listedAt
			break
		}
	}
	return append(sessions, known)
}

// oauthAcquired is acquire's error for an OAuth server's account: the server's
// refusal of its token when that is why the session could not open.
func (b *Bridge) oauthAcquired(values map[string]string, err error) error {
	if r := b.refused(values); r != nil && err != nil {
		return r
	}
	return err
}

// accountTools answers a tools/list without an MCP session, for a server that
// requires OAuth: the tools the account's session lists, with its token, which
// become the tool's methods (the edge that completed the account's connection asks).
func (b *Bridge) accountTools(ctx context.Context, c *workers.Call) (any, error) {
	in, err := b.acquire(ctx, c, "")
	if err != nil {
		return nil, err
	}
	defer b.release(in)
	if err := b.list(ctx, in.s); err != nil {
		return nil, b.oauthAcquired(in.s.values, rpcError(ctx, err))
	}
	b.mu.Lock()
	tools := slices.Collect(maps.Values(in.s.tools))
	b.mu.Unlock()
	return map[string]any{"tools": tools}, nil
}
