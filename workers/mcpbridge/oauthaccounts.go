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

	"github.com/modelcontextprotocol/go-sdk/mcp"
	"github.com/modelcontextprotocol/go-sdk/oauthex"

	"github.com/toolgate/toolgate/bus/wire"
	"github.com/toolgate/toolgate/workers"
)

// A remote server that requires OAuth (Config.OAuth) refuses everything without an
// account's token, its tools/list included, so the bridge cannot list the tool's
// methods at start as it does for other servers. It declares the server's OAuth
// provider as the tool's connection instead, with no methods, and opens no shared
// session. Every request of an account then goes to an upstream session of that
// account's own, whose every HTTP request carries the account's access token.
//
// What the server lists differs per token: each account sees and calls only the
// tools the server listed to its own. The bridge keeps, per account, the latest
// list one of its sessions read (an MCP client's tools/list, or the one edges send
// with the account's sealed token once it connects), up to Config.AccountLists
// accounts; the tool's methods are every tool some kept list holds, and its record
// says which of them each account's list names (wire.AccountMethods), so that edges
// show and take an account's calls of its own only. A call of a tool its session's
// list lacks is refused here too, before it reaches the server.

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
	asked    []string          // scopes the server asked for (403 insufficient_scope), not yet declared
	lists    map[string]listed // by account; under the Bridge's mu
	moving                     // the provider found again after a refusal (oauthmove.go)
}

// listed is the latest tools/list one of an account's sessions read.
type listed struct {
	tools map[string]*mcp.Tool
	at    time.Time
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

// accountLists keeps, per account, the latest list its sessions read, forgetting
// the least recently listed accounts past Config.AccountLists, and returns every
// tool a kept list holds (as the newest such list describes it) and each account's
// tools. b.mu is held.
func (b *Bridge) accountLists() (map[string]*mcp.Tool, map[string]map[string]*mcp.Tool) {
	o := b.oauth
	for _, held := range []map[string]*session{b.clients, b.accounts} {
		for _, s := range held {
			if l, ok := o.lists[s.acting]; s.acting != "" && s.tools != nil && (!ok || s.listedAt.After(l.at)) {
				o.lists[s.acting] = listed{tools: s.tools, at: s.listedAt}
			}
		}
	}
	for len(o.lists) > b.cfg.AccountLists {
		oldest := ""
		for account, l := range o.lists {
			if oldest == "" || l.at.Before(o.lists[oldest].at) {
				oldest = account
			}
		}
		delete(o.lists, oldest)
	}
	tools, newest := map[string]*mcp.Tool{}, map[string]time.Time{}
	per := make(map[string]map[string]*mcp.Tool, len(o.lists))
	for account, l := range o.lists {
		per[account] = l.tools
		for name, t := range l.tools {
			if l.at.After(newest[name]) {
				tools[name], newest[name] = t, l.at
			}
		}
	}
	return tools, per
}

// accountMethods is, for a server that requires OAuth (per is not nil), which
// methods each account may see and call: the names (names, by MCP name) of the
// tools its list holds, each distinct list filed once.
func accountMethods(per map[string]map[string]*mcp.Tool, names map[string]string) *wire.AccountMethods {
	if per == nil {
		return nil
	}
	a := &wire.AccountMethods{Lists: map[string][]string{}, Accounts: make(map[string]string, len(per))}
	for account, tools := range per {
		list := make([]string, 0, len(tools))
		for name := range tools {
			list = append(list, names[name])
		}
		slices.Sort(list)
		key := wire.ListKey(list)
		a.Lists[key], a.Accounts[account] = list, key
	}
	return a
}

// offers refuses a call of tool (an MCP name) on in's session, for a server that
// requires OAuth, unless the server listed it to that session's token: another
// account's list may hold it, this one's not. A session that has not listed its
// tools yet lists them first.
func (b *Bridge) offers(ctx context.Context, in *inflight, tool string) error {
	if b.oauth == nil {
		return nil
	}
	b.mu.Lock()
	listedYet := in.s.tools != nil
	b.mu.Unlock()
	if !listedYet {
		if err := b.list(ctx, in.s); err != nil {
			return b.oauthAcquired(in.s.values, rpcError(ctx, err))
		}
	}
	b.mu.Lock()
	defer b.mu.Unlock()
	if in.s.tools[tool] == nil {
		return &workers.Error{Code: workers.CodeMethodNotFound, Status: http.StatusNotFound,
			Message: "the server does not offer this tool to the account's connection"}
	}
	return nil
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
// become the account's methods (the edge that completed the account's connection
// asks, and one whose record holds no list of a ready account's).
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
