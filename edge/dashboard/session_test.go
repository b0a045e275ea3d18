package dashboard

import (
	"fmt"
	"testing"
	"time"

	"github.com/toolgate/toolgate/internal/testenv"
)

// TestASignInHoldsOnEveryEdge: a browser signs in through one edge and its next page
// is served by another, on another NATS node; the session is there at once.
func TestASignInHoldsOnEveryEdge(t *testing.T) {
	if testing.Short() {
		t.Skip("starts a 3-node cluster")
	}
	c := testenv.NewCluster(t)
	ctx := testenv.Context(t)
	var edges []*sessions
	for _, s := range c.Servers {
		ss, err := openSessions(ctx, testenv.Store(t, testenv.Conn(t, s.ClientURL()), 3), time.Hour)
		if err != nil {
			t.Fatal(err)
		}
		edges = append(edges, ss)
	}
	now := time.Now()
	for i := range 90 {
		want := fmt.Sprintf("acct%d", i)
		id, err := edges[i%3].create(ctx, session{Account: want, CreatedAt: now, ExpiresAt: now.Add(time.Hour)})
		if err != nil {
			t.Fatal(err)
		}
		for j, ss := range edges {
			got, err := ss.get(ctx, id, now)
			if err != nil || got.Account != want {
				t.Fatalf("session %d signed in through node %d, read through node %d: %+v, %v", i, i%3+1, j+1, got, err)
			}
		}
	}
}
