package busauth_test

import (
	"encoding/json"
	"fmt"
	"strings"
	"testing"
	"time"

	"github.com/nats-io/nats.go"
	"github.com/nats-io/nats.go/jetstream"
	"github.com/nats-io/nuid"

	"github.com/toolgate/toolgate/bus/wire"
	"github.com/toolgate/toolgate/internal/testenv"
	"github.com/toolgate/toolgate/registry"
)

// JetStream answers a request on whatever reply subject the requester names, and the
// server checks no permission on it: a user that may reach JetStream at all could
// have the server publish, in its name, anywhere in the account. These tests aim each
// way of doing so at what another tenant or tool owns, with the worker credentials of
// tool alpha, and check that nothing lands.

// forgeryEnv is a secured server with the registry, the event log and alpha's state
// bucket made by the admin, an account "victim", a registry view, a worker of tool
// beta that counts the calls it receives, and alpha's worker connection.
type forgeryEnv struct {
	*workerEnv
	store   *registry.Store
	view    *registry.View
	keys    jetstream.KeyValue
	victim  jetstream.KeyValueEntry // the victim's account record, as the admin wrote it
	betaGot chan *nats.Msg          // every message beta's worker received on its calls
}

func newForgeryEnv(t *testing.T) *forgeryEnv {
	t.Helper()
	sec := testenv.NewSecurity(t)
	srv := testenv.SecureServer(t, sec, true)
	w := newWorkerEnvOn(t, sec, srv)
	store, err := registry.Open(w.ctx, w.admin, registry.DefaultOptions()) // made already: opens it
	if err != nil {
		t.Fatal(err)
	}
	if _, err := registry.CreateToolState(w.ctx, w.admin, "alpha", registry.StateOptions{}); err != nil {
		t.Fatal(err)
	}
	if _, err := store.CreateAccount(w.ctx, registry.Account{ID: "victim"}); err != nil {
		t.Fatal(err)
	}
	js, err := jetstream.New(w.admin)
	if err != nil {
		t.Fatal(err)
	}
	accounts, err := js.KeyValue(w.ctx, "tg-accounts")
	if err != nil {
		t.Fatal(err)
	}
	victim, err := accounts.Get(w.ctx, "victim")
	if err != nil {
		t.Fatal(err)
	}
	keys, err := js.KeyValue(w.ctx, "tg-keys")
	if err != nil {
		t.Fatal(err)
	}
	betaCreds, _ := sec.WorkerCreds(t, "beta")
	beta := testenv.SecureConn(t, srv.ClientURL(), sec.Client(betaCreds, true), workerInbox("beta"))
	got := make(chan *nats.Msg, 64)
	if _, err := beta.ChanQueueSubscribe(wire.DefaultSubjects.CallAll("beta"), wire.DefaultSubjects.QueueGroup("beta"), got); err != nil {
		t.Fatal(err)
	}
	if err := beta.Flush(); err != nil {
		t.Fatal(err)
	}
	return &forgeryEnv{workerEnv: w, store: store, view: testenv.View(t, store), keys: keys, victim: victim, betaGot: got}
}

// A target is what the forged message is aimed at: its subject, the message the
// attacker would like there (where it chooses the body), and whether anything landed.
type target struct {
	name    string
	subject string
	payload *nats.Msg
	landed  func() (string, bool)
	reset   func(t *testing.T) // puts back what an attack on main overwrote, so each case stands alone
	// fence returns once whatever was published on the target before it was called
	// has landed, if it was to land: a write to the same stream acknowledged, or a
	// message to the same subscriber received.
	fence func(t *testing.T)
}

const forgedKey = "tgk_forgedforgedforgedforgedforged"

