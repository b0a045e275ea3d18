// Package dashboard is the deployment dashboard: the web pages where a user signs in
// with an account's API key and finds, for each tool on the account, the command
// that installs it in an MCP client, its SSE link with ready-to-paste client
// configurations, and its methods with a form to try them; manages the account's
// keys and rotates links; and shows the account's own calls (from the audit trail)
// and its quotas' use. Pages are rendered on the server and work without
// JavaScript; sessions live in NATS, so any edge serves any user.
package dashboard

import (
	"bytes"
	"context"
	"crypto/sha256"
	"embed"
	"encoding/hex"
	"errors"
	"fmt"
	"html/template"
	"io/fs"
	"log/slog"
	"net/http"
	"net/url"
	"strconv"
	"strings"
	"time"

	"github.com/toolgate/toolgate/gateway"
	"github.com/toolgate/toolgate/registry"
)

//go:embed templates/*.html
var templateFS embed.FS

//go:embed static
var staticFS embed.FS

// Dashboard serves the dashboard's pages under its prefix.
type Dashboard struct {
	cfg      Config
	gw       *gateway.Gateway
	view     *registry.View
	store    *registry.Store
	signer   *registry.LinkSigner
	log      *slog.Logger
	sessions *sessions
	pages    map[string]*template.Template
	assets   map[string]asset
	handler  http.Handler
	now      func() time.Time
}

// asset is an embedded static file with the version its URL carries, so that browsers
// may cache it for good.
type asset struct {
	body        []byte
	contentType string
	version     string
}

// New returns a dashboard that runs calls through gw, manages keys and links in
// store, and shows links signed by signer. It creates the session bucket if needed.
func New(cfg Config, gw *gateway.Gateway, store *registry.Store, signer *registry.LinkSigner, log *slog.Logger) (*Dashboard, error) {
	if err := cfg.Validate(); err != nil {
		return nil, err
	}
	switch {
	case gw == nil:
		return nil, errors.New("dashboard: a gateway is required")
	case store == nil:
		return nil, errors.New("dashboard: a registry store is required")
	case signer == nil:
		return nil, errors.New("dashboard: a link signer is required")
	}
	if log == nil {
		log = slog.Default()
	}
	d := &Dashboard{
		cfg: cfg, gw: gw, view: gw.View(), store: store, signer: signer, log: log,
		now: func() time.Time { return time.Now().UTC() },
	}
	var err error
	if d.pages, err = parsePages(); err != nil {
		return nil, err
	}
	if d.assets, err = loadAssets(); err != nil {
		return nil, err
	}
	ctx, cancel := context.WithTimeout(context.Background(), 30*time.Second)
	defer cancel()
	if d.sessions, err = openSessions(ctx, store, cfg.SessionLifetime); err != nil {
		return nil, err
	}
	d.handler = d.routes()
	return d, nil
}

// ServeHTTP serves every path under the configured prefix.
func (d *Dashboard) ServeHTTP(w http.ResponseWriter, r *http.Request) {
	d.handler.ServeHTTP(w, r)
}

