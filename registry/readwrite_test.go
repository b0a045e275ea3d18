package registry_test

import (
	"fmt"
	"testing"

	"github.com/toolgate/toolgate/internal/testenv"
	"github.com/toolgate/toolgate/registry"
)

// TestAReadSeesTheWritesBeforeIt: on a 3-node cluster, a record written through one
// node is read at once through every node, as an edge's admin API reads an account it
// was just told of (a connection or a key for it), or an admin reads what another edge
// wrote. A replicated bucket's direct gets are answered by any node's copy, and a node
// behind the stream's leader does not yet have a write the leader acknowledged; the
// store's reads must see it all the same.
func TestAReadSeesTheWritesBeforeIt(t *testing.T) {
	if testing.Short() {
		t.Skip("starts a 3-node cluster")
	}
	c := testenv.NewCluster(t)
	ctx := testenv.Context(t)
	var stores []*registry.Store
	for _, s := range c.Servers {
		stores = append(stores, testenv.Store(t, testenv.Conn(t, s.ClientURL()), 3))
	}
	signer := testenv.LinkSigner(t)
	for i := range 60 {
		w := stores[i%3]
		id := fmt.Sprintf("acct%d", i)
		if _, err := w.CreateAccount(ctx, registry.Account{ID: id}); err != nil {
			t.Fatal(err)
		}
		for j, r := range stores {
			if _, err := r.Account(ctx, id); err != nil {
				t.Fatalf("account %s, written through node %d, read through node %d: %v", id, i%3+1, j+1, err)
			}
		}
		// What the admin API does next: a connection checks the account it names.
		if _, err := stores[(i+1)%3].Connect(ctx, id, "echo", signer); err != nil {
			t.Fatalf("connect %s through another node: %v", id, err)
		}
	}
}