func (e *forgeryEnv) targets(t *testing.T) []target {
	now := time.Now().UTC()
	keyRecord, _ := json.Marshal(registry.Key{ID: "k_forged", Account: "victim", Prefix: forgedKey[:8], CreatedAt: now})
	call := nats.NewMsg("")
	call.Data = []byte(`{"to":"attacker@example.com"}`)
	call.Header.Set(wire.HeaderAccount, "victim")
	call.Header.Set(wire.HeaderCallID, "forged-call")
	return []target{
		{
			name: "an API key for another account", subject: "$KV.tg-keys." + registry.Hash(forgedKey),
			payload: &nats.Msg{Data: keyRecord, Header: nats.Header{}},
			landed: func() (string, bool) {
				if p, err := e.view.Snapshot().AuthenticateKey(forgedKey, time.Now()); err == nil {
					return "the forged key authenticates as account " + p.Account, true
				}
				if got, err := e.keys.Get(e.ctx, registry.Hash(forgedKey)); err == nil {
					return fmt.Sprintf("tg-keys holds %q under the forged key's hash", got.Value()), true
				}
				return "", false
			},
			fence: func(t *testing.T) { e.fenceBucket(t, "tg-keys") },
			reset: func(t *testing.T) {
				if err := e.keys.Purge(e.ctx, registry.Hash(forgedKey)); err != nil {
					t.Fatal(err)
				}
				testenv.Eventually(t, 10*time.Second, "the view forgets the forged key", func() bool {
					_, err := e.view.Snapshot().AuthenticateKey(forgedKey, time.Now())
					return err != nil
				})
			},
		},
		{
			name: "another account's record", subject: "$KV.tg-accounts.victim",
			payload: &nats.Msg{Data: []byte(`{"id":"victim","limits":{"rate":0.0001}}`), Header: nats.Header{}},
			landed: func() (string, bool) {
				a, err := e.store.Account(e.ctx, "victim")
				js, _ := jetstream.New(e.admin)
				kv, _ := js.KeyValue(e.ctx, "tg-accounts")
				cur, gerr := kv.Get(e.ctx, "victim")
				if gerr != nil || cur.Revision() != e.victim.Revision() {
					return fmt.Sprintf("the victim's account is now %+v (%v, %v)", a, err, gerr), true
				}
				return "", false
			},
			fence: func(t *testing.T) { e.fenceBucket(t, "tg-accounts") },
			reset: func(t *testing.T) {
				js, _ := jetstream.New(e.admin)
				kv, _ := js.KeyValue(e.ctx, "tg-accounts")
				if _, err := kv.Put(e.ctx, "victim", e.victim.Value()); err != nil {
					t.Fatal(err)
				}
				cur, err := kv.Get(e.ctx, "victim")
				if err != nil {
					t.Fatal(err)
				}
				e.victim = cur
			},
		},
		{
			name: "another tool's calls", subject: "tg.call.beta.run", payload: call,
			landed: func() (string, bool) {
				select {
				case m := <-e.betaGot:
					return fmt.Sprintf("beta's worker received %q with %v", m.Data, m.Header), true
				default:
					return "", false
				}
			},
			fence: func(t *testing.T) {
				if err := e.admin.Publish("tg.call.beta.fence", []byte("fence")); err != nil {
					t.Fatal(err)
				}
				select {
				case m := <-e.betaGot:
					if m.Subject != "tg.call.beta.fence" {
						e.betaGot <- m // for landed
						return
					}
				case <-time.After(10 * time.Second):
					t.Fatal("beta's worker did not receive the fence")
				}
			},
			reset: func(*testing.T) {},
		},
	}
}

// fenceBucket writes and removes a key of bucket as the admin: once acknowledged,
// whatever the bucket's stream was sent before is stored.
func (e *forgeryEnv) fenceBucket(t *testing.T, bucket string) {
	t.Helper()
	js, _ := jetstream.New(e.admin)
	kv, err := js.KeyValue(e.ctx, bucket)
	if err != nil {
		t.Fatal(err)
	}
	if _, err := kv.Put(e.ctx, "fence", []byte(`{"id":"fence"}`)); err != nil {
		t.Fatal(err)
	}
	if err := kv.Purge(e.ctx, "fence"); err != nil {
		t.Fatal(err)
	}
}

