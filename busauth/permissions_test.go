package busauth_test

import (
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"strings"
	"testing"
	"time"

	"github.com/nats-io/nats-server/v2/server"
	"github.com/nats-io/nats.go"
	"github.com/nats-io/nats.go/jetstream"

	"github.com/toolgate/toolgate/asks"
	"github.com/toolgate/toolgate/audit"
	"github.com/toolgate/toolgate/bus/wire"
	"github.com/toolgate/toolgate/busauth"
	"github.com/toolgate/toolgate/internal/testenv"
	"github.com/toolgate/toolgate/registry"
)

// violations collects the permission errors the server sends a connection.
type violations chan error

func (v violations) handler() nats.Option {
	return nats.ErrorHandler(func(_ *nats.Conn, _ *nats.Subscription, err error) {
		if errors.Is(err, nats.ErrPermissionViolation) {
			select {
			case v <- err:
			default:
			}
		}
	})
}

// expect waits for the server's permission error naming want (for instance
// `Publish to "tg.call.beta.x"`), skipping others.
func (v violations) expect(t *testing.T, want string) {
	t.Helper()
	deadline := time.After(testenv.Patience)
	for {
		select {
		case err := <-v:
			if strings.Contains(err.Error(), want) {
				return
			}
		case <-deadline:
			t.Fatalf("the server sent no permissions violation for %s", want)
		}
	}
}

// none checks that no permission error arrives for a while: what was allowed stays
// allowed.
func (v violations) none(t *testing.T) {
	t.Helper()
	select {
	case err := <-v:
		t.Fatalf("unexpected: %v", err)
	case <-time.After(200 * time.Millisecond):
	}
}

// workerEnv is a secured server with the registry's buckets and the event log made
// by the admin role, an edge (its credentials) answering workers' asks, and a
// connection with the worker credentials of tool "alpha".
type workerEnv struct {
	admin    *nats.Conn
	edge     *nats.Conn
	edgeErrs violations // what the server refused the edge
	worker   *nats.Conn
	errs     violations
	ctx      context.Context
}

func newWorkerEnv(t *testing.T) *workerEnv {
	t.Helper()
	sec := testenv.NewSecurity(t)
	return newWorkerEnvOn(t, sec, testenv.SecureServer(t, sec, true))
}

func newWorkerEnvOn(t *testing.T, sec *testenv.Security, srv *server.Server) *workerEnv {
	t.Helper()
	admin := testenv.SecureConn(t, srv.ClientURL(), sec.Client(sec.Deployment.CredsFile(busauth.RoleAdmin), true))
	ctx := testenv.Context(t)
	if _, err := registry.Open(ctx, admin, registry.DefaultOptions()); err != nil { // the buckets, as an admin or bootstrap makes them
		t.Fatal(err)
	}
	edgeErrs := make(violations, 64)
	edge := testenv.SecureConn(t, srv.ClientURL(), sec.Client(sec.Deployment.CredsFile(busauth.RoleEdge), true), edgeErrs.handler())
	// One ask at a time, so that an ask answered says the ones sent before it are done
	// with (the forgery tests fence on it).
	asked, err := asks.Serve(edge, wire.DefaultSubjects, 1, testenv.Logger(t))
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(asked.Stop)
	js, err := jetstream.New(admin)
	if err != nil {
		t.Fatal(err)
	}
	// The MCP event log as the wire contract lays it out: tg.sess.<tool>.<session>.out[.<post>].
	if _, err := js.CreateStream(ctx, jetstream.StreamConfig{Name: "tg-mcp-events", Subjects: []string{"tg.sess.*.*.out", "tg.sess.*.*.out.*"}}); err != nil {
		t.Fatal(err)
	}
	creds, _ := sec.WorkerCreds(t, "alpha")
	errs := make(violations, 64)
	worker := testenv.SecureConn(t, srv.ClientURL(), sec.Client(creds, true),
		workerInbox("alpha"), errs.handler())
	return &workerEnv{admin: admin, edge: edge, edgeErrs: edgeErrs, worker: worker, errs: errs, ctx: ctx}
}

