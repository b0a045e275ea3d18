package dashboard

import (
	"context"
	"net/http"
	"net/url"
	"time"

	"github.com/toolgate/toolgate/credentials"
	"github.com/toolgate/toolgate/edge"
	"github.com/toolgate/toolgate/registry"
)

// connects reports whether the account holder connects t here: t's connection is
// authorized at an OAuth provider, and this edge runs OAuth connections.
func (d *Dashboard) connects(t *registry.Tool) bool {
	return d.cfg.Connector != nil && d.cfg.Connector.OAuth() && t.Connection != nil && t.Connection.OAuth != nil
}

// authorization is the state of account's authorization of t at its provider.
func (d *Dashboard) authorization(ctx context.Context, account string, t *registry.Tool) string {
	r, _, err := d.cfg.Connector.Lookup(ctx, account, t)
	switch {
	case err != nil:
		d.log.Warn("dashboard: a connection's record", "tool", t.ID, "err", err)
		return "unknown"
	case credentials.Reauthorize(r):
		return "needs reauthorization"
	case r == nil || r.Grant == nil:
		return "not connected"
	}
	return "connected"
}

// connectTool begins the signed-in account's authorization of a tool at its OAuth
// provider and sends the browser there; the provider sends it back to the edge's
// callback, which needs the cookie set here to finish (so that a flow begun here
// cannot be finished in another person's browser).
func (d *Dashboard) connectTool(w http.ResponseWriter, r *http.Request, v *visit) {
	t, _, ok := d.tool(w, r, v)
	if !ok {
		return
	}
	if !d.connects(t.Tool) {
		d.fail(w, r, v, http.StatusNotFound, "This tool is not connected through an authorization here.")
		return
	}
	browser := credentials.BrowserBinding()
	to, err := d.cfg.Connector.BeginOAuth(r.Context(), v.principal.Account, t.Tool, browser)
	if err != nil {
		d.log.Error("dashboard: connect", "tool", t.Tool.ID, "err", err)
		d.fail(w, r, v, http.StatusBadGateway, "The tool's authorization could not begin: its provider may be unreachable. Try again later.")
		return
	}
	path := edge.OAuthCallbackPath
	if u, err := url.Parse(d.cfg.BaseURL); err == nil {
		path = u.Path + path
	}
	http.SetCookie(w, &http.Cookie{Name: edge.OAuthBrowserCookie, Value: browser, Path: path, MaxAge: int((10 * time.Minute).Seconds()),
		HttpOnly: true, Secure: d.secure(r), SameSite: http.SameSiteLaxMode})
	http.Redirect(w, r, to, http.StatusSeeOther)
}