func (d *Dashboard) routes() http.Handler {
	p := d.cfg.Prefix
	mux := http.NewServeMux()
	mux.HandleFunc("GET "+p+"{$}", d.signedIn(d.toolsPage))
	mux.HandleFunc("GET "+p+"signin", d.signInPage)
	mux.HandleFunc("POST "+p+"signin", d.signIn)
	mux.HandleFunc("POST "+p+"signout", d.signedIn(d.signOut))
	mux.HandleFunc("GET "+p+"tools/{tool}", d.signedIn(d.toolPage))
	mux.HandleFunc("GET "+p+"tools/{tool}/connect", d.signedIn(d.connectTool))
	mux.HandleFunc("GET "+p+"tools/{tool}/{tab}", d.signedIn(d.toolPage))
	mux.HandleFunc("POST "+p+"tools/{tool}/sse/rotate", d.signedIn(d.rotateLink))
	mux.HandleFunc("POST "+p+"tools/{tool}/credentials", d.signedIn(d.setCredentials))
	mux.HandleFunc("POST "+p+"tools/{tool}/install/{client}", d.signedIn(d.mintInstallKey))
	mux.HandleFunc("POST "+p+"tools/{tool}/api/{method}", d.signedIn(d.tryCall))
	mux.HandleFunc("GET "+p+"keys", d.signedIn(d.keysPage))
	mux.HandleFunc("POST "+p+"keys", d.signedIn(d.createKey))
	mux.HandleFunc("POST "+p+"keys/{id}/revoke", d.signedIn(d.revokeKey))
	mux.HandleFunc("GET "+p+"calls", d.signedIn(d.callsPage))
	mux.HandleFunc("GET "+p+"usage", d.signedIn(d.usagePage))
	if d.cfg.Approvals != nil {
		mux.HandleFunc("GET "+p+"approvals", d.signedIn(d.approvalsPage))
		mux.HandleFunc("POST "+p+"approvals/{id}", d.signedIn(d.decide))
	}
	mux.HandleFunc("POST "+p+"sign-in-setting", d.signedIn(d.setSignIn))
	mux.HandleFunc("GET "+p+ConsentPath, d.signedIn(d.consentPage))
	mux.HandleFunc("POST "+p+ConsentPath, d.signedIn(d.answerConsent))
	mux.HandleFunc("POST "+p+"grants/{id}/revoke", d.signedIn(d.revokeGrant))
	mux.HandleFunc("GET "+p+"static/{file}", d.static)
	mux.HandleFunc(p, func(w http.ResponseWriter, r *http.Request) {
		d.fail(w, r, nil, http.StatusNotFound, "There is no such page.")
	})
	// Forms are also checked against their session's token; this refuses a
	// cross-site POST before anything else looks at it. The public origin is
	// trusted by name, for browsers that send only Origin through a proxy that
	// changes Host.
	cop := http.NewCrossOriginProtection()
	if u, err := url.Parse(d.cfg.BaseURL); err == nil {
		if err := cop.AddTrustedOrigin(u.Scheme + "://" + u.Host); err != nil {
			d.log.Warn("dashboard: base URL not usable as a trusted origin", "err", err)
		}
	}
	return securityHeaders(cop.Handler(mux))
}

// contentPolicy is the pages' Content-Security-Policy, their forms allowed to go to
// formAction (the consent page's answer ends at the client's redirect URI, and a
// browser holds a form's redirects to the policy too).
func contentPolicy(formAction string) string {
	return "default-src 'none'; style-src 'self'; script-src 'self'; img-src 'self' data:; " +
		"form-action " + formAction + "; frame-ancestors 'none'; base-uri 'none'"
}

func securityHeaders(next http.Handler) http.Handler {
	return http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		h := w.Header()
		h.Set("Content-Security-Policy", contentPolicy("'self'"))
		h.Set("X-Content-Type-Options", "nosniff")
		h.Set("X-Frame-Options", "DENY")
		h.Set("Referrer-Policy", "same-origin")
		next.ServeHTTP(w, r)
	})
}

// visit is a request of a signed-in user.
type visit struct {
	sessionID string
	session   *session
	principal registry.Principal
	account   *registry.Account
}

// keyID is the id of the key the visit signed in with; empty for a user.
func (v *visit) keyID() string {
	if v.principal.Key == nil {
		return ""
	}
	return v.principal.Key.ID
}

// canManageKeys: see registry.Principal.ManagesKeys.
func (v *visit) canManageKeys() bool { return v.principal.ManagesKeys() }

// errSessionEnded: the session's key was revoked or expired, or its account deleted.
var errSessionEnded = errors.New("dashboard: the session's key is no longer valid")

// lookup finds the request's session and checks that its key still authenticates.
func (d *Dashboard) lookup(r *http.Request) (*visit, error) {
	c, err := r.Cookie(d.cfg.CookieName)
	if err != nil {
		return nil, errNoSession
	}
	now := d.now()
	s, err := d.sessions.get(r.Context(), c.Value, now)
	if err != nil {
		return nil, err
	}
	snap := d.view.Snapshot()
	p, err := sessionPrincipal(snap, s, now)
	if err != nil {
		if err := d.sessions.delete(r.Context(), c.Value); err != nil {
			d.log.Warn("dashboard: ending a session", "err", err)
		}
		return nil, errSessionEnded
	}
	return &visit{
		sessionID: c.Value,
		session:   s,
		principal: p,
		account:   snap.Account(s.Account),
	}, nil
}

// sessionPrincipal is who s signed in as, as long as that key or user still signs
// in: a user is refused from the moment the view hears it deleted.
func sessionPrincipal(snap *registry.Snapshot, s *session, now time.Time) (registry.Principal, error) {
	if s.User == "" {
		return snap.AuthenticateKeyID(s.KeyID, s.KeyHash, s.Account, now)
	}
	if u := snap.User(s.Account, s.User); u != nil && u.ID == s.UserID {
		return registry.Principal{Account: s.Account, User: u.Name}, nil
	}
	return registry.Principal{}, registry.ErrUnauthenticated
}