// TestWorkerCredentialsServeTheirOwnTool checks every subject a worker of tool alpha
// uses, on a real server: each is allowed, and does what the worker needs.
func TestWorkerCredentialsServeTheirOwnTool(t *testing.T) {
	e := newWorkerEnv(t)

	t.Run("takes its tool's calls in its queue group and answers them", func(t *testing.T) {
		sub, err := e.worker.QueueSubscribe("tg.call.alpha.>", "tg.alpha", func(m *nats.Msg) { _ = m.Respond([]byte("pong " + m.Subject)) })
		if err != nil {
			t.Fatal(err)
		}
		defer sub.Unsubscribe()
		if err := e.worker.Flush(); err != nil {
			t.Fatal(err)
		}
		reply, err := e.admin.Request("tg.call.alpha.ping", nil, 5*time.Second)
		if err != nil || string(reply.Data) != "pong tg.call.alpha.ping" {
			t.Fatalf("reply %v, %v", reply, err)
		}
		e.errs.none(t)
	})
	for _, c := range []struct{ name, subject, queue, sent string }{
		{"takes its tool's other MCP requests in its queue group", "tg.mcp.alpha", "tg.alpha", "tg.mcp.alpha"},
		{"takes the requests sent to one of its instances", "tg.inst.alpha.i1.>", "", "tg.inst.alpha.i1.call.ping"},
	} {
		t.Run(c.name, func(t *testing.T) {
			sub, err := e.worker.QueueSubscribe(c.subject, c.queue, func(m *nats.Msg) { _ = m.Respond([]byte("{}")) })
			if err != nil {
				t.Fatal(err)
			}
			defer sub.Unsubscribe()
			if err := e.worker.Flush(); err != nil {
				t.Fatal(err)
			}
			if _, err := e.admin.Request(c.sent, nil, 5*time.Second); err != nil {
				t.Fatal(err)
			}
			e.errs.none(t)
		})
	}
	t.Run("follows its cancels, its session replies and micro discovery", func(t *testing.T) {
		for _, subj := range []string{"tg.cancel.alpha.>", "tg.sess.alpha.*.reply.>", "$SRV.PING", "$SRV.INFO", "$SRV.STATS", "$SRV.PING.alpha", "$SRV.INFO.alpha.x1"} {
			sub, err := e.worker.SubscribeSync(subj)
			if err != nil {
				t.Fatal(err)
			}
			defer sub.Unsubscribe()
		}
		if err := e.worker.Flush(); err != nil {
			t.Fatal(err)
		}
		e.errs.none(t)
	})
	t.Run("reports progress and asks an edge to put messages on its sessions' streams", func(t *testing.T) {
		if err := e.worker.Publish("tg.progress.alpha.call1", []byte("{}")); err != nil {
			t.Fatal(err)
		}
		if _, err := e.ask(t, &nats.Msg{Subject: "tg.sessout.alpha.s1", Data: []byte(`{"jsonrpc":"2.0","method":"x"}`)}); err != nil {
			t.Fatal(err)
		}
		js, _ := jetstream.New(e.admin)
		st, err := js.Stream(e.ctx, "tg-mcp-events")
		if err != nil {
			t.Fatal(err)
		}
		m, err := st.GetLastMsgForSubject(e.ctx, "tg.sess.alpha.s1.out")
		if err != nil || string(m.Data) != `{"jsonrpc":"2.0","method":"x"}` {
			t.Fatalf("the log holds %v, %v", m, err)
		}
		e.errs.none(t)
		e.edgeErrs.none(t)
	})
	t.Run("asks an edge to write its tool record and presence", func(t *testing.T) {
		rec, err := wire.DefaultSubjects.AskRecordMsg(&wire.Tool{ID: "alpha", Version: "1.0.0", Methods: []wire.Method{}})
		if err != nil {
			t.Fatal(err)
		}
		if _, err := e.ask(t, rec); err != nil {
			t.Fatal(err)
		}
		pres, err := wire.DefaultSubjects.AskPresenceMsg(&wire.Presence{Tool: "alpha", Instance: "i1"}, 10*time.Second)
		if err != nil {
			t.Fatal(err)
		}
		if _, err := e.ask(t, pres); err != nil {
			t.Fatal(err)
		}
		js, _ := jetstream.New(e.admin)
		for bucket, key := range map[string]string{"tg-tools": "alpha", "tg-presence": "alpha.i1"} {
			kv, err := js.KeyValue(e.ctx, bucket)
			if err != nil {
				t.Fatal(err)
			}
			if _, err := kv.Get(e.ctx, key); err != nil {
				t.Fatalf("%s %s: %v", bucket, key, err)
			}
		}
		e.errs.none(t)
		e.edgeErrs.none(t)
	})
}

