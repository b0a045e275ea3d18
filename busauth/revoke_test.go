package busauth_test

import (
	"context"
	"errors"
	"os"
	"path/filepath"
	"strings"
	"testing"
	"time"

	"github.com/nats-io/nats.go"

	"github.com/toolgate/toolgate/bus"
	"github.com/toolgate/toolgate/busauth"
	"github.com/toolgate/toolgate/internal/testenv"
)

// TestRevokedWorkerIsDisconnectedEverywhere revokes a worker's credentials on a
// running 3-node cluster, through one node, while the worker is connected to
// another: the worker is disconnected and refused on every node within 2 s, and no
// server restarts. The other tool's worker stays connected.
func TestRevokedWorkerIsDisconnectedEverywhere(t *testing.T) {
	sec := testenv.NewSecurity(t)
	c := testenv.NewSecureCluster(t, sec)
	revokedCreds, revokedUser := sec.WorkerCreds(t, "alpha")
	keptCreds, _ := sec.WorkerCreds(t, "beta")

	disconnected := make(chan time.Time, 1)
	revoked := testenv.SecureConn(t, c.Servers[1].ClientURL(), sec.Client(revokedCreds, true),
		workerInbox("alpha"),
		nats.DisconnectErrHandler(func(*nats.Conn, error) {
			select {
			case disconnected <- time.Now():
			default:
			}
		}))
	// The role's view: Watch's context ends when the connection gives up.
	watched, stop := bus.Watch(context.Background(), revoked)
	defer stop()
	kept := testenv.SecureConn(t, c.Servers[2].ClientURL(), sec.Client(keptCreds, true),
		workerInbox("beta"))
	if _, err := revoked.QueueSubscribeSync("tg.call.alpha.>", "tg.alpha"); err != nil {
		t.Fatal(err)
	}
	if err := revoked.Flush(); err != nil {
		t.Fatal(err)
	}

	gs, token, err := sec.Deployment.Revoke("alpha", "")
	if err != nil || len(gs) != 1 || gs[0].User != revokedUser {
		t.Fatalf("revoke: %+v %v", gs, err)
	}
	system := testenv.SecureConn(t, c.Servers[0].ClientURL(), sec.Client(sec.Deployment.CredsFile(busauth.RoleSystem), true))
	gaveUp := make(chan time.Time, 1)
	go func() { <-watched.Done(); gaveUp <- time.Now() }()
	pushed := time.Now()
	stored, err := busauth.Push(testenv.Context(t), system, token, time.Second)
	if err != nil {
		t.Fatalf("push: %v", err)
	}
	if len(stored) != 3 {
		t.Errorf("%d servers applied the revocation, want 3: %+v", len(stored), stored)
	}

	// The issue's bound: disconnected within 2s of the revocation. Every reconnection
	// is refused from then on (checked below); the client gives up after trying each
	// node, its reconnect waits apart, which the role sees as its context ending.
	select {
	case at := <-disconnected:
		t.Logf("the revoked worker was disconnected %v after the push", at.Sub(pushed))
		if at.Sub(pushed) > 2*time.Second {
			t.Errorf("disconnected %v after the push, more than 2s", at.Sub(pushed))
		}
	case <-time.After(testenv.Patience):
		t.Fatalf("the revoked worker is still connected %v after the push (status %v)", testenv.Patience, revoked.Status())
	}
	select {
	case at := <-gaveUp:
		t.Logf("it stopped reconnecting %v after the push", at.Sub(pushed))
	case <-time.After(testenv.Patience):
		t.Fatalf("the revoked worker still tries to reconnect %v after the push (status %v)", testenv.Patience, revoked.Status())
	}
	if cause := context.Cause(watched); !errors.Is(cause, bus.ErrConnectionLost) || !errors.Is(cause, bus.ErrCredentialsRefused) {
		t.Errorf("the role is told %v", cause)
	}
	for i, s := range c.Servers {
		_, err := bus.Connect(s.ClientURL(), "revoked", testenv.Logger(t), sec.Client(revokedCreds, true).Options()...)
		if !errors.Is(err, bus.ErrCredentialsRefused) {
			t.Errorf("node %d: a new connection with the revoked credentials: %v", i+1, err)
		}
	}
	if !kept.IsConnected() {
		t.Error("the other tool's worker was disconnected too")
	}
	for i, s := range c.Servers {
		if !s.Running() {
			t.Errorf("node %d stopped", i+1)
		}
	}
}

// TestRevokingAgainOnlyPushesAgain: a revoked user stays revoked at its first time,
// and a revocation that matches nothing is an error that says so.
func TestRevokingAgainOnlyPushesAgain(t *testing.T) {
	sec := testenv.NewSecurity(t)
	_, user := sec.WorkerCreds(t, "alpha")
	first, _, err := sec.Deployment.Revoke("", user)
	if err != nil || len(first) != 1 {
		t.Fatalf("%+v %v", first, err)
	}
	time.Sleep(1100 * time.Millisecond) // revocation times are in seconds
	again, _, err := sec.Deployment.Revoke("alpha", "")
	if err != nil || len(again) != 1 || !again[0].RevokedAt.Equal(*first[0].RevokedAt) {
		t.Fatalf("again: %+v %v", again, err)
	}
	if _, _, err := sec.Deployment.Revoke("nosuch", ""); !errors.Is(err, busauth.ErrNoGrant) || !strings.Contains(err.Error(), "nosuch") {
		t.Fatalf("a tool nobody was issued: %v", err)
	}
}

// TestExpiredCredentialsEndTheConnection: credentials issued with an expiry are
// ended by the server when they expire, and the role is told.
func TestExpiredCredentialsEndTheConnection(t *testing.T) {
	sec := testenv.NewSecurity(t)
	srv := testenv.SecureServer(t, sec, false)
	creds, g, err := sec.Deployment.IssueWorker([]string{"alpha"}, "", 2*time.Second)
	if err != nil || g.ExpiresAt == nil {
		t.Fatalf("%+v %v", g, err)
	}
	path := filepath.Join(t.TempDir(), "alpha.creds")
	if err := os.WriteFile(path, creds, 0o600); err != nil {
		t.Fatal(err)
	}
	nc := testenv.SecureConn(t, srv.ClientURL(), sec.Client(path, false))
	watched, stop := bus.Watch(context.Background(), nc)
	defer stop()
	select {
	case <-watched.Done():
		if cause := context.Cause(watched); !errors.Is(cause, bus.ErrConnectionLost) {
			t.Fatalf("the role is told %v", cause)
		}
	case <-time.After(testenv.Patience):
		t.Fatalf("still connected %v after credentials of 2s (%v)", testenv.Patience, nc.Status())
	}
	// Expiry is in whole seconds: within the second it falls in, a server may still
	// let the user in, for no longer than that second.
	testenv.WaitFor(t, "expired credentials are refused", func() bool {
		nc, err := bus.Connect(srv.ClientURL(), "expired", testenv.Logger(t), sec.Client(path, false).Options()...)
		if err == nil {
			nc.Close()
		}
		return errors.Is(err, bus.ErrCredentialsRefused)
	})
}