// A vector is one way a worker could make JetStream publish on a subject it names.
// stage stores, as the admin, what the attack reads back (for the vectors that
// deliver a stored message); attack is what the worker sends; sent is the subject
// the worker publishes on, which its credentials must refuse.
type vector struct {
	name   string
	stage  func(t *testing.T, e *forgeryEnv, payload *nats.Msg)
	attack func(t *testing.T, e *forgeryEnv, target string) (sent string)
}

func (e *forgeryEnv) adminStore(t *testing.T, subject string, payload *nats.Msg) {
	t.Helper()
	js, err := jetstream.New(e.admin)
	if err != nil {
		t.Fatal(err)
	}
	m := nats.NewMsg(subject)
	m.Data = payload.Data
	for k, v := range payload.Header {
		m.Header[k] = v
	}
	if _, err := js.PublishMsg(e.ctx, m); err != nil {
		t.Fatal(err)
	}
}

func (e *forgeryEnv) publish(t *testing.T, subject, reply string, data []byte) string {
	t.Helper()
	if err := e.worker.PublishMsg(&nats.Msg{Subject: subject, Reply: reply, Data: data}); err != nil {
		t.Fatal(err)
	}
	return subject
}

var vectors = []vector{
	{
		name: "a direct get of its tool record",
		stage: func(t *testing.T, e *forgeryEnv, p *nats.Msg) {
			e.adminStore(t, wire.ToolRecord("alpha"), p) // as if alpha's worker had written it
		},
		attack: func(t *testing.T, e *forgeryEnv, target string) string {
			return e.publish(t, "$JS.API.DIRECT.GET.KV_tg-tools.$KV.tg-tools.alpha", target, nil)
		},
	},
	{
		name: "a direct get of its state",
		stage: func(t *testing.T, e *forgeryEnv, p *nats.Msg) {
			e.adminStore(t, "$KV.tg-state-alpha.k", p)
		},
		attack: func(t *testing.T, e *forgeryEnv, target string) string {
			return e.publish(t, "$JS.API.DIRECT.GET.KV_tg-state-alpha.$KV.tg-state-alpha.k", target, nil)
		},
	},
	{
		name: "a push consumer on its state",
		stage: func(t *testing.T, e *forgeryEnv, p *nats.Msg) {
			e.adminStore(t, "$KV.tg-state-alpha.k", p)
		},
		attack: func(t *testing.T, e *forgeryEnv, target string) string {
			name := "forger" + nuid.Next()
			req, _ := json.Marshal(map[string]any{
				"stream_name": "KV_tg-state-alpha",
				"config": map[string]any{
					"name": name, "deliver_subject": target, "filter_subject": "$KV.tg-state-alpha.k",
					"deliver_policy": "last", "ack_policy": "none",
					"deliver_group": deliverGroup(target),
				},
			})
			subj := "$JS.API.CONSUMER.CREATE.KV_tg-state-alpha." + name + ".$KV.tg-state-alpha.k"
			return e.publish(t, subj, e.worker.NewRespInbox(), req)
		},
	},
	{
		name: "the acknowledgement of its tool record",
		attack: func(t *testing.T, e *forgeryEnv, target string) string {
			return e.publish(t, wire.ToolRecord("alpha"), target, []byte(`{"id":"alpha"}`))
		},
	},
	{
		name: "the acknowledgement of its presence",
		attack: func(t *testing.T, e *forgeryEnv, target string) string {
			return e.publish(t, wire.PresenceRecord("alpha", "i1"), target, []byte(`{}`))
		},
	},
	{
		name: "the acknowledgement of its session's message",
		attack: func(t *testing.T, e *forgeryEnv, target string) string {
			return e.publish(t, wire.DefaultSubjects.SessionOut("alpha", "s1"), target, []byte(`{}`))
		},
	},
	{
		name: "the acknowledgement of its state",
		attack: func(t *testing.T, e *forgeryEnv, target string) string {
			return e.publish(t, "$KV.tg-state-alpha.k", target, []byte(`{}`))
		},
	},
}

