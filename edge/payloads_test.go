package edge_test

import (
	"bytes"
	"context"
	"crypto/rand"
	"crypto/sha256"
	"encoding/base64"
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"net/http"
	"strings"
	"testing"

	"github.com/nats-io/nats.go/jetstream"

	"github.com/toolgate/toolgate/edge"
	"github.com/toolgate/toolgate/internal/testenv"
	"github.com/toolgate/toolgate/registry"
	"github.com/toolgate/toolgate/workers"
	"github.com/toolgate/toolgate/workers/demo"
)

// jsonBody is a JSON object of exactly n bytes whose one string is random.
func jsonBody(t testing.TB, n int) []byte {
	t.Helper()
	const frame = len(`{"blob":""}`)
	raw := make([]byte, (n-frame)*3/4+3)
	if _, err := rand.Read(raw); err != nil {
		t.Fatal(err)
	}
	s := base64.StdEncoding.EncodeToString(raw)[:n-frame]
	return []byte(`{"blob":"` + s + `"}`)
}

// post sends body to path with key, streaming it (chunked when chunked is set: no
// declared length), and returns the status, the answer's sha256, its length and, for
// a short answer, its bytes.
func (e *env) post(t testing.TB, key, path string, body []byte, chunked bool) (status int, sum [32]byte, n int64, short []byte) {
	t.Helper()
	var rd io.Reader = bytes.NewReader(body)
	if chunked {
		rd = io.MultiReader(rd) // hides the length from net/http
	}
	req, err := http.NewRequest(http.MethodPost, e.url+path, rd)
	if err != nil {
		t.Fatal(err)
	}
	req.Header.Set("Content-Type", "application/json")
	req.Header.Set("SERVICE_API_KEY", key)
	resp, err := e.client.Do(req)
	if err != nil {
		t.Fatal(err)
	}
	defer resp.Body.Close()
	h := sha256.New()
	var head bytes.Buffer
	n, err = io.Copy(io.MultiWriter(h, &limitedWriter{&head, 4096}), resp.Body)
	if err != nil {
		t.Fatalf("%s: reading the answer: %v", path, err)
	}
	copy(sum[:], h.Sum(nil))
	return resp.StatusCode, sum, n, head.Bytes()
}

// limitedWriter keeps the first n bytes written to it.
type limitedWriter struct {
	b *bytes.Buffer
	n int
}

func (w *limitedWriter) Write(p []byte) (int, error) {
	if room := w.n - w.b.Len(); room > 0 {
		w.b.Write(p[:min(room, len(p))])
	}
	return len(p), nil
}

// runEcho runs the demo's echo worker (the SDK, as a tool team runs it) on a
// connection of its own.
func (e *env) runEcho(t *testing.T) {
	t.Helper()
	w := demo.Echo(testenv.Conn(t, e.nc.ConnectedUrl()), workers.WithLogger(testenv.Logger(t)))
	e.runWorker(t, w, "echo", make(chan struct{}))
}

// TestLargePayloadsRoundTrip: echo, run by the SDK, given 1 and 10 MiB over /tool-call
// and 1 MiB over the direct API, answers them intact (sha256 compared): past one NATS
// message (1 MiB) both ways, through the payloads bucket. (50 MiB, and every door, are
// payloads' TestLargePayloadsThroughEveryDoor, with the edge a process of its own.)
func TestLargePayloadsRoundTrip(t *testing.T) {
	e := newEnv(t)
	e.runEcho(t)
	key := e.account("acme", registry.Limits{})
	e.connect("acme", "echo")
	for _, mib := range []int{1, 10} {
		body := jsonBody(t, mib<<20)
		want := sha256.Sum256(body)
		paths := []string{"/tool-call/echo/echo", "/tools/echo/echo"}
		if mib == 10 {
			paths = paths[:1]
		}
		for _, path := range paths {
			status, sum, n, short := e.post(t, key, path, body, mib == 10)
			if status != http.StatusOK || sum != want || n != int64(len(body)) {
				t.Fatalf("%s, %d MiB: %d, %d bytes, sha256 equal %v: %.200s", path, mib, status, n, sum == want, short)
			}
		}
	}
	e.noObjectsLeft(t)
}

// noObjectsLeft waits until the payloads bucket holds no object: an edge removes a
// call's payloads once it has answered.
func (e *env) noObjectsLeft(t *testing.T) {
	t.Helper()
	testenv.WaitFor(t, "no object left in the payloads bucket", func() bool {
		obj, err := e.gw.Payloads().Bucket().List(testenv.Context(t))
		return len(obj) == 0 && (err == nil || errors.Is(err, jetstream.ErrNoObjectsFound))
	})
}

