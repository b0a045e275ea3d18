package gateway_test

import (
	"errors"
	"testing"

	"github.com/toolgate/toolgate/approvals"
	"github.com/toolgate/toolgate/gateway"
	"github.com/toolgate/toolgate/internal/testenv"
	"github.com/toolgate/toolgate/registry"
)

// TestAForwardedToolCallIsHeld: a tools/call a session forwards as the client sent it
// (a task-augmented call of a bridged server) waits for approval as the gateway's own
// does, and fails when nobody approves it, before the bus; other forwarded requests
// of the tool are not held.
func TestAForwardedToolCallIsHeld(t *testing.T) {
	env, p := rateEnv(t, registry.Limits{Approvals: []registry.ApprovalRule{{Tool: "echo", Method: "echo", ExpiresIn: 1}}})
	apr, err := approvals.Open(env.Ctx, env.Conn, env.Store, approvals.DefaultConfig(), nil, testenv.Logger(t))
	if err != nil {
		t.Fatal(err)
	}
	gw, err := gateway.New(env.Conn, env.View, gateway.DefaultConfig(), gateway.WithApprovals(apr))
	if err != nil {
		t.Fatal(err)
	}
	_, err = gw.Forward(env.Ctx, &gateway.Call{Principal: p, Tool: "echo", Method: "tools/call",
		Params: []byte(`{"name":"echo","arguments":{"say":"hi"},"task":{"ttl":60000}}`)})
	var f *gateway.Error
	if !errors.As(err, &f) || f.Kind != gateway.KindApprovalExpired {
		t.Fatalf("a forwarded tools/call nobody approved: %v", err)
	}
	// No worker serves echo: a request that is not held reaches the bus and finds none.
	_, err = gw.Forward(env.Ctx, &gateway.Call{Principal: p, Tool: "echo", Method: "resources/read", Params: []byte(`{"uri":"x"}`)})
	if errors.As(err, &f) && (f.Kind == gateway.KindApprovalExpired || f.Kind == gateway.KindApprovalDenied) {
		t.Fatalf("a resources/read was held: %v", err)
	}
	if err == nil {
		t.Fatal("a resources/read of a tool no worker serves succeeded")
	}
}