// deliverGroup is the queue group a push consumer must deliver in to reach the
// workers of the tool whose calls target is, which subscribe only in their group.
func deliverGroup(target string) string {
	if rest, ok := strings.CutPrefix(target, "tg.call."); ok {
		tool, _, _ := strings.Cut(rest, ".")
		return wire.DefaultSubjects.QueueGroup(tool)
	}
	return ""
}

// TestWorkerCannotMakeJetStreamForge aims every vector at every target with tool
// alpha's worker credentials. Each attempt ends when the server refuses the worker's
// publish or when something lands on the target; nothing may land.
func TestWorkerCannotMakeJetStreamForge(t *testing.T) {
	e := newForgeryEnv(t)
	for _, v := range vectors {
		for _, tg := range e.targets(t) {
			t.Run(v.name+" onto "+tg.name, func(t *testing.T) {
				defer tg.reset(t)
				if v.stage != nil {
					v.stage(t, e, tg.payload)
				}
				sent := v.attack(t, e, tg.subject)
				refused := fmt.Sprintf("Publish to %q", sent)
				deadline := time.After(10 * time.Second)
				for {
					if what, ok := tg.landed(); ok {
						t.Fatalf("forged: %s", what)
					}
					select {
					case err := <-e.errs:
						if strings.Contains(err.Error(), refused) {
							if what, ok := tg.landed(); ok { // what was sent before the refusal
								t.Fatalf("forged: %s", what)
							}
							return
						}
					case <-deadline:
						t.Fatalf("the server neither refused %s nor published on %s", sent, tg.subject)
					case <-time.After(20 * time.Millisecond):
					}
				}
			})
		}
	}
}

// An askVector is an ask a worker may send, with a reply subject of its choosing: the
// edge must not answer it there (nor, for the stream answer, store anything that
// answers there). send sends the forged ask; fence returns once the edge is done with
// it.
type askVector struct {
	name  string
	send  func(t *testing.T, e *forgeryEnv, target string)
	fence func(t *testing.T, e *forgeryEnv)
}

func (e *forgeryEnv) forgedAsk(t *testing.T, m *nats.Msg, target string) {
	t.Helper()
	m.Reply = target
	if err := e.worker.PublishMsg(m); err != nil {
		t.Fatal(err)
	}
}

// fenceAsk sends m as a proper ask and waits for its answer: the edge takes asks one
// at a time, in order, so the forged one sent before is done with.
func (e *forgeryEnv) fenceAsk(t *testing.T, m *nats.Msg) {
	t.Helper()
	if _, err := e.worker.RequestMsg(m, 10*time.Second); err != nil {
		t.Fatalf("the fence ask: %v", err)
	}
}

