package dashboard_test

import (
	"encoding/json"
	"net/http"
	"net/url"
	"slices"
	"strings"
	"testing"
	"time"

	"github.com/toolgate/toolgate/audit"
	"github.com/toolgate/toolgate/credentials"
	"github.com/toolgate/toolgate/edge/dashboard"
	"github.com/toolgate/toolgate/internal/testenv"
	"github.com/toolgate/toolgate/registry"
)

// TestDashboardChangesAreAudited: every change a key holder makes on the dashboard
// (a key made, one made for an install, a key revoked, the sign-in setting, a link
// rotated) is on the audit trail as the admin API's changes are, with the dashboard
// as the door and the key signed in as who made it; a refused change (a scoped key's)
// writes nothing.
func TestDashboardChangesAreAudited(t *testing.T) {
	e := newEnv(t, nil, withTrail)
	u, home := e.signedIn()
	keys := u.get("keys")
	made := u.post("keys", url.Values{"csrf": {keys.csrf(t)}, "name": {"laptop"}})
	if made.status != http.StatusOK {
		t.Fatalf("make a key: %d", made.status)
	}
	var laptop *registry.Key
	e.waitFor("the new key", func(s *registry.Snapshot) bool {
		for _, k := range s.Keys(testAccount) {
			if k.Name == "laptop" {
				laptop = k
			}
		}
		return laptop != nil
	})
	if p := u.post("tools/email/install/claude-code", url.Values{"csrf": {home.csrf(t)}}); p.status != http.StatusOK {
		t.Fatalf("make an install key: %d", p.status)
	}
	if p := u.post("keys/"+laptop.ID+"/revoke", url.Values{"csrf": {home.csrf(t)}}); p.status != http.StatusOK {
		t.Fatalf("revoke the key: %d", p.status)
	}
	if p := u.post("sign-in-setting", url.Values{"csrf": {home.csrf(t)}, "require_sign_in": {"on"}}); p.status != http.StatusOK {
		t.Fatalf("require sign-in: %d", p.status)
	}
	if p := u.post("tools/email/sse/rotate", url.Values{"csrf": {home.csrf(t)}}); p.status != http.StatusOK {
		t.Fatalf("rotate the link: %d", p.status)
	}

	_, scoped, err := e.store.CreateKey(testenv.Context(t), registry.NewKeyRequest{Account: testAccount, Name: "email only", Scopes: []string{"email"}})
	if err != nil {
		t.Fatal(err)
	}
	e.waitFor("the scoped key", func(s *registry.Snapshot) bool { _, err := s.AuthenticateKey(scoped, time.Now()); return err == nil })
	v := e.user()
	v.signIn(scoped)
	if p := v.post("keys", url.Values{"csrf": {v.get("keys").csrf(t)}, "name": {"refused"}}); p.status != http.StatusForbidden {
		t.Fatalf("a scoped key made a key: %d", p.status)
	}

	want := []struct{ action, key, tool string }{
		{audit.ActionCreateKey, laptop.ID, ""},
		{audit.ActionCreateKey, "?", "email"}, // the install key: its id is read below
		{audit.ActionRevokeKey, laptop.ID, ""},
		{audit.ActionUpdateAccount, "", ""},
		{audit.ActionRotateLink, "", "email"},
	}
	trail, err := audit.Open(testenv.Context(t), e.nc, audit.Options{}, testenv.Logger(t))
	if err != nil {
		t.Fatal(err)
	}
	var got []audit.Record
	testenv.WaitFor(t, "the dashboard's records", func() bool {
		page, err := trail.Read(testenv.Context(t), audit.Filter{Kind: audit.KindAdmin, Account: testAccount, Limit: audit.MaxLimit})
		if err != nil {
			t.Fatal(err)
		}
		got = page.Records
		return len(got) >= len(want)
	})
	if len(got) != len(want) {
		t.Fatalf("%d records, want %d: %+v", len(got), len(want), got)
	}
	for i, w := range want {
		r := got[i]
		if r.Method != w.action || r.Tool != w.tool || (w.key != "?" && r.Key != w.key) || (w.key == "?" && r.Key == "") ||
			r.Transport != audit.TransportDashboard || r.By != "key:"+e.keyRec.ID || r.Outcome != audit.OutcomeOK || r.Status != http.StatusOK ||
			r.RequestID == "" || r.Account != testAccount {
			t.Errorf("record %d: %+v, want %s of key %q, tool %q, by key:%s", i, r, w.action, w.key, w.tool, e.keyRec.ID)
		}
	}
	if i := slices.IndexFunc(got, func(r audit.Record) bool { return r.Key == "refused" }); i >= 0 {
		t.Fatalf("a refused change was recorded: %+v", got[i])
	}
}

// TestDashboardCredentialsChangeAudited: a connection's fields set on the dashboard
// write one set-credentials record, by the key signed in, naming the tool and holding
// no value.
func TestDashboardCredentialsChangeAudited(t *testing.T) {
	e := newEnvWith(t, func(e *env, cfg *dashboard.Config) {
		keys, err := credentials.ParseKeyring(credentials.NewKeyLine())
		if err != nil {
			t.Fatal(err)
		}
		if cfg.Connector, err = credentials.Open(testenv.Context(t), e.store, keys, true); err != nil {
			t.Fatal(err)
		}
		if err := e.store.PutTool(testenv.Context(t), mailTool); err != nil {
			t.Fatal(err)
		}
		if _, err := e.store.Connect(testenv.Context(t), testAccount, "mail", e.signer); err != nil {
			t.Fatal(err)
		}
	}, withTrail)
	e.waitFor("the mail tool and its connection", func(s *registry.Snapshot) bool { return s.Connection(testAccount, "mail") != nil })
	const token = "tok-canary-77ad21"
	u, home := e.signedIn()
	if p := u.post("tools/mail/credentials", url.Values{"csrf": {home.csrf(t)}, "token": {token}}); p.status != http.StatusOK {
		t.Fatalf("set the token: %d\n%s", p.status, p.body)
	}
	trail, err := audit.Open(testenv.Context(t), e.nc, audit.Options{}, testenv.Logger(t))
	if err != nil {
		t.Fatal(err)
	}
	var got []audit.Record
	testenv.WaitFor(t, "the change's record", func() bool {
		page, err := trail.Read(testenv.Context(t), audit.Filter{Kind: audit.KindAdmin, Account: testAccount})
		if err != nil {
			t.Fatal(err)
		}
		got = page.Records
		return len(got) > 0
	})
	r := got[0]
	if len(got) != 1 || r.Method != audit.ActionSetCredentials || r.Tool != "mail" || r.By != "key:"+e.keyRec.ID || r.Transport != audit.TransportDashboard {
		t.Fatalf("records %+v: want one set-credentials of mail by key:%s", got, e.keyRec.ID)
	}
	if b, _ := json.Marshal(got); strings.Contains(string(b), token) {
		t.Fatal("the record holds the value")
	}
}
