package busauth_test

import (
	"bytes"
	"context"
	"errors"
	"testing"
	"time"

	"github.com/nats-io/nats.go"

	"github.com/toolgate/toolgate/bus"
	"github.com/toolgate/toolgate/bus/wire"
	"github.com/toolgate/toolgate/internal/testenv"
	"github.com/toolgate/toolgate/payloads"
	"github.com/toolgate/toolgate/workers"
)

// TestPayloadsReachOnlyTheirTool: on a secured server, an edge on its own credentials
// makes the payloads bucket and writes, reads and removes payloads there; tool beta's
// worker, on beta's credentials, writes and reads the parts of beta's payloads
// through its asks; and tool alpha's worker, on alpha's credentials, can neither read
// nor write them: not through beta's asks (the server refuses them), not by naming
// beta's payload in its own (the edge names the part under alpha), not through
// JetStream (refused).
func TestPayloadsReachOnlyTheirTool(t *testing.T) {
	sec := testenv.NewSecurity(t)
	e := newWorkerEnvOn(t, sec, testenv.SecureServer(t, sec, true)) // e.worker is alpha's
	ctx := e.ctx
	store, err := payloads.Open(ctx, e.edge, 1)
	if err != nil {
		t.Fatal(err)
	}
	creds, _ := sec.WorkerCreds(t, "beta")
	betaErrs := make(violations, 64)
	beta := testenv.SecureConn(t, e.admin.ConnectedUrl(), sec.Client(creds, true), workerInbox("beta"), betaErrs.handler())
	subj := wire.DefaultSubjects
	ask := func(nc *nats.Conn, tool string, op wire.PayloadOp, id string, part []byte) ([]byte, error) {
		t.Helper()
		answer, err := nc.RequestMsg(subj.AskPayloadMsg(tool, op, id, 0, part), 3*time.Second)
		if err != nil {
			return nil, err
		}
		body, _, err := wire.ReadAskReply(answer)
		return body, err
	}

	t.Run("the edge writes, reads and removes a payload on its own credentials", func(t *testing.T) {
		data := make([]byte, 3<<20+5) // past one message: four parts
		for i := range data {
			data[i] = byte(i)
		}
		p, err := store.Write(ctx, "beta", data[:100], bytesReader(data[100:]), 4<<20)
		if err != nil || p.Parts != 4 || p.Size != int64(len(data)) {
			t.Fatalf("write: %+v %v", p, err)
		}
		got, err := store.Read(ctx, "beta", p)
		if err != nil || string(got) != string(data) {
			t.Fatalf("read: %d bytes, %v", len(got), err)
		}
		store.Delete(ctx, "beta", p)
		if _, err := store.Read(ctx, "beta", p); err == nil {
			t.Fatal("a removed payload reads")
		}
		e.edgeErrs.none(t)
	})

	t.Run("beta's worker writes and reads its own parts", func(t *testing.T) {
		if _, err := ask(beta, "beta", wire.PayloadPut, "B1", []byte("beta's part")); err != nil {
			t.Fatal(err)
		}
		if got, err := ask(beta, "beta", wire.PayloadGet, "B1", nil); err != nil || string(got) != "beta's part" {
			t.Fatalf("%q %v", got, err)
		}
		betaErrs.none(t)
	})

	t.Run("beta's worker, on the SDK, answers past one message through its asks", func(t *testing.T) {
		w := workers.New(beta, workers.Tool{ID: "beta"}, workers.WithLogger(testenv.Logger(t)))
		big := bytes.Repeat([]byte("b"), 3<<20)
		w.Handle(workers.Method{Name: "big", Handler: func(context.Context, *workers.Call) (any, error) {
			return workers.Raw{ContentType: "text/plain", Data: big}, nil
		}})
		run, stop := context.WithCancel(ctx)
		done := make(chan error, 1)
		go func() { done <- w.Run(run) }()
		defer func() { stop(); <-done }()
		<-w.Ready()
		r, err := bus.Do(ctx, e.admin, subj, &wire.Request{Tool: "beta", Method: "big", CallID: "c1", RequestID: "c1"})
		if err != nil {
			t.Fatal(err)
		}
		p, ok, err := wire.PayloadOf(r.Header)
		if !ok || err != nil {
			t.Fatalf("the reply names no payload: %v", err)
		}
		got, err := store.Read(ctx, "beta", p)
		if err != nil || !bytes.Equal(got, big) {
			t.Fatalf("beta's reply: %d bytes, %v", len(got), err)
		}
		betaErrs.none(t)
	})

	t.Run("alpha's worker reaches none of beta's parts", func(t *testing.T) {
		for _, op := range []wire.PayloadOp{wire.PayloadGet, wire.PayloadPut} {
			if _, err := ask(e.worker, "beta", op, "B1", []byte("alpha's")); err == nil {
				t.Fatalf("alpha's %s on beta's asks was answered", op)
			}
			e.errs.expect(t, `Publish to "tg.obj.beta.`+string(op)+`"`)
		}
		// Its own asks naming beta's payload: the edge names the part under alpha.
		if _, err := ask(e.worker, "alpha", wire.PayloadGet, "B1", nil); !errors.Is(err, wire.ErrAskNotFound) {
			t.Fatalf("alpha reading B1 through its own asks: %v, want not_found", err)
		}
		if _, err := ask(e.worker, "alpha", wire.PayloadPut, "B1", []byte("alpha's")); err != nil {
			t.Fatal(err)
		}
		if got, err := store.Read(ctx, "beta", wire.Payload{ID: "B1", Size: int64(len("beta's part")), Parts: 1}); err != nil || string(got) != "beta's part" {
			t.Fatalf("beta's part after alpha's put: %q %v", got, err)
		}
		bucket := "OBJ_" + wire.PayloadBucket
		e.refusesPublishing(t, []struct{ name, subject string }{
			{"a part into the bucket", "$O." + wire.PayloadBucket + ".C.x"},
			{"an object's record into the bucket", "$O." + wire.PayloadBucket + ".M.x"},
			{"reading an object's record", "$JS.API.DIRECT.GET." + bucket + ".$O." + wire.PayloadBucket + ".M.x"},
			{"reading the bucket's messages", "$JS.API.STREAM.MSG.GET." + bucket},
			{"opening the bucket", "$JS.API.STREAM.INFO." + bucket},
			{"a consumer of the bucket", "$JS.API.CONSUMER.CREATE." + bucket + ".c1.$O." + wire.PayloadBucket + ".C.>"},
			{"purging the bucket", "$JS.API.STREAM.PURGE." + bucket},
		})
	})
}

// bytesReader reads b.
func bytesReader(b []byte) *bytes.Reader { return bytes.NewReader(b) }