// ask sends msg from the worker, as a request answered on its tool's inbox, and
// returns the edge's answer.
func (e *workerEnv) ask(t *testing.T, msg *nats.Msg) ([]byte, error) {
	t.Helper()
	answer, err := e.worker.RequestMsg(msg, 10*time.Second)
	if err != nil {
		t.Fatalf("%s: %v", msg.Subject, err)
	}
	body, _, err := wire.ReadAskReply(answer)
	return body, err
}

// TestWorkerCredentialsRefuseEverythingElse tries, with the worker credentials of
// tool alpha, what a tool team must not do, and checks that the server refuses each
// with its permissions error.
func TestWorkerCredentialsRefuseEverythingElse(t *testing.T) {
	e := newWorkerEnv(t)
	subscribe := []struct{ name, subject, queue string }{
		{"another tool's calls", "tg.call.beta.>", "tg.beta"},
		{"another tool's calls in its own queue group", "tg.call.beta.>", "tg.alpha"},
		{"its own calls outside its queue group", "tg.call.alpha.>", ""},
		{"every call", "tg.call.>", ""},
		{"another tool's MCP requests", "tg.mcp.beta", "tg.beta"},
		{"the requests sent to another tool's instance", "tg.inst.beta.i1.>", ""},
		{"the requests sent to every instance", "tg.inst.>", ""},
		{"another tool's cancels", "tg.cancel.beta.>", ""},
		{"every cancel", "tg.cancel.>", ""},
		{"another tool's session replies", "tg.sess.beta.*.reply.>", ""},
		{"every session's messages", "tg.sess.>", ""},
		{"the event log's republished messages", "tg.logged.>", ""},
		{"progress", "tg.progress.>", ""},
		{"every inbox", "_INBOX.>", ""},
		{"another tool's inboxes", "_INBOX.tool.beta.>", ""},
		{"another tool's micro discovery", "$SRV.PING.beta", ""},
		{"the registry's changes", "$KV.>", ""},
		{"the audit trail", "tg.audit.>", ""},
	}
	for _, c := range subscribe {
		t.Run("subscribing to "+c.name, func(t *testing.T) {
			var err error
			if c.queue != "" {
				_, err = e.worker.QueueSubscribeSync(c.subject, c.queue)
			} else {
				_, err = e.worker.SubscribeSync(c.subject)
			}
			if err != nil {
				t.Fatal(err)
			}
			want := fmt.Sprintf("Subscription to %q", c.subject)
			if c.queue != "" {
				want += fmt.Sprintf(" using queue %q", c.queue)
			}
			e.errs.expect(t, want)
		})
	}

	publish := []struct{ name, subject string }{
		{"calling another tool", "tg.call.beta.run"},
		{"calling its own tool", "tg.call.alpha.run"},
		{"another tool's MCP requests", "tg.mcp.beta"},
		{"a request to an instance of its own tool", "tg.inst.alpha.i1.call.run"},
		{"cancelling another tool's calls", "tg.cancel.beta.c1"},
		{"another tool's progress", "tg.progress.beta.c1"},
		{"another tool's session streams", "tg.sess.beta.s1.out"},
		{"answering for another tool's sessions", "tg.sess.beta.s1.reply.r1"},
		{"answering for its own sessions' clients", "tg.sess.alpha.s1.reply.r1"},
		{"the event log's republished subjects", "tg.logged.sess.alpha.s1.out"},
		{"its session's stream in the event log", "tg.sess.alpha.s1.out"},
		{"its session's POST stream in the event log", "tg.sess.alpha.s1.out.p1"},
		{"a stream answer beside the log", "tg.sess.alpha.s1.out.p1~reply"},
		{"a stream answer on an edge's subject", "tg.answer.alpha.s1.p1"},
		{"its own record in JetStream", "$KV.tg-tools.alpha"},
		{"its own presence in JetStream", "$KV.tg-presence.alpha.i1"},
		{"reading its own record from JetStream", "$JS.API.DIRECT.GET.KV_tg-tools.$KV.tg-tools.alpha"},
		{"its own state in JetStream", "$KV.tg-state-alpha.k"},
		{"reading its own state from JetStream", "$JS.API.DIRECT.GET.KV_tg-state-alpha.$KV.tg-state-alpha.k"},
		{"opening its own state in JetStream", "$JS.API.STREAM.INFO.KV_tg-state-alpha"},
		{"reading its own state from the stream's leader", "$JS.API.STREAM.MSG.GET.KV_tg-state-alpha"},
		{"watching its own state in JetStream", "$JS.API.CONSUMER.CREATE.KV_tg-state-alpha.w1.$KV.tg-state-alpha.>"},
		{"another tool's record", "$KV.tg-tools.beta"},
		{"asking for another tool's record", "tg.reg.beta.record"},
		{"another tool's presence", "$KV.tg-presence.beta.i1"},
		{"asking for another tool's presence", "tg.reg.beta.presence.i1"},
		{"asking for another tool's state", "tg.state.beta.get"},
		{"asking for another tool's session", "tg.sessout.beta.s1"},
		{"its presence under another tool's key", "$KV.tg-presence.beta"},
		{"reading another tool's record", "$JS.API.DIRECT.GET.KV_tg-tools.$KV.tg-tools.beta"},
		{"reading the tools bucket", "$JS.API.DIRECT.GET.KV_tg-tools"},
		{"watching the tools bucket", "$JS.API.CONSUMER.CREATE.KV_tg-tools"},
		{"the JetStream API", "$JS.API.INFO"},
		{"the system account", "$SYS.REQ.CLAIMS.UPDATE"},
		{"another tool's inbox", "_INBOX.tool.beta.x"},
		{"a record of the audit trail", "tg.audit.call.acme.alpha.run.ok"},
		{"opening the audit trail", "$JS.API.STREAM.INFO.tg-audit"},
		{"reading the audit trail", "$JS.API.CONSUMER.CREATE.tg-audit.c1.tg.audit.>"},
		{"reading the audit trail by sequence", "$JS.API.STREAM.MSG.GET.tg-audit"},
		{"reading the audit trail directly", "$JS.API.DIRECT.GET.tg-audit.tg.audit.>"},
	}
	for _, b := range []string{"tg-keys", "tg-accounts", "tg-connections", "tg-links", "tg-sessions", "tg-rates", "tg-quotas", "tg-dashboard-sessions"} {
		publish = append(publish,
			struct{ name, subject string }{"writing " + b, "$KV." + b + ".x"},
			struct{ name, subject string }{"reading " + b, "$JS.API.DIRECT.GET.KV_" + b + ".$KV." + b + ".x"},
			struct{ name, subject string }{"reading " + b + " by sequence", "$JS.API.STREAM.MSG.GET.KV_" + b},
			struct{ name, subject string }{"watching " + b, "$JS.API.CONSUMER.CREATE.KV_" + b + ".w1.$KV." + b + ".>"},
			struct{ name, subject string }{"looking " + b + " up", "$JS.API.STREAM.INFO.KV_" + b},
			struct{ name, subject string }{"deleting " + b, "$JS.API.STREAM.DELETE.KV_" + b},
		)
	}
	e.refusesPublishing(t, publish)

	t.Run("a registry read through the JetStream client fails", func(t *testing.T) {
		js, err := jetstream.New(e.worker)
		if err != nil {
			t.Fatal(err)
		}
		ctx, cancel := context.WithTimeout(e.ctx, 3*time.Second)
		defer cancel()
		if _, err := js.KeyValue(ctx, "tg-keys"); err == nil {
			t.Fatal("a worker opened tg-keys")
		}
		e.errs.expect(t, `Publish to "$JS.API.STREAM.INFO.KV_tg-keys"`)
	})
	t.Run("nothing it was refused was stored", func(t *testing.T) {
		js, err := jetstream.New(e.admin)
		if err != nil {
			t.Fatal(err)
		}
		for _, b := range []string{"tg-keys", "tg-accounts", "tg-connections", "tg-links", "tg-sessions", "tg-tools", "tg-presence"} {
			kv, err := js.KeyValue(e.ctx, b)
			if err != nil {
				t.Fatal(err)
			}
			st, err := kv.Status(e.ctx)
			if err != nil {
				t.Fatal(err)
			}
			if st.Values() != 0 {
				var keys []string
				l, _ := kv.ListKeys(e.ctx)
				for k := range l.Keys() {
					keys = append(keys, k)
				}
				b, _ := json.Marshal(keys)
				t.Errorf("%s holds %s", st.Bucket(), b)
			}
		}
	})
}