// signedIn runs h for a signed-in user, and checks the CSRF token of every POST.
// Anyone else goes to the sign-in page.
func (d *Dashboard) signedIn(h func(http.ResponseWriter, *http.Request, *visit)) http.HandlerFunc {
	return func(w http.ResponseWriter, r *http.Request) {
		v, err := d.lookup(r)
		switch {
		case errors.Is(err, errNoSession):
			d.redirect(w, r, signInWithNext(r, d.cfg.Prefix))
			return
		case errors.Is(err, errSessionEnded):
			d.clearCookie(w, r, d.cfg.CookieName)
			d.redirect(w, r, "signin?ended=1")
			return
		case err != nil:
			d.log.Error("dashboard: session store", "err", err)
			d.fail(w, r, nil, http.StatusServiceUnavailable, "The dashboard cannot reach its session store right now. Try again in a moment.")
			return
		}
		if r.Method == http.MethodPost {
			r.Body = http.MaxBytesReader(w, r.Body, maxFormBytes)
			if err := r.ParseForm(); err != nil {
				d.fail(w, r, v, http.StatusRequestEntityTooLarge, "The form is too large.")
				return
			}
			if !sameSecret(r.PostForm.Get("csrf"), v.session.CSRF) {
				d.fail(w, r, v, http.StatusForbidden, "The form could not be checked: it is out of date or was not sent from this dashboard. Reload the page and try again.")
				return
			}
		}
		h(w, r, v)
	}
}

// maxFormBytes bounds a form; the largest is the try-it form's parameters.
const maxFormBytes = 2 << 20

func (d *Dashboard) redirect(w http.ResponseWriter, r *http.Request, rel string) {
	http.Redirect(w, r, d.cfg.Prefix+rel, http.StatusSeeOther)
}

// secure reports whether cookies must be marked Secure for r.
func (d *Dashboard) secure(r *http.Request) bool {
	return d.cfg.SecureCookie || r.TLS != nil || strings.HasPrefix(d.cfg.BaseURL, "https:")
}

func (d *Dashboard) setCookie(w http.ResponseWriter, r *http.Request, name, value string, maxAge time.Duration) {
	http.SetCookie(w, &http.Cookie{
		Name:     name,
		Value:    value,
		Path:     d.cfg.Prefix,
		MaxAge:   int(maxAge.Seconds()),
		HttpOnly: true,
		Secure:   d.secure(r),
		SameSite: http.SameSiteStrictMode,
	})
}

func (d *Dashboard) clearCookie(w http.ResponseWriter, r *http.Request, name string) {
	http.SetCookie(w, &http.Cookie{
		Name: name, Value: "", Path: d.cfg.Prefix, MaxAge: -1,
		HttpOnly: true, Secure: d.secure(r), SameSite: http.SameSiteStrictMode,
	})
}

// signInCookie carries the sign-in form's token until a session exists to hold one.
func (d *Dashboard) signInCookie() string { return d.cfg.CookieName + "_signin" }

// page is what every template is given.
type page struct {
	Title  string
	Prefix string
	Nav    string // the section to mark current: "tools", "keys", "calls", "usage", "approvals"
	// Approvals: the approvals page is served (Config.Approvals).
	Approvals bool
	IdP       string // where MCP clients sign in, when not here (Config.IdP)
	Account   *registry.Account
	KeyID     string // the key the session was opened with
	User      string // or the user who signed in
	CSRF      string
	CSS       string
	JS        string
	Data      any
}

func (d *Dashboard) page(v *visit, title, nav string, data any) page {
	p := page{
		Title:     title,
		Prefix:    d.cfg.Prefix,
		Nav:       nav,
		Approvals: d.cfg.Approvals != nil,
		IdP:       d.cfg.IdP,
		CSS:       d.assetURL("style.css"),
		JS:        d.assetURL("copy.js"),
		Data:      data,
	}
	if v != nil {
		p.Account = v.account
		p.KeyID = v.keyID()
		p.User = v.principal.User
		p.CSRF = v.session.CSRF
	}
	return p
}

// render writes a page whole, or a plain error if its template fails: never half a
// page.
func (d *Dashboard) render(w http.ResponseWriter, status int, name string, p page) {
	var buf bytes.Buffer
	if err := d.pages[name].ExecuteTemplate(&buf, "layout", p); err != nil {
		d.log.Error("dashboard: render", "page", name, "err", err)
		http.Error(w, "The page could not be shown.", http.StatusInternalServerError)
		return
	}
	h := w.Header()
	h.Set("Content-Type", "text/html; charset=utf-8")
	h.Set("Cache-Control", "no-store")
	w.WriteHeader(status)
	_, _ = w.Write(buf.Bytes())
}

