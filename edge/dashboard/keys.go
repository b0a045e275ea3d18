package dashboard

import (
	"errors"
	"net/http"
	"slices"
	"strconv"
	"strings"
	"time"
	"unicode/utf8"

	"github.com/toolgate/toolgate/audit"
	"github.com/toolgate/toolgate/oauth"
	"github.com/toolgate/toolgate/registry"
)

type keysView struct {
	Keys      []keyRow
	CanManage bool
	Tools     []string // what a new key may be scoped to
	Expiries  []expiry
	NewKey    *newKey // only on the response that created it
	Revoked   string  // the name of a key just revoked
	Error     string
	Form      keyForm // the create form as submitted, after an error
	// RequireSignIn: the account's links take only callers that signed in (OAuth) or
	// send an API key.
	RequireSignIn bool
	// Grants are what MCP clients were allowed through sign-in, each revocable.
	Grants        []oauth.Grant
	AccessRevoked bool
	// Users are the account's users, made by the admin; never a secret.
	Users []userRow
}

// userRow is a user as the keys page lists it.
type userRow struct {
	Name, Kind, Subject string
	CreatedAt           time.Time
}

type keyRow struct {
	Key     *registry.Key
	Status  string // active, expired, revoked
	Current bool   // the key this session was opened with
}

type newKey struct {
	Key    *registry.Key
	Secret string
}

type expiry struct {
	Value string
	Label string
}

type keyForm struct {
	Name    string
	Expires string
	Scopes  map[string]bool
}

var expiries = []expiry{
	{"", "Never"}, {"7", "In 7 days"}, {"30", "In 30 days"}, {"90", "In 90 days"}, {"365", "In a year"},
}

const maxKeyName = 100

func (d *Dashboard) keysView(v *visit) *keysView {
	snap := d.view.Snapshot()
	now := d.now()
	kv := &keysView{CanManage: v.canManageKeys(), Expiries: expiries}
	if a := snap.Account(v.principal.Account); a != nil {
		kv.RequireSignIn = a.RequireSignIn
		for _, u := range a.Users {
			kv.Users = append(kv.Users, userRow{Name: u.Name, Kind: u.Kind(), Subject: u.Subject, CreatedAt: u.CreatedAt})
		}
	}
	for _, k := range snap.Keys(v.principal.Account) {
		row := keyRow{Key: k, Status: "active", Current: k.ID == v.keyID()}
		switch {
		case k.RevokedAt != nil:
			row.Status = "revoked"
		case !k.Usable(now):
			row.Status = "expired"
		}
		kv.Keys = append(kv.Keys, row)
	}
	// Newest first: the key just made is the one looked for.
	slices.Reverse(kv.Keys)
	for _, c := range snap.Connections(v.principal.Account) {
		kv.Tools = append(kv.Tools, c.Tool)
	}
	return kv
}

func (d *Dashboard) keysPage(w http.ResponseWriter, r *http.Request, v *visit) {
	kv := d.keysView(v)
	kv.AccessRevoked = r.URL.Query().Get("access") == "revoked"
	if d.cfg.SignIn != nil {
		grants, err := d.cfg.SignIn.Grants(r.Context(), v.principal.Account)
		if err != nil {
			d.log.Error("dashboard: list grants", "account", v.principal.Account, "err", err)
		}
		kv.Grants = grants
	}
	if id := r.URL.Query().Get("revoked"); id != "" {
		if _, k := d.view.Snapshot().KeyByID(id); k != nil && k.Account == v.principal.Account {
			kv.Revoked = firstNonEmpty(k.Name, k.Prefix)
		}
	}
	d.render(w, http.StatusOK, "keys", d.page(v, "API keys", "keys", kv))
}

// mayManageKeys refuses, and says why, a visit whose key is limited to some tools:
// such a key may neither make nor revoke keys. It reports whether the visit may go on.
func (d *Dashboard) mayManageKeys(w http.ResponseWriter, r *http.Request, v *visit) bool {
	if v.canManageKeys() {
		return true
	}
	if v.principal.Key == nil {
		d.fail(w, r, v, http.StatusForbidden, "A user of the account cannot make or revoke keys or access. Sign in with a key that reaches every tool.")
		return false
	}
	d.fail(w, r, v, http.StatusForbidden, "The key you signed in with is limited to some tools, so it cannot make or revoke keys. Sign in with a key that reaches every tool.")
	return false
}