// securedEdge is a secured server with the registry's buckets made by the admin
// role, its admin connection, an edge's connection and the violations the server
// sends the edge.
func securedEdge(t *testing.T) (admin, edge *nats.Conn, errs violations) {
	sec := testenv.NewSecurity(t)
	srv := testenv.SecureServer(t, sec, true)
	admin = testenv.SecureConn(t, srv.ClientURL(), sec.Client(sec.Deployment.CredsFile(busauth.RoleAdmin), true))
	testenv.Store(t, admin, 1)
	errs = make(violations, 64)
	edge = testenv.SecureConn(t, srv.ClientURL(), sec.Client(sec.Deployment.CredsFile(busauth.RoleEdge), true), errs.handler())
	return admin, edge, errs
}

// TestEdgeCredentialsRefuseWhatEdgesDoNotDo: an edge calls tools but never takes
// their calls, never reads a worker's inbox, and cannot delete or purge what it
// uses, touch other streams, or speak for the system account.
func TestEdgeCredentialsRefuseWhatEdgesDoNotDo(t *testing.T) {
	admin, edge, errs := securedEdge(t)

	for _, c := range []struct{ name, subject, queue string }{
		{"a tool's calls", "tg.call.alpha.>", "tg.alpha"},
		{"every call", "tg.call.>", ""},
		{"a tool's MCP requests", "tg.mcp.alpha", "tg.alpha"},
		{"the requests sent to a tool's instance", "tg.inst.alpha.i1.>", ""},
		{"a worker's inbox", "_INBOX.tool.alpha.>", ""},
		{"the system account's subjects", "$SYS.>", ""},
	} {
		t.Run("subscribing to "+c.name, func(t *testing.T) {
			var err error
			if c.queue != "" {
				_, err = edge.QueueSubscribeSync(c.subject, c.queue)
			} else {
				_, err = edge.SubscribeSync(c.subject)
			}
			if err != nil {
				t.Fatal(err)
			}
			errs.expect(t, fmt.Sprintf("Subscription to %q", c.subject))
		})
	}
	for _, c := range []struct{ name, subject string }{
		{"deleting a bucket", "$JS.API.STREAM.DELETE.KV_tg-keys"},
		{"purging a bucket", "$JS.API.STREAM.PURGE.KV_tg-keys"},
		{"deleting the event log", "$JS.API.STREAM.DELETE.tg-mcp-events"},
		{"deleting the audit trail", "$JS.API.STREAM.DELETE.tg-audit"},
		{"purging the audit trail", "$JS.API.STREAM.PURGE.tg-audit"},
		{"deleting a record of the audit trail", "$JS.API.STREAM.MSG.DELETE.tg-audit"},
		{"making another stream", "$JS.API.STREAM.CREATE.other"},
		{"making a tool's state bucket", "$JS.API.STREAM.CREATE.KV_tg-state-email"},
		{"purging a tool's state bucket", "$JS.API.STREAM.PURGE.KV_tg-state-email"},
		{"progress as if it were a worker", "tg.progress.alpha.c1"},
		{"an account JWT", "$SYS.REQ.CLAIMS.UPDATE"},
	} {
		t.Run("publishing "+c.name, func(t *testing.T) {
			if err := edge.PublishRequest(c.subject, edge.NewRespInbox(), []byte("{}")); err != nil {
				t.Fatal(err)
			}
			errs.expect(t, fmt.Sprintf("Publish to %q", c.subject))
		})
	}
	t.Run("it makes the audit trail, writes it and reads it", func(t *testing.T) {
		trail, err := audit.Open(testenv.Context(t), edge, audit.Options{Edge: "e1"}, testenv.Logger(t))
		if err != nil {
			t.Fatal(err)
		}
		trail.Write(audit.Record{Kind: audit.KindCall, Account: "acme", Tool: "alpha", Method: "run", Outcome: audit.OutcomeOK})
		testenv.WaitFor(t, "the record is read back", func() bool {
			page, err := trail.Read(testenv.Context(t), audit.Filter{Account: "acme"})
			return err == nil && len(page.Records) == 1 && page.Records[0].Edge == "e1"
		})
		if err := trail.Close(testenv.Context(t)); err != nil || trail.Failures() != 0 {
			t.Fatalf("close: %v; %d records not written", err, trail.Failures())
		}
		errs.none(t)
	})
	t.Run("it follows the answer of a call it streams, which its tool sends beside the stream", func(t *testing.T) {
		sub, err := edge.SubscribeSync("tg.sess.alpha.s1.out.p1~reply")
		if err != nil {
			t.Fatal(err)
		}
		if err := edge.Flush(); err != nil {
			t.Fatal(err)
		}
		if err := admin.Publish("tg.sess.alpha.s1.out.p1~reply", []byte("answer")); err != nil {
			t.Fatal(err)
		}
		if m, err := sub.NextMsg(testenv.Patience); err != nil || string(m.Data) != "answer" {
			t.Fatalf("got %v %v", m, err)
		}
		errs.none(t)
	})
	t.Run("its inboxes never receive a worker's replies", func(t *testing.T) {
		sub, err := edge.SubscribeSync("_INBOX.>")
		if err != nil {
			t.Fatal(err)
		}
		if err := edge.Flush(); err != nil {
			t.Fatal(err)
		}
		if err := admin.Publish("_INBOX.tool.alpha.x", []byte("secret")); err != nil {
			t.Fatal(err)
		}
		if err := admin.Publish("_INBOX.edge.x", []byte("visible")); err != nil {
			t.Fatal(err)
		}
		m, err := sub.NextMsg(testenv.Patience)
		if err != nil || string(m.Data) != "visible" {
			t.Fatalf("got %v %v", m, err)
		}
		errs.none(t)
	})
}

