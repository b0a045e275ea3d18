package gateway_test

import (
	"testing"

	"github.com/nats-io/nats.go"

	"github.com/toolgate/toolgate/audit"
	"github.com/toolgate/toolgate/bus/wire"
	"github.com/toolgate/toolgate/gateway"
	"github.com/toolgate/toolgate/internal/testenv"
	"github.com/toolgate/toolgate/registry"
)

// TestEveryAnswerIsRecorded: with a trail, Call, Forward and Refuse each leave one
// record of what they answered, whatever door the call came by.
func TestEveryAnswerIsRecorded(t *testing.T) {
	env, p := rateEnv(t, registry.Limits{})
	trail, err := audit.Open(env.Ctx, env.Conn, audit.Options{Edge: "e1"}, testenv.Logger(t))
	if err != nil {
		t.Fatal(err)
	}
	gw, err := gateway.New(env.Conn, env.View, gateway.DefaultConfig(), gateway.WithAudit(trail))
	if err != nil {
		t.Fatal(err)
	}
	sub, err := env.Conn.QueueSubscribe(wire.DefaultSubjects.MCP("echo"), wire.DefaultSubjects.QueueGroup("echo"), func(m *nats.Msg) {
		_ = m.RespondMsg(wire.JSONReply(m.Reply, []byte(`{"contents":[]}`)))
	})
	if err != nil {
		t.Fatal(err)
	}
	defer sub.Unsubscribe()

	if _, err := gw.Forward(env.Ctx, &gateway.Call{Principal: p, Tool: "echo", Method: "resources/read", Params: []byte(`{"uri":"a"}`)}); err != nil {
		t.Fatal(err)
	}
	if _, err := gw.Call(env.Ctx, &gateway.Call{Principal: p, Tool: "echo", Method: "echo", Params: []byte(`{}`),
		Transport: audit.TransportDirect, RequestID: "r2"}); err == nil {
		t.Fatal("a call of a tool no worker serves was answered")
	}
	_ = gw.Refuse(env.Ctx, &gateway.Call{Principal: p, Tool: "nope", Method: "x", Transport: audit.TransportREST, RequestID: "r3"},
		registry.ErrToolNotFound)

	var page audit.Page
	testenv.WaitFor(t, "three records", func() bool {
		page, err = trail.Read(env.Ctx, audit.Filter{Account: "acme"})
		return err == nil && len(page.Records) >= 3
	})
	want := []audit.Record{
		{Tool: "echo", Method: "resources/read", Transport: audit.TransportMCP, Outcome: audit.OutcomeOK, RequestBytes: 11, ResponseBytes: 15},
		{Tool: "echo", Method: "echo", Transport: audit.TransportDirect, Outcome: gateway.CodeToolUnavailable, Status: 503, RequestBytes: 2, RequestID: "r2"},
		{Tool: "nope", Method: "x", Transport: audit.TransportREST, Outcome: gateway.CodeToolNotFound, Status: 404, RequestID: "r3"},
	}
	if len(page.Records) != len(want) {
		t.Fatalf("%d records, want %d: %+v", len(page.Records), len(want), page.Records)
	}
	for i, r := range page.Records {
		w := want[i]
		if r.Kind != audit.KindCall || r.Account != "acme" || r.Key != p.Key.ID || r.Edge != "e1" || r.Tool != w.Tool || r.Method != w.Method ||
			r.Transport != w.Transport || r.Outcome != w.Outcome || r.Status != w.Status || r.RequestBytes != w.RequestBytes ||
			r.ResponseBytes != w.ResponseBytes || r.RequestID != w.RequestID {
			t.Errorf("record %d: %+v, want %+v", i, r, w)
		}
	}
	if err := trail.Close(env.Ctx); err != nil || trail.Failures() != 0 {
		t.Fatalf("close: %v; %d not written", err, trail.Failures())
	}
}
