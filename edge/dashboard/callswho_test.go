package dashboard_test

import (
	"net/http"
	"strings"
	"testing"
	"time"

	"github.com/toolgate/toolgate/audit"
	"github.com/toolgate/toolgate/internal/testenv"
)

// TestCallsPageNamesTheUser: the calls page says who made each call, a key or a user
// signed in through an MCP client (with the client), and is filtered by user; a user
// name that cannot be one is a clear error.
func TestCallsPageNamesTheUser(t *testing.T) {
	e := newEnv(t, nil, withTrail)
	trail, err := audit.Open(testenv.Context(t), e.nc, audit.Options{}, testenv.Logger(t))
	if err != nil {
		t.Fatal(err)
	}
	const client = "https://app.example/client.json"
	now := time.Now().UTC()
	for _, r := range []audit.Record{
		{ID: "call-by-ana", RequestID: "req_by_ana", Link: true, User: "ana", Client: client, Transport: audit.TransportMCPStreamable},
		{ID: "call-by-key", RequestID: "req_by_key", Key: e.keyRec.ID, Transport: audit.TransportREST},
	} {
		r.Time, r.Kind, r.Account, r.Tool, r.Method, r.Outcome, r.Edge = now, audit.KindCall, testAccount, "email", "send", audit.OutcomeOK, "edge-1"
		if err := trail.Write(r); err != nil {
			t.Fatal(err)
		}
	}
	u, _ := e.signedIn()
	var all page
	testenv.WaitFor(t, "the calls page shows both calls", func() bool {
		all = u.get("calls")
		return strings.Contains(all.body, "req_by_ana") && strings.Contains(all.body, "req_by_key")
	})
	if !strings.Contains(all.body, "<strong>ana</strong> <small>through <code>"+client+"</code></small>") ||
		!strings.Contains(all.body, "<code>"+e.keyRec.ID+"</code>") {
		t.Fatalf("the calls page does not name ana, her client and the key:\n%s", all.body)
	}
	ana := u.get("calls?user=ana")
	if ana.status != http.StatusOK || !strings.Contains(ana.body, "req_by_ana") || strings.Contains(ana.body, "req_by_key") ||
		!strings.Contains(ana.body, `id="f-user" name="user" type="text" maxlength="64" value="ana"`) {
		t.Fatalf("the calls of ana: %d\n%s", ana.status, ana.body)
	}
	if bad := u.get("calls?user=a.b"); bad.status != http.StatusBadRequest || !strings.Contains(bad.text(), "There is no such user.") {
		t.Fatalf("a name that is no user's: %d\n%s", bad.status, bad.body)
	}
}
