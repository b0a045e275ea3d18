package credentials

import (
	"testing"

	"github.com/toolgate/toolgate/bus/wire"
	"github.com/toolgate/toolgate/internal/testenv"
	"github.com/toolgate/toolgate/registry"
)

// TestACopyDropsAClearedRecordOnTheAnnouncement: an edge's copy of the bucket takes a
// record out as soon as a clearing is announced, before its follower brings anything
// (here the announcement names a revision the bucket has not reached, and nothing was
// purged: only the announcement can take it out), and a call then reads the leader.
func TestACopyDropsAClearedRecordOnTheAnnouncement(t *testing.T) {
	env := testenv.NewRegistry(t)
	keys, err := ParseKeyring(NewKeyLine())
	if err != nil {
		t.Fatal(err)
	}
	writer, err := Open(env.Ctx, env.Store, keys, false)
	if err != nil {
		t.Fatal(err)
	}
	edge, err := Open(env.Ctx, env.Store, keys, false)
	if err != nil {
		t.Fatal(err)
	}
	edge.Follow(env.Ctx, testenv.Logger(t))
	conn := &wire.Connection{Fields: []wire.Field{{Name: "token", Secret: true}}}
	token := "ghp_1"
	if _, err := writer.Update(env.Ctx, "acme", "github", conn, map[string]*string{"token": &token}, false); err != nil {
		t.Fatal(err)
	}
	testenv.WaitFor(t, "the edge's copy has the record", func() bool { return edge.copy.Load().lookup("acme", "github") != nil })
	_, rev, err := writer.Read(env.Ctx, "acme", "github")
	if err != nil {
		t.Fatal(err)
	}

	env.Store.Revoked(env.Ctx, registry.RevokedCredentials, recordKey("acme", "github"), writer.kv, rev+1000)
	testenv.WaitFor(t, "the edge's copy drops the record announced cleared", func() bool {
		return edge.copy.Load().lookup("acme", "github") == nil
	})
	// A write older than the announced purge, which a follower behind would bring
	// late, is not put back; the follower's next write (of another record) shows it
	// brought that one first.
	token2 := "ghp_2"
	if _, err := writer.Update(env.Ctx, "acme", "github", conn, map[string]*string{"token": &token2}, false); err != nil {
		t.Fatal(err)
	}
	if _, err := writer.Update(env.Ctx, "acme", "other", conn, map[string]*string{"token": &token2}, false); err != nil {
		t.Fatal(err)
	}
	testenv.WaitFor(t, "the edge's copy has the later record", func() bool { return edge.copy.Load().lookup("acme", "other") != nil })
	if edge.copy.Load().lookup("acme", "github") != nil {
		t.Fatal("a write older than the announced purge was put back into the copy")
	}
	// The record is still in the bucket (nothing was purged): a call reads it there.
	if r, _, err := edge.Lookup(env.Ctx, "acme", &wire.Tool{ID: "github", Connection: conn}); err != nil || r == nil {
		t.Fatalf("lookup from the leader: %v %v", r, err)
	}
}
