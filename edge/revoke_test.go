package edge_test

import (
	"context"
	"encoding/json"
	"fmt"
	"io"
	"net"
	"net/http"
	"os/exec"
	"path/filepath"
	"slices"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/nats-io/nats.go"
	"github.com/nats-io/nats.go/jetstream"

	"github.com/toolgate/toolgate/edge"
	"github.com/toolgate/toolgate/internal/testenv"
	"github.com/toolgate/toolgate/registry"
)

// The bound: from a revocation's answer, every edge refuses what was revoked
// within this.
const revocationBound = 2 * time.Second

// TestRevokedKeyRefusedEverywhereThroughANodeLoss: two edges under load on a 3-node
// cluster; the node holding the key bucket's leader, which the second edge is
// connected to, is killed, and the key is revoked through the first edge 0.3 s later.
// From the DELETE's answer, neither edge accepts the key for more than 2 s.
func TestRevokedKeyRefusedEverywhereThroughANodeLoss(t *testing.T) {
	revocationRace(t, revokeKey, true)
}

// TestRevokedKeyRefusedEverywhere: the same without a fault.
func TestRevokedKeyRefusedEverywhere(t *testing.T) { revocationRace(t, revokeKey, false) }

// TestRotatedLinkRefusedEverywhereThroughANodeLoss: as for a key, a link token made
// dead by rotating the link, with the links bucket's leader's node killed.
func TestRotatedLinkRefusedEverywhereThroughANodeLoss(t *testing.T) {
	revocationRace(t, rotateLink, true)
}

// TestRotatedLinkRefusedEverywhere: the same without a fault.
func TestRotatedLinkRefusedEverywhere(t *testing.T) { revocationRace(t, rotateLink, false) }

// TestDeletedAccountsKeyRefusedEverywhereThroughANodeLoss: an account deleted, its
// key refused by every edge, with the accounts bucket's leader's node killed.
func TestDeletedAccountsKeyRefusedEverywhereThroughANodeLoss(t *testing.T) {
	revocationRace(t, deleteAccount, true)
}

// TestDisconnectedLinkRefusedEverywhereThroughANodeLoss: a connection removed, its
// link refused by every edge, with the connections bucket's leader's node killed.
func TestDisconnectedLinkRefusedEverywhereThroughANodeLoss(t *testing.T) {
	revocationRace(t, disconnect, true)
}

// A revocable credential as the race below uses it: the bucket whose leader's node is
// killed, a request made with the credential, whether its answer refused the
// credential, and the revocation through the admin API.
type revocable struct {
	name    string
	bucket  string
	use     func(e *env, secret string) (result, error)
	load    func(e *env, secret string) // a call with the credential, unmeasured
	refused func(r result) bool
	revoke  func(a *env, id string) result
	// mint makes the credential through edge a once acme is connected to echo: its
	// secret and what revoke is given.
	mint func(t *testing.T, a *env) (secret, id string)
	// onA and onB are what the two edges run beyond MCP (b is another edge of a's
	// deployment).
	onA []option
	onB func(a *env) []option
}

// probeClient sends the requests the race measures: bounded, so that a request held
// up on the call path of an edge whose node died cannot hold the measurement.
var probeClient = &http.Client{Timeout: 5 * time.Second}

// probe sends one request the race measures; the probes touch no bus, so what they
// measure is the credential's check alone.
func probe(e *env, method, path string, headers ...string) (result, error) {
	req, err := http.NewRequest(method, e.url+path, nil)
	if err != nil {
		return result{}, err
	}
	for i := 0; i+1 < len(headers); i += 2 {
		req.Header.Set(headers[i], headers[i+1])
	}
	resp, err := probeClient.Do(req)
	if err != nil {
		return result{}, err
	}
	defer resp.Body.Close()
	b, err := io.ReadAll(resp.Body)
	return result{status: resp.StatusCode, header: resp.Header, body: b}, err
}