var askVectors = []askVector{
	{
		name: "an ask for its record",
		send: func(t *testing.T, e *forgeryEnv, target string) {
			m, _ := wire.DefaultSubjects.AskRecordMsg(&wire.Tool{ID: "alpha", Version: "6.6.6", Methods: []wire.Method{}})
			e.forgedAsk(t, m, target)
		},
		fence: func(t *testing.T, e *forgeryEnv) {
			m, _ := wire.DefaultSubjects.AskRecordMsg(&wire.Tool{ID: "alpha", Version: "1.0.0", Methods: []wire.Method{}})
			e.fenceAsk(t, m)
		},
	},
	{
		name: "an ask for its presence",
		send: func(t *testing.T, e *forgeryEnv, target string) {
			m, _ := wire.DefaultSubjects.AskPresenceMsg(&wire.Presence{Tool: "alpha", Instance: "forged"}, 10*time.Second)
			e.forgedAsk(t, m, target)
		},
		fence: func(t *testing.T, e *forgeryEnv) {
			e.fenceAsk(t, wire.DefaultSubjects.AskPresenceDeleteMsg("alpha", "fence"))
		},
	},
	{
		name: "an ask for its state",
		send: func(t *testing.T, e *forgeryEnv, target string) {
			e.forgedAsk(t, wire.DefaultSubjects.AskStateMsg("alpha", wire.StateGet, "k", nil, 0, 0), target)
		},
		fence: func(t *testing.T, e *forgeryEnv) {
			e.fenceAsk(t, wire.DefaultSubjects.AskStateMsg("alpha", wire.StateGet, "k", nil, 0, 0))
		},
	},
	{
		name: "an ask for its session",
		send: func(t *testing.T, e *forgeryEnv, target string) {
			e.forgedAsk(t, &nats.Msg{Subject: wire.DefaultSubjects.AskSession("alpha", "s1"), Data: []byte(`{}`)}, target)
		},
		fence: func(t *testing.T, e *forgeryEnv) {
			e.fenceAsk(t, &nats.Msg{Subject: wire.DefaultSubjects.AskSession("alpha", "s1"), Data: []byte(`{}`)})
		},
	},
	{
		// The edge's call of a stream answer has the reply subject tg.answer.…; the
		// worker may publish there once (allow_responses), and name any reply subject.
		name: "its answer to a call answered on a stream",
		send: func(t *testing.T, e *forgeryEnv, target string) {
			calls, err := e.worker.QueueSubscribeSync("tg.call.alpha.>", "tg.alpha")
			if err != nil {
				t.Fatal(err)
			}
			defer calls.Unsubscribe()
			if err := e.worker.Flush(); err != nil {
				t.Fatal(err)
			}
			call := nats.NewMsg("tg.call.alpha.run")
			call.Reply = wire.DefaultSubjects.StreamAnswer("alpha", "s1", "p1")
			if err := e.edge.PublishMsg(call); err != nil { // as the edge running the call
				t.Fatal(err)
			}
			m, err := calls.NextMsg(10 * time.Second)
			if err != nil {
				t.Fatal(err)
			}
			if err := e.worker.PublishMsg(&nats.Msg{Subject: m.Reply, Reply: target, Data: []byte(`{"answer":1}`)}); err != nil {
				t.Fatal(err)
			}
		},
		fence: func(t *testing.T, e *forgeryEnv) {
			js, _ := jetstream.New(e.admin)
			st, err := js.Stream(e.ctx, "tg-mcp-events")
			if err != nil {
				t.Fatal(err)
			}
			testenv.Eventually(t, 10*time.Second, "the answer logged beside the stream", func() bool {
				m, err := st.GetLastMsgForSubject(e.ctx, wire.DefaultSubjects.StreamAnswerLogged("alpha", "s1", "p1"))
				return err == nil && string(m.Data) == `{"answer":1}`
			})
			if err := st.Purge(e.ctx); err != nil {
				t.Fatal(err)
			}
		},
	},
}

// TestEdgesRelayNoForgery sends every ask a worker of alpha may send, with a reply
// subject aimed at every target: the edge answers none of them there, and stores
// nothing that JetStream acknowledges there.
func TestEdgesRelayNoForgery(t *testing.T) {
	e := newForgeryEnv(t)
	for _, v := range askVectors {
		for _, tg := range e.targets(t) {
			t.Run(v.name+" onto "+tg.name, func(t *testing.T) {
				defer tg.reset(t)
				v.send(t, e, tg.subject)
				v.fence(t, e)
				tg.fence(t)
				if what, ok := tg.landed(); ok {
					t.Fatalf("forged: %s", what)
				}
				e.errs.none(t)
				e.edgeErrs.none(t)
			})
		}
	}
}
