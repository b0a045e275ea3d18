package dashboard

import (
	"context"
	"net/http"
	"net/url"
	"strings"

	"github.com/toolgate/toolgate/audit"
	"github.com/toolgate/toolgate/oauth"
	"github.com/toolgate/toolgate/registry"
)

// The deployment's authorization server (package oauth) signs a user in and asks
// consent here: an MCP client sends the browser to oauth/consent?id=<request>; the
// user signs in with an API key of the account or as a user of it (as for the
// dashboard itself), sees
// which client asks for which tool and scopes, and allows or refuses. What was
// allowed is listed on the keys page, where it can be revoked.

type consentView struct {
	Request oauth.Consent
	Tool    string
}

// ConsentPath is the consent page's path under the dashboard's prefix, for the
// authorization server's login URL.
const ConsentPath = "oauth/consent"

// consentNext is a sign-in's way back to a consent page: only such a path, so the
// sign-in form redirects nowhere else.
func consentNext(next string) bool {
	id, ok := strings.CutPrefix(next, ConsentPath+"?id=")
	return ok && id != "" && !strings.ContainsAny(id, "/?#&%:\\")
}

// resourceTool is the tool a resource (a link or a tool's MCP endpoint of this
// deployment) reaches for p, or false when it is not p's.
func (d *Dashboard) resourceTool(ctx context.Context, p registry.Principal, resource string) (string, bool) {
	snap := d.view.Snapshot()
	rest, ok := strings.CutPrefix(resource, strings.TrimSuffix(d.cfg.BaseURL, "/"))
	if !ok {
		return "", false
	}
	if link, ok := strings.CutPrefix(rest, "/mcp/"); ok {
		lp, err := d.view.AuthenticateLink(ctx, link)
		if err != nil || lp.Account != p.Account {
			return "", false
		}
		_, err = snap.Tool(p, lp.Tool)
		return lp.Tool, err == nil
	}
	if t, ok := strings.CutPrefix(rest, "/tools/"); ok {
		tool, endpoint, _ := strings.Cut(t, "/")
		if endpoint != "mcp" && endpoint != "sse" {
			return "", false
		}
		_, err := snap.Tool(p, tool)
		return tool, err == nil
	}
	return "", false
}

func (d *Dashboard) consentPage(w http.ResponseWriter, r *http.Request, v *visit) {
	c, tool, ok := d.consentRequest(w, r, v, r.URL.Query().Get("id"))
	if !ok {
		return
	}
	// The answer redirects to the client: its origin (or its scheme, for an app's
	// own) joins the form's allowed targets.
	if u, err := url.Parse(c.RedirectURI); err == nil && u.Scheme != "" {
		target := u.Scheme + ":"
		if u.Host != "" {
			target = u.Scheme + "://" + u.Host
		}
		if !strings.ContainsAny(target, " ;,'\"") {
			w.Header().Set("Content-Security-Policy", contentPolicy("'self' "+target))
		}
	}
	d.render(w, http.StatusOK, "consent", d.page(v, "Allow access", "", consentView{Request: c, Tool: tool}))
}

// consentRequest finds the request id and the tool it asks for, or answers why not.
func (d *Dashboard) consentRequest(w http.ResponseWriter, r *http.Request, v *visit, id string) (oauth.Consent, string, bool) {
	if d.cfg.SignIn == nil && d.cfg.IdP != "" {
		d.fail(w, r, v, http.StatusNotFound, "MCP clients sign in at this deployment's identity provider, "+d.cfg.IdP+", not on this dashboard.")
		return oauth.Consent{}, "", false
	}
	if d.cfg.SignIn == nil {
		d.fail(w, r, v, http.StatusNotFound, "This deployment does not offer sign-in for MCP clients.")
		return oauth.Consent{}, "", false
	}
	c, err := d.cfg.SignIn.Request(r.Context(), id)
	if err != nil {
		d.fail(w, r, v, http.StatusNotFound, "This sign-in request is unknown, already answered or expired. Start again from your MCP client.")
		return c, "", false
	}
	tool, ok := d.resourceTool(r.Context(), v.principal, c.Resource)
	if !ok {
		d.fail(w, r, v, http.StatusForbidden, "The client asks for "+c.Resource+", which is not a link or tool of this account that your key reaches.")
		return c, "", false
	}
	if len(c.Scopes) == 0 { // it named none: it asks for what the resource offers
		c.Scopes = oauth.ToolScopes(tool)
	}
	return c, tool, true
}

func (d *Dashboard) answerConsent(w http.ResponseWriter, r *http.Request, v *visit) {
	id := r.PostForm.Get("id")
	c, tool, ok := d.consentRequest(w, r, v, id)
	if !ok {
		return
	}
	var next string
	var err error
	allow := r.PostForm.Get("decision") == "allow"
	if allow {
		next, err = d.cfg.SignIn.Approve(r.Context(), id, v.principal.Account, v.principal.User, tool)
	} else {
		next, err = d.cfg.SignIn.Deny(r.Context(), id)
	}
	if err != nil {
		d.log.Error("dashboard: consent", "account", v.principal.Account, "err", err)
		d.fail(w, r, v, http.StatusInternalServerError, "Your answer could not be recorded. Start again from your MCP client.")
		return
	}
	if allow {
		d.log.Info("dashboard: access granted", "account", v.principal.Account, "user", v.principal.User, "client", c.Client, "tool", tool)
		d.record(w, r, v, audit.Record{Method: audit.ActionGrantAccess, Tool: tool, User: v.principal.User, Client: c.Client})
	}
	http.Redirect(w, r, next, http.StatusSeeOther)
}

func (d *Dashboard) revokeGrant(w http.ResponseWriter, r *http.Request, v *visit) {
	if !d.mayManageKeys(w, r, v) {
		return
	}
	if d.cfg.SignIn == nil {
		d.fail(w, r, v, http.StatusNotFound, "There is no such access on this account.")
		return
	}
	g, err := d.cfg.SignIn.RevokeGrant(r.Context(), v.principal.Account, r.PathValue("id"))
	if err != nil {
		d.fail(w, r, v, http.StatusNotFound, "There is no such access on this account.")
		return
	}
	d.log.Info("dashboard: access revoked", "account", v.principal.Account, "grant", g.ID)
	d.record(w, r, v, audit.Record{Method: audit.ActionRevokeAccess, Tool: g.Tool, User: g.User, Client: g.Client})
	d.redirect(w, r, "keys?access=revoked")
}

// signInNext is where a sign-in form sends the browser afterwards: a consent page it
// came from, or the dashboard's home. It reads a form only once the handler parsed
// it: a sign-in refused before its body is read is answered without waiting for it.
func signInNext(r *http.Request) string {
	next := r.URL.Query().Get("next")
	if r.PostForm != nil && r.PostForm.Has("next") {
		next = r.PostForm.Get("next")
	}
	if consentNext(next) {
		return next
	}
	return ""
}

// signInWithNext is the sign-in page's path that comes back to r's consent page.
func signInWithNext(r *http.Request, prefix string) string {
	rel := strings.TrimPrefix(r.URL.Path, prefix) + "?" + r.URL.RawQuery
	if !consentNext(rel) {
		return "signin"
	}
	return "signin?next=" + url.QueryEscape(rel)
}