var revokeKey = revocable{
	name:   "key",
	bucket: registry.BucketKeys,
	mint: func(t *testing.T, a *env) (string, string) {
		r := a.admin(http.MethodPost, "/keys", `{"account":"acme"}`)
		if r.status != http.StatusCreated {
			t.Fatalf("POST /keys: %d %s", r.status, r.body)
		}
		k := decode[edge.NewKey](t, r)
		return k.Secret, k.ID
	},
	use: func(e *env, secret string) (result, error) {
		return probe(e, http.MethodGet, "/tools/echo", "Authorization", "Bearer "+secret)
	},
	load: func(e *env, secret string) {
		_, _ = e.send(http.MethodPost, "/tool-call/echo/echo", `{}`, toolCallHeaders(secret, nil)...)
	},
	refused: func(r result) bool {
		return r.status == http.StatusUnauthorized && errorCode(r) == edge.CodeUnauthenticated
	},
	revoke: func(a *env, id string) result { return a.admin(http.MethodDelete, "/keys/"+id, "") },
}

var rotateLink = revocable{
	name:   "link",
	bucket: registry.BucketLinks,
	mint: func(t *testing.T, a *env) (string, string) {
		c, err := a.store.Connection(testenv.Context(t), "acme", "echo")
		if err != nil {
			t.Fatal(err)
		}
		return a.signer.Token("acme", "echo", c.LinkNonce), ""
	},
	use: func(e *env, token string) (result, error) {
		// Any answer but the link's 404 passed the link's check.
		return probe(e, http.MethodGet, "/mcp/"+token)
	},
	load: func(e *env, token string) {
		_, _ = e.send(http.MethodPost, "/mcp/"+token, `{"jsonrpc":"2.0","id":1,"method":"ping"}`,
			"Accept", "application/json, text/event-stream", "MCP-Protocol-Version", "2026-07-28")
	},
	refused: func(r result) bool { return r.status == http.StatusNotFound && errorCode(r) == edge.CodeNotFound },
	revoke:  func(a *env, _ string) result { return a.admin(http.MethodPost, "/links/acme/echo/rotate", "") },
}

var deleteAccount = revocable{
	name: "key", bucket: registry.BucketAccounts, mint: revokeKey.mint, use: revokeKey.use, load: revokeKey.load, refused: revokeKey.refused,
	revoke: func(a *env, _ string) result { return a.admin(http.MethodDelete, "/accounts/acme", "") },
}

var disconnect = revocable{
	name: "link", bucket: registry.BucketConnections, mint: rotateLink.mint, use: rotateLink.use, load: rotateLink.load, refused: rotateLink.refused,
	revoke: func(a *env, _ string) result { return a.admin(http.MethodDelete, "/connections/acme/echo", "") },
}

func errorCode(r result) string {
	var env edge.Envelope
	if json.Unmarshal(r.body, &env) != nil {
		return ""
	}
	return env.Error.Code
}

// use is one request of the load: when it was sent and whether it was refused.
type use struct {
	sent    time.Time
	refused bool
	status  int
}