// refusesPublishing publishes, with the worker's credentials, on each subject (a
// request, as a client of the API would) and expects the server's refusal of each.
func (e *workerEnv) refusesPublishing(t *testing.T, cases []struct{ name, subject string }) {
	t.Helper()
	for _, c := range cases {
		t.Run("publishing "+c.name, func(t *testing.T) {
			if err := e.worker.PublishRequest(c.subject, e.worker.NewRespInbox(), []byte("{}")); err != nil {
				t.Fatal(err)
			}
			e.errs.expect(t, fmt.Sprintf("Publish to %q", c.subject))
		})
	}
}

// workerInbox makes a raw connection's inboxes a worker's of tool, as the SDK makes
// its own.
func workerInbox(tool string) nats.Option {
	return nats.CustomInboxPrefix(strings.TrimSuffix(wire.WorkerInbox(tool), "."))
}

// TestEdgeCredentialsCountQuotas: an edge on its own credentials takes a window's
// lease, holds and lets go of calls at once, and reads them back in tg-quotas, with
// no permissions error.
func TestEdgeCredentialsCountQuotas(t *testing.T) {
	e := newWorkerEnv(t)
	store, err := registry.Open(e.ctx, e.edge, registry.Options{})
	if err != nil {
		t.Fatal(err)
	}
	now := time.Now()
	_, end := registry.WindowMinute.Bounds(now)
	if took, _, err := store.TakeQuota(e.ctx, "acme.r.account.minute.1", 10, registry.QuotaTake{ID: "t1", Want: 5}, end, now); err != nil || took != 5 {
		t.Fatalf("take: %d, %v", took, err)
	}
	if took, _, err := store.TakeQuota(e.ctx, "acme.r.account.minute.1", 10, registry.QuotaTake{ID: "t2", Want: 5, Unspent: 2}, end, now); err != nil || took != 5 {
		t.Fatalf("take again: %d, %v", took, err)
	}
	if used, err := store.QuotaUsed(e.ctx, "acme.r.account.minute.1"); err != nil || used != 8 {
		t.Fatalf("used: %d, %v", used, err)
	}
	for _, calls := range []int{1, 2, 0} {
		if ok, err := store.HoldSlots(e.ctx, "acme.r.account.concurrent", "edge-1", calls, 2, now.Add(time.Minute), now); err != nil || !ok {
			t.Fatalf("hold %d: %v, %v", calls, ok, err)
		}
	}
	if n, err := store.SlotsRunning(e.ctx, "acme.r.account.concurrent", now); err != nil || n != 0 {
		t.Fatalf("running: %d, %v", n, err)
	}
	e.edgeErrs.none(t)
}
