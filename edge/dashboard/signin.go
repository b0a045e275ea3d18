package dashboard

import (
	"net/http"
	"strings"
	"time"

	"github.com/toolgate/toolgate/registry"
)

type signInPage struct {
	Token  string // the form's CSRF token, also in the sign-in cookie
	Error  string
	Notice string
	Next   string // the consent page to come back to
}

// signInTokenLifetime bounds how long a sign-in form may stay open.
const signInTokenLifetime = time.Hour

func (d *Dashboard) signInPage(w http.ResponseWriter, r *http.Request) {
	if _, err := d.lookup(r); err == nil {
		d.redirect(w, r, signInNext(r))
		return
	}
	var notice string
	switch {
	case r.URL.Query().Has("ended"):
		notice = "Your session has ended: the key you signed in with was revoked or has expired."
	case r.URL.Query().Has("signedout"):
		notice = "You are signed out."
	}
	d.showSignIn(w, r, http.StatusOK, "", notice)
}

// showSignIn renders the form with a token that the sign-in cookie also carries:
// before there is a session, the pair is what shows a submitted form came from this
// page (a forged sign-in would put the victim in the forger's account).
func (d *Dashboard) showSignIn(w http.ResponseWriter, r *http.Request, status int, errMsg, notice string) {
	token := ""
	if c, err := r.Cookie(d.signInCookie()); err == nil && len(c.Value) >= 32 {
		token = c.Value
	} else {
		token = newSecret()
	}
	d.setCookie(w, r, d.signInCookie(), token, signInTokenLifetime)
	d.render(w, status, "signin", d.page(nil, "Sign in", "", signInPage{Token: token, Error: errMsg, Notice: notice, Next: signInNext(r)}))
}

func (d *Dashboard) signIn(w http.ResponseWriter, r *http.Request) {
	// Without the form's cookie no sign-in can succeed: refused before the form is
	// read, so that a caller who trickles one is answered (and let go) at once.
	c, err := r.Cookie(d.signInCookie())
	if err != nil || len(c.Value) < 32 {
		d.refuseSignInForm(w, r)
		return
	}
	r.Body = http.MaxBytesReader(w, r.Body, 64<<10)
	if err := r.ParseForm(); err != nil {
		d.fail(w, r, nil, http.StatusBadRequest, "The sign-in form could not be read.")
		return
	}
	if !sameSecret(r.PostForm.Get("csrf"), c.Value) {
		d.refuseSignInForm(w, r)
		return
	}
	now := d.now()
	s, ok := d.signInSession(r, now)
	if !ok {
		d.log.Info("dashboard: sign-in refused", "remote", r.RemoteAddr)
		msg := "That API key is not valid: it is unknown, revoked or expired."
		if r.PostForm.Has("user") {
			msg = "That account, user name and secret do not sign in: one of them is wrong, or the user was deleted."
		}
		d.showSignIn(w, r, http.StatusUnauthorized, msg, "")
		return
	}
	if old, err := r.Cookie(d.cfg.CookieName); err == nil {
		_ = d.sessions.delete(r.Context(), old.Value)
	}
	// A fresh session id on every sign-in: an id planted before sign-in is worthless.
	id, err := d.sessions.create(r.Context(), s)
	if err != nil {
		d.log.Error("dashboard: sign-in", "err", err)
		d.fail(w, r, nil, http.StatusServiceUnavailable, "The dashboard cannot reach its session store right now. Try again in a moment.")
		return
	}
	d.log.Info("dashboard: signed in", "account", s.Account, "key_id", s.KeyID, "user", s.User)
	d.setCookie(w, r, d.cfg.CookieName, id, d.cfg.SessionLifetime)
	d.clearCookie(w, r, d.signInCookie())
	d.redirect(w, r, signInNext(r))
}

// signInSession is the session the submitted form signs in to: with an API key, or
// as a user of an account (its name and secret). Nothing the form names reaches
// another account: a user is looked up in the account the form names.
func (d *Dashboard) signInSession(r *http.Request, now time.Time) (session, bool) {
	s := session{CSRF: newSecret(), CreatedAt: now, ExpiresAt: now.Add(d.cfg.SessionLifetime)}
	snap := d.view.Snapshot()
	if r.PostForm.Has("user") {
		account, name := strings.TrimSpace(r.PostForm.Get("account")), strings.TrimSpace(r.PostForm.Get("user"))
		p, u, err := snap.AuthenticateUser(account, name, strings.TrimSpace(r.PostForm.Get("secret")))
		if err != nil {
			return session{}, false
		}
		s.Account, s.User, s.UserID = p.Account, u.Name, u.ID
		return s, true
	}
	key := strings.TrimSpace(r.PostForm.Get("key"))
	p, err := d.view.AuthenticateKey(r.Context(), key, now)
	if err != nil {
		return session{}, false
	}
	s.Account, s.KeyID, s.KeyHash = p.Account, p.Key.ID, registry.Hash(key)
	return s, true
}

// refuseSignInForm answers a sign-in form that did not come from this dashboard's
// page, or not in time.
func (d *Dashboard) refuseSignInForm(w http.ResponseWriter, r *http.Request) {
	d.showSignIn(w, r, http.StatusForbidden,
		"The sign-in form could not be checked: it is out of date, or your browser does not keep cookies for this site. Try again.", "")
}

func (d *Dashboard) signOut(w http.ResponseWriter, r *http.Request, v *visit) {
	if err := d.sessions.delete(r.Context(), v.sessionID); err != nil {
		d.log.Error("dashboard: sign-out", "err", err)
	}
	d.clearCookie(w, r, d.cfg.CookieName)
	d.redirect(w, r, "signin?signedout=1")
}