// revocationRace runs the race the issue reports, for one kind of credential.
func revocationRace(t *testing.T, kind revocable, fault bool) {
	if testing.Short() {
		t.Skip("starts a 3-node cluster")
	}
	cluster := startNodes(t)
	a := newEnv(t, append([]option{onCluster(cluster.urls[0]), withMCP()}, kind.onA...)...)
	a.serve(echoTool, echo)
	// The node to kill holds the leader of the revoked credential's bucket, and
	// edge b is connected to it: the revocation's write waits for a new leader, and
	// b loses its connection and its followers' consumers at once.
	victim := cluster.leaderAwayFrom(t, "KV_"+kind.bucket, 0)
	bOpts := []option{onCluster(cluster.urls[victim]), withMCP()}
	if kind.onB != nil {
		bOpts = append(bOpts, kind.onB(a)...)
	}
	b := newEnv(t, bOpts...)

	for _, step := range []struct{ path, body string }{
		{"/accounts", `{"id":"acme"}`},
		{"/connections", `{"account":"acme","tool":"echo"}`},
	} {
		if r := a.admin(http.MethodPost, step.path, step.body); r.status != http.StatusCreated {
			t.Fatalf("POST %s: %d %s", step.path, r.status, r.body)
		}
	}
	secret, id := kind.mint(t, a)
	for _, e := range []*env{a, b} {
		testenv.WaitFor(t, "each edge takes the "+kind.name, func() bool {
			r, err := kind.use(e, secret)
			return err == nil && !kind.refused(r) && r.status < 500
		})
	}

	// The load: a few requests at a time through each edge, each goroutine pausing
	// between its requests, so that on a small machine the load does not starve the
	// edges it measures: three probes, measured, and calls with the credential.
	const perEdge, pause = 3, 5 * time.Millisecond
	stop := make(chan struct{})
	var mu sync.Mutex
	uses := map[*env][]use{}
	var wg sync.WaitGroup
	// paced runs fn until stop, pause apart.
	paced := func(fn func()) {
		wg.Go(func() {
			for {
				select {
				case <-stop:
					return
				case <-time.After(pause):
				}
				fn()
			}
		})
	}
	for _, e := range []*env{a, b} {
		for range perEdge {
			paced(func() {
				sent := time.Now()
				r, err := kind.use(e, secret)
				if err != nil {
					return
				}
				mu.Lock()
				uses[e] = append(uses[e], use{sent: sent, refused: kind.refused(r), status: r.status})
				mu.Unlock()
			})
		}
		paced(func() { kind.load(e, secret) })
	}
	time.Sleep(500 * time.Millisecond)

	if fault {
		cluster.kill(victim)
		time.Sleep(300 * time.Millisecond)
	}
	sent := time.Now()
	r := kind.revoke(a, id)
	answered := time.Now()
	if r.status/100 != 2 {
		close(stop)
		wg.Wait()
		t.Fatalf("revoke the %s: %d %s", kind.name, r.status, r.body)
	}
	// Watched for the bound and two seconds more, and on until each edge refused its
	// last few requests (at most 20 s), so that a lag past the bound is measured too.
	time.Sleep(revocationBound + 2*time.Second)
	for time.Since(answered) < 20*time.Second {
		mu.Lock()
		settled := true
		for _, e := range []*env{a, b} {
			us := uses[e]
			for i := max(0, len(us)-20); i < len(us); i++ {
				settled = settled && us[i].refused
			}
		}
		mu.Unlock()
		if settled {
			break
		}
		time.Sleep(100 * time.Millisecond)
	}
	close(stop)
	wg.Wait()

	t.Logf("the revocation answered %v after it was sent", answered.Sub(sent).Round(time.Millisecond))
	for _, e := range []struct {
		name string
		env  *env
	}{{"a (revoked through it)", a}, {"b", b}} {
		var acceptedAfterSent int
		var lastAccepted time.Time
		var refusedLate int
		for _, u := range uses[e.env] {
			if u.sent.After(sent) && !u.refused {
				acceptedAfterSent++
			}
			if !u.refused {
				lastAccepted = u.sent
			}
			if u.sent.After(answered.Add(revocationBound)) && u.refused {
				refusedLate++
			}
		}
		// The lag: when the last request the edge accepted was sent, from the
		// revocation's answer (below zero: it refused before the answer).
		lag := lastAccepted.Sub(answered)
		t.Logf("edge %s: %d requests; accepted the %s %d times after the revocation was sent; lag %v (the last accepted request was sent then, from the answer)",
			e.name, len(uses[e.env]), kind.name, acceptedAfterSent, lag.Round(time.Millisecond))
		if lag >= revocationBound {
			t.Errorf("edge %s accepted the revoked %s %v after the revocation's answer (bound %v)", e.name, kind.name, lag.Round(time.Millisecond), revocationBound)
		}
		if refusedLate == 0 {
			t.Errorf("edge %s: no request of the load refused the %s after %v: the load did not measure it", e.name, kind.name, revocationBound)
		}
	}
}

