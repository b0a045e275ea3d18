package demo_test

import (
	"context"
	"encoding/json"
	"errors"
	"testing"
	"time"

	"github.com/toolgate/toolgate/bus"
	"github.com/toolgate/toolgate/bus/wire"
	"github.com/toolgate/toolgate/busauth"
	"github.com/toolgate/toolgate/internal/testenv"
	"github.com/toolgate/toolgate/registry"
	"github.com/toolgate/toolgate/workers"
	"github.com/toolgate/toolgate/workers/demo"
)

// TestDemoRunsOnItsToolsCredentials runs the demo tools as a deployment does: on the
// credentials issued for email, echo and clock, over TLS, called by an edge's
// credentials. The email tool keeps its outbox in its state bucket, and the server
// refuses the workers nothing.
func TestDemoRunsOnItsToolsCredentials(t *testing.T) {
	sec := testenv.NewSecurity(t)
	srv := testenv.SecureServer(t, sec, true)
	log := testenv.RecordServerLog(srv, false)
	admin := testenv.SecureConn(t, srv.ClientURL(), sec.Client(sec.Deployment.CredsFile(busauth.RoleAdmin), true))
	store := testenv.Store(t, admin, 1)
	view := testenv.View(t, store)
	edge := testenv.SecureConn(t, srv.ClientURL(), sec.Client(sec.Deployment.CredsFile(busauth.RoleEdge), true))
	creds, _ := sec.WorkerCreds(t, "email", "echo", "clock")
	nc := testenv.SecureConn(t, srv.ClientURL(), sec.Client(creds, true), workers.Inbox("email"))
	ctx := testenv.Context(t)

	t.Run("without its state bucket the email tool does not start", func(t *testing.T) {
		if _, err := demo.Email(ctx, nc); !errors.Is(err, workers.ErrNoState) {
			t.Fatalf("got %v, want ErrNoState", err)
		}
	})
	makeState(t, admin)
	runCtx, cancel := context.WithCancel(ctx)
	done := make(chan error, 1)
	go func() { done <- demo.Run(runCtx, nc, workers.WithLogger(testenv.Logger(t))) }()
	defer func() {
		cancel()
		if err := <-done; err != nil {
			t.Errorf("demo.Run: %v", err)
		}
	}()
	testenv.Eventually(t, 10*time.Second, "the demo tools are live", func() bool {
		s := view.Snapshot()
		return s.Instances("email") == 1 && s.Instances("echo") == 1 && s.Instances("clock") == 1
	})
	call := func(tool, method, params string) *wire.Reply {
		t.Helper()
		cctx, ccancel := context.WithTimeout(ctx, 10*time.Second)
		defer ccancel()
		r, err := bus.Do(cctx, edge, wire.DefaultSubjects, &wire.Request{Tool: tool, Method: method, CallID: registry.NewID("req_"),
			RequestID: registry.NewID("req_"), Account: "dev", Data: []byte(params), Deadline: time.Now().Add(10 * time.Second)})
		if err != nil || r.Status != 200 {
			t.Fatalf("%s.%s: %v %v", tool, method, r, err)
		}
		return r
	}
	var sent struct{ ID string }
	if err := json.Unmarshal(call("email", "send_email", `{"to":"ada@example.com","subject":"hi","body":"hello"}`).Data, &sent); err != nil || sent.ID == "" {
		t.Fatalf("send_email: %+v %v", sent, err)
	}
	var listed struct{ Messages []demo.Mail }
	if err := json.Unmarshal(call("email", "list_sent", `{}`).Data, &listed); err != nil || len(listed.Messages) != 1 || listed.Messages[0].ID != sent.ID {
		t.Fatalf("list_sent: %+v %v", listed, err)
	}
	call("echo", "echo", `{"a":1}`)
	call("clock", "now", `{}`)
	if v := log.Violations(); len(v) != 0 {
		t.Fatalf("the server refused the demo workers %v", v)
	}
}