func (d *Dashboard) createKey(w http.ResponseWriter, r *http.Request, v *visit) {
	if !d.mayManageKeys(w, r, v) {
		return
	}
	form := keyForm{
		Name:    strings.TrimSpace(r.PostForm.Get("name")),
		Expires: r.PostForm.Get("expires"),
		Scopes:  map[string]bool{},
	}
	req := registry.NewKeyRequest{Account: v.principal.Account, Name: form.Name}
	kv := d.keysView(v)
	var problem string
	for _, s := range r.PostForm["scope"] {
		if !slices.Contains(kv.Tools, s) {
			problem = "A key can only be limited to tools on this account."
		}
		form.Scopes[s] = true
		req.Scopes = append(req.Scopes, s)
	}
	slices.Sort(req.Scopes)
	switch {
	case utf8.RuneCountInString(form.Name) > maxKeyName:
		problem = "The name is too long: " + strconv.Itoa(maxKeyName) + " characters at most."
	case form.Expires != "":
		days, err := strconv.Atoi(form.Expires)
		if err != nil || !slices.ContainsFunc(expiries, func(e expiry) bool { return e.Value == form.Expires }) {
			problem = "Choose when the key expires from the list."
			break
		}
		at := d.now().Add(time.Duration(days) * 24 * time.Hour).Truncate(time.Second)
		req.ExpiresAt = &at
	}
	if problem != "" {
		kv.Error, kv.Form = problem, form
		d.render(w, http.StatusBadRequest, "keys", d.page(v, "API keys", "keys", kv))
		return
	}
	k, secret, err := d.store.CreateKey(r.Context(), req)
	if err != nil {
		status, msg := http.StatusInternalServerError, "The key could not be created. Try again."
		if errors.Is(err, registry.ErrInvalid) {
			status, msg = http.StatusBadRequest, "The key could not be created: "+err.Error()
		} else {
			d.log.Error("dashboard: create key", "account", v.principal.Account, "err", err)
		}
		kv.Error, kv.Form = msg, form
		d.render(w, status, "keys", d.page(v, "API keys", "keys", kv))
		return
	}
	d.log.Info("dashboard: key created", "account", k.Account, "key_id", k.ID)
	d.record(w, r, v, audit.Record{Method: audit.ActionCreateKey, Key: k.ID})
	d.await(r.Context(), func(s *registry.Snapshot) bool { _, got := s.KeyByID(k.ID); return got != nil })
	kv = d.keysView(v)
	kv.NewKey = &newKey{Key: k, Secret: secret}
	d.render(w, http.StatusOK, "keys", d.page(v, "API keys", "keys", kv))
}

func (d *Dashboard) revokeKey(w http.ResponseWriter, r *http.Request, v *visit) {
	if !d.mayManageKeys(w, r, v) {
		return
	}
	id := r.PathValue("id")
	hash, k := d.view.Snapshot().KeyByID(id)
	if k == nil || k.Account != v.principal.Account {
		d.fail(w, r, v, http.StatusNotFound, "There is no such key on this account.")
		return
	}
	if _, err := d.store.RevokeKey(r.Context(), hash); err != nil {
		d.log.Error("dashboard: revoke key", "key_id", id, "err", err)
		d.fail(w, r, v, http.StatusInternalServerError, "The key could not be revoked; it still works. Try again.")
		return
	}
	d.log.Info("dashboard: key revoked", "account", k.Account, "key_id", id)
	d.record(w, r, v, audit.Record{Method: audit.ActionRevokeKey, Key: id})
	d.await(r.Context(), func(s *registry.Snapshot) bool {
		_, got := s.KeyByID(id)
		return got == nil || got.RevokedAt != nil
	})
	if id == v.keyID() {
		// Revoking the session's own key ends the session at once.
		d.redirect(w, r, "")
		return
	}
	d.redirect(w, r, "keys?revoked="+id)
}

// setSignIn sets whether the account's links require sign-in. A key that may manage
// the account's keys may: it could give itself any key the setting guards against.
func (d *Dashboard) setSignIn(w http.ResponseWriter, r *http.Request, v *visit) {
	if !d.mayManageKeys(w, r, v) {
		return
	}
	want := r.PostForm.Get("require_sign_in") == "on"
	if _, err := d.store.UpdateAccount(r.Context(), v.principal.Account, func(a *registry.Account) error {
		a.RequireSignIn = want
		return nil
	}); err != nil {
		d.log.Error("dashboard: set require_sign_in", "account", v.principal.Account, "err", err)
		d.fail(w, r, v, http.StatusInternalServerError, "The setting could not be saved; it is as it was. Try again.")
		return
	}
	d.log.Info("dashboard: require_sign_in set", "account", v.principal.Account, "require_sign_in", want)
	d.record(w, r, v, audit.Record{Method: audit.ActionUpdateAccount})
	d.await(r.Context(), func(s *registry.Snapshot) bool {
		a := s.Account(v.principal.Account)
		return a != nil && a.RequireSignIn == want
	})
	d.redirect(w, r, "keys")
}