// nodes is a 3-node NATS cluster of toolgate nats processes, so that a node can be
// killed as a crash would (an embedded server's Shutdown hands its leaderships over
// first, which a crash does not).
type nodes struct {
	urls  []string
	names []string
	procs []*exec.Cmd
	done  []chan struct{}
}

func startNodes(t *testing.T) *nodes {
	t.Helper()
	bin := testenv.Toolgate(t)
	dir := t.TempDir()
	ports := make([]int, 6) // clients, then routes
	for i := range ports {
		l, err := net.Listen("tcp", "127.0.0.1:0")
		if err != nil {
			t.Fatal(err)
		}
		ports[i] = l.Addr().(*net.TCPAddr).Port
		l.Close()
	}
	n := &nodes{}
	for i := range 3 {
		var routes []string
		for j := range 3 {
			if j != i {
				routes = append(routes, fmt.Sprintf("nats-route://127.0.0.1:%d", ports[3+j]))
			}
		}
		name := fmt.Sprintf("n%d", i+1)
		cmd := exec.Command(bin, "nats", "--name", name, "--listen", fmt.Sprintf("127.0.0.1:%d", ports[i]),
			"--store-dir", filepath.Join(dir, name), "--cluster", "tg-revoke",
			"--cluster-listen", fmt.Sprintf("127.0.0.1:%d", ports[3+i]), "--routes", strings.Join(routes, ","))
		cmd.Stdout, cmd.Stderr = testenv.LogWriter(t), testenv.LogWriter(t)
		if err := cmd.Start(); err != nil {
			t.Fatal(err)
		}
		done := make(chan struct{})
		go func() { _ = cmd.Wait(); close(done) }()
		n.urls, n.names = append(n.urls, fmt.Sprintf("nats://127.0.0.1:%d", ports[i])), append(n.names, name)
		n.procs, n.done = append(n.procs, cmd), append(n.done, done)
	}
	t.Cleanup(func() {
		for i := range n.procs {
			n.kill(i)
		}
	})
	nc, err := nats.Connect(strings.Join(n.urls, ","), nats.MaxReconnects(-1), nats.RetryOnFailedConnect(true), nats.ReconnectWait(100*time.Millisecond))
	if err != nil {
		t.Fatal(err)
	}
	defer nc.Close()
	js, err := jetstream.New(nc)
	if err != nil {
		t.Fatal(err)
	}
	testenv.WaitFor(t, "JetStream answers on the cluster", func() bool {
		ctx, cancel := context.WithTimeout(context.Background(), 2*time.Second)
		defer cancel()
		_, err := js.AccountInfo(ctx)
		return err == nil
	})
	testenv.WaitPlacement(t, nc)
	return n
}

// kill ends node i as a crash would: SIGKILL.
func (n *nodes) kill(i int) {
	_ = n.procs[i].Process.Kill()
	<-n.done[i]
}

// leaderAwayFrom returns the node leading stream, moving its leadership off node
// avoid first when it is there.
func (n *nodes) leaderAwayFrom(t *testing.T, stream string, avoid int) int {
	t.Helper()
	nc := testenv.Conn(t, strings.Join(n.urls, ","))
	js, err := jetstream.New(nc)
	if err != nil {
		t.Fatal(err)
	}
	leader := -1
	testenv.WaitFor(t, "a leader of "+stream+" on another node than "+n.names[avoid], func() bool {
		ctx, cancel := context.WithTimeout(context.Background(), 2*time.Second)
		defer cancel()
		st, err := js.Stream(ctx, stream)
		if err != nil || st.CachedInfo().Cluster == nil {
			return false
		}
		leader = slices.Index(n.names, st.CachedInfo().Cluster.Leader)
		if leader == avoid {
			_, _ = nc.RequestWithContext(ctx, "$JS.API.STREAM.LEADER.STEPDOWN."+stream, nil)
			time.Sleep(200 * time.Millisecond)
		}
		return leader >= 0 && leader != avoid
	})
	return leader
}