// TestPayloadLimit: a body of exactly the deployment's limit passes and one byte more
// is payload_too_large (413), declared or chunked; an account's own lower limit holds
// for its requests and its replies.
func TestPayloadLimit(t *testing.T) {
	const limit = 2<<20 + 7
	e := newEnv(t, withPayloadLimit(limit))
	e.runEcho(t)
	big := workers.New(testenv.Conn(t, e.nc.ConnectedUrl()), workers.Tool{ID: "big"}, workers.WithLogger(testenv.Logger(t)))
	big.Handle(workers.Func("make", "n bytes of text", func(_ context.Context, _ *workers.Call, in struct{ N int }) (workers.Raw, error) {
		return workers.Raw{ContentType: "text/plain", Data: bytes.Repeat([]byte("x"), in.N)}, nil
	}))
	e.runWorker(t, big, "big", make(chan struct{}))
	key := e.account("acme", registry.Limits{})
	e.connect("acme", "echo")
	e.connect("acme", "big")

	for _, chunked := range []bool{false, true} {
		body := jsonBody(t, limit)
		if status, sum, _, short := e.post(t, key, "/tool-call/echo/echo", body, chunked); status != http.StatusOK || sum != sha256.Sum256(body) {
			t.Fatalf("chunked %v: the limit's %d bytes: %d %.200s", chunked, limit, status, short)
		}
		status, _, _, short := e.post(t, key, "/tool-call/echo/echo", jsonBody(t, limit+1), chunked)
		if status != http.StatusRequestEntityTooLarge || !strings.Contains(string(short), `"payload_too_large"`) {
			t.Fatalf("chunked %v: one byte past the limit: %d %s", chunked, status, short)
		}
	}

	const own = 1<<20 + 500<<10 // the account's own, lower limit
	if r := e.admin(http.MethodPatch, "/accounts/acme", fmt.Sprintf(`{"limits":{"payload_bytes":%d}}`, own)); r.status != http.StatusOK {
		t.Fatalf("PATCH: %d %s", r.status, r.body)
	}
	testenv.WaitFor(t, "the edge sees the account's limit", func() bool {
		return e.gw.PayloadLimit("acme") == own
	})
	if status, _, _, short := e.post(t, key, "/tool-call/echo/echo", jsonBody(t, own), false); status != http.StatusOK {
		t.Fatalf("the account's limit: %d %.200s", status, short)
	}
	if status, _, _, short := e.post(t, key, "/tool-call/echo/echo", jsonBody(t, own+1), true); status != http.StatusRequestEntityTooLarge {
		t.Fatalf("one byte past the account's limit: %d %.200s", status, short)
	}
	make := func(n int) (int, int64, []byte) {
		status, _, got, short := e.post(t, key, "/tool-call/big/make", fmt.Appendf(nil, `{"N":%d}`, n), false)
		return status, got, short
	}
	if status, n, short := make(own); status != http.StatusOK || n != own {
		t.Fatalf("a reply of the account's limit: %d, %d bytes %.200s", status, n, short)
	}
	status, _, short := make(own + 1)
	var env struct{ Error struct{ Code string } }
	_ = json.Unmarshal(short, &env)
	if status != http.StatusRequestEntityTooLarge || env.Error.Code != edge.CodePayloadTooLarge {
		t.Fatalf("a reply one byte past the account's limit: %d %s", status, short)
	}

	// A limit below one message holds for what never leaves it.
	if r := e.admin(http.MethodPatch, "/accounts/acme", `{"limits":{"payload_bytes":1000}}`); r.status != http.StatusOK {
		t.Fatalf("PATCH: %d %s", r.status, r.body)
	}
	testenv.WaitFor(t, "the edge sees the account's limit", func() bool { return e.gw.PayloadLimit("acme") == 1000 })
	if status, _, _, short := e.post(t, key, "/tool-call/echo/echo", jsonBody(t, 1000), false); status != http.StatusOK {
		t.Fatalf("a body of the account's 1000 bytes: %d %.200s", status, short)
	}
	if status, _, _, short := e.post(t, key, "/tool-call/echo/echo", jsonBody(t, 1001), false); status != http.StatusRequestEntityTooLarge {
		t.Fatalf("a body of 1001 bytes: %d %.200s", status, short)
	}
	if status, _, short := make(1001); status != http.StatusRequestEntityTooLarge {
		t.Fatalf("a reply of 1001 bytes: %d %.200s", status, short)
	}
	e.noObjectsLeft(t)
}

// TestLargeReplyLeftMidway: when a caller leaves while a reply streams to it from the
// payloads bucket, the call's payloads (its request's and its reply's) are removed
// all the same.
func TestLargeReplyLeftMidway(t *testing.T) {
	e := newEnv(t)
	e.runEcho(t)
	key := e.account("acme", registry.Limits{})
	e.connect("acme", "echo")
	req, err := http.NewRequest(http.MethodPost, e.url+"/tool-call/echo/echo", bytes.NewReader(jsonBody(t, 3<<20)))
	if err != nil {
		t.Fatal(err)
	}
	req.Header.Set("Content-Type", "application/json")
	req.Header.Set("SERVICE_API_KEY", key)
	resp, err := e.client.Do(req)
	if err != nil {
		t.Fatal(err)
	}
	if resp.StatusCode != http.StatusOK || resp.ContentLength != 3<<20 {
		t.Fatalf("%d, %d bytes declared", resp.StatusCode, resp.ContentLength)
	}
	if _, err := io.ReadFull(resp.Body, make([]byte, 64<<10)); err != nil {
		t.Fatal(err)
	}
	resp.Body.Close() // before the rest arrived
	e.noObjectsLeft(t)
}

// TestLargeBodyNotAnObject: a body past one message is checked as it streams into the
// payloads bucket, as a small one is whole: one that is not a JSON object in UTF-8 is
// invalid_json (400), found at its end or midway, and leaves nothing stored.
func TestLargeBodyNotAnObject(t *testing.T) {
	e := newEnv(t)
	e.runEcho(t)
	key := e.account("acme", registry.Limits{})
	e.connect("acme", "echo")
	good := jsonBody(t, 2<<20)
	badUTF8 := bytes.Clone(good)
	badUTF8[1<<20] = 0xff
	for name, body := range map[string][]byte{
		"cut short":             good[:len(good)-2],
		"garbage after a value": append(bytes.Clone(good[:1<<20]), `"} and more`...),
		"invalid UTF-8":         badUTF8,
		"an array":              append(append([]byte(`[`), good...), ']'),
	} {
		status, _, _, short := e.post(t, key, "/tool-call/echo/echo", body, false)
		if status != http.StatusBadRequest || !strings.Contains(string(short), `"invalid_json"`) {
			t.Errorf("%s: %d %.200s", name, status, short)
		}
	}
	e.noObjectsLeft(t)
}
