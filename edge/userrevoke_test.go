package edge_test

import (
	"net/http"
	"net/url"
	"testing"

	"github.com/toolgate/toolgate/internal/testenv"
	"github.com/toolgate/toolgate/registry"
)

// TestDeletedUserRefusedEverywhereUnderLoad: as for a key or a grant (revoke_test.go,
// grantrevoke_test.go), a user's access token on a 3-node cluster, probed through two
// edges under load, is refused by both within 2 s of the answer of the user's
// DELETE through edge a.
func TestDeletedUserRefusedEverywhereUnderLoad(t *testing.T) { revocationRace(t, deleteUser, false) }

// TestDeletedUserRefusedEverywhereThroughANodeLoss: the same, the DELETE sent 0.3 s
// after the node holding the accounts bucket's leader, which edge b is connected to,
// was killed.
func TestDeletedUserRefusedEverywhereThroughANodeLoss(t *testing.T) {
	revocationRace(t, deleteUser, true)
}

var deleteUser = revocable{
	name:    "user",
	bucket:  registry.BucketAccounts,
	onA:     revokeGrant.onA,
	onB:     revokeGrant.onB,
	mint:    mintUserToken,
	use:     revokeGrant.use,
	load:    revokeGrant.load,
	refused: revokeGrant.refused,
	revoke: func(a *env, name string) result {
		r, err := a.send(http.MethodDelete, "/admin/accounts/acme/users/"+name, "", "Authorization", "Bearer "+a.adminKey)
		if err != nil {
			return result{body: []byte(err.Error())}
		}
		return r
	},
}

// mintUserToken makes acme's user ana through edge a, signs it in through a's
// dashboard for a client with a metadata document at echo's MCP endpoint, and returns
// the access token and the user's name.
func mintUserToken(t *testing.T, a *env) (string, string) {
	u := addUser(t, a, "acme", `{"name":"ana"}`)
	testenv.WaitFor(t, "edge a takes ana", func() bool { return a.view.Snapshot().User("acme", "ana") != nil })
	tok, _ := toolTokenWith(t, a, url.Values{"account": {"acme"}, "user": {"ana"}, "secret": {u.Secret}}, "echo")
	return tok.AccessToken, "ana"
}