type errorPage struct {
	Status  int
	Message string
}

// fail shows an error page; v is nil when nobody is signed in.
func (d *Dashboard) fail(w http.ResponseWriter, r *http.Request, v *visit, status int, msg string) {
	if v == nil {
		if vv, err := d.lookup(r); err == nil {
			v = vv
		}
	}
	d.render(w, status, "error", d.page(v, http.StatusText(status), "", errorPage{Status: status, Message: msg}))
}

// copyButton copies the text of the element with ID; What names it for screen readers.
type copyButton struct {
	ID   string
	What string
}

var pageNames = []string{"signin", "tools", "tool", "keys", "calls", "usage", "approvals", "error", "consent"}

func parsePages() (map[string]*template.Template, error) {
	funcs := template.FuncMap{
		"date":       formatDate,
		"clock":      func(t time.Time) string { return t.UTC().Format("2006-01-02 15:04:05 UTC") },
		"millis":     func(us int64) string { return strconv.FormatFloat(float64(us)/1000, 'f', 1, 64) + " ms" },
		"sub":        func(a, b int) int { return a - b },
		"statusLine": statusLine,
		"rows":       textareaRows,
		"copyButton": func(id, what string) copyButton { return copyButton{ID: id, What: what} },
		"hasSuffix":  strings.HasSuffix,
	}
	out := map[string]*template.Template{}
	for _, name := range pageNames {
		t, err := template.New(name).Funcs(funcs).ParseFS(templateFS, "templates/layout.html", "templates/"+name+".html")
		if err != nil {
			return nil, fmt.Errorf("dashboard: template %s: %w", name, err)
		}
		out[name] = t
	}
	return out, nil
}

// textareaRows fits a textarea to its text, within reason.
func textareaRows(s string) int {
	return min(max(strings.Count(s, "\n")+2, 4), 20)
}

func formatDate(t any) string {
	switch v := t.(type) {
	case time.Time:
		if v.IsZero() {
			return ""
		}
		return v.UTC().Format("2006-01-02 15:04 UTC")
	case *time.Time:
		if v == nil {
			return ""
		}
		return formatDate(*v)
	}
	return ""
}

func loadAssets() (map[string]asset, error) {
	types := map[string]string{".css": "text/css; charset=utf-8", ".js": "text/javascript; charset=utf-8"}
	out := map[string]asset{}
	err := fs.WalkDir(staticFS, "static", func(path string, e fs.DirEntry, err error) error {
		if err != nil || e.IsDir() {
			return err
		}
		b, err := staticFS.ReadFile(path)
		if err != nil {
			return err
		}
		name := strings.TrimPrefix(path, "static/")
		sum := sha256.Sum256(b)
		ct := types[name[strings.LastIndexByte(name, '.'):]]
		out[name] = asset{body: b, contentType: ct, version: hex.EncodeToString(sum[:6])}
		return nil
	})
	if err != nil {
		return nil, fmt.Errorf("dashboard: assets: %w", err)
	}
	return out, nil
}

func (d *Dashboard) assetURL(name string) string {
	return d.cfg.Prefix + "static/" + name + "?v=" + url.QueryEscape(d.assets[name].version)
}

func (d *Dashboard) static(w http.ResponseWriter, r *http.Request) {
	a, ok := d.assets[r.PathValue("file")]
	if !ok {
		http.NotFound(w, r)
		return
	}
	w.Header().Set("Content-Type", a.contentType)
	w.Header().Set("Cache-Control", "public, max-age=31536000, immutable")
	_, _ = w.Write(a.body)
}

// await waits, briefly, until the registry view shows what was just written, so
// that the page that follows a change shows it. Past the wait the page shows the
// view as it is; the change arrives within the second.
func (d *Dashboard) await(ctx context.Context, cond func(*registry.Snapshot) bool) {
	ctx, cancel := context.WithTimeout(ctx, 3*time.Second)
	defer cancel()
	if err := d.view.WaitFor(ctx, cond); err != nil {
		d.log.Warn("dashboard: the registry view is slow to show a change", "err", err)
	}
}

// statusLine is "200 OK".
func statusLine(code int) string {
	return strconv.Itoa(code) + " " + http.StatusText(code)
}
