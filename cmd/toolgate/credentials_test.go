package main

import (
	"bytes"
	"context"
	"crypto/sha256"
	"encoding/hex"
	"encoding/json"
	"net/http"
	"os"
	"path/filepath"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/nats-io/nats.go"
	"github.com/nats-io/nats.go/jetstream"

	"github.com/toolgate/toolgate/bus/wire"
	"github.com/toolgate/toolgate/busauth"
	"github.com/toolgate/toolgate/credentials"
	"github.com/toolgate/toolgate/edge"
	"github.com/toolgate/toolgate/internal/testenv"
	"github.com/toolgate/toolgate/workers"
)

// secureCredentialsStack is an edge keeping credentials under a KEK file, on a bus
// that admits only the deployment's users, with an admin connection that hears every
// message of the account.
type secureCredentialsStack struct {
	sec     *testenv.Security
	natsURL string
	url     string // the edge's
	admin   *nats.Conn
	mu      sync.Mutex
	heard   []*nats.Msg // every message on the bus, as the admin connection heard it
	log     *testenv.Buffer
}

func newSecureCredentialsStack(t *testing.T) *secureCredentialsStack {
	t.Helper()
	s := &secureCredentialsStack{sec: testenv.NewSecurity(t)}
	srv := testenv.SecureServer(t, s.sec, false)
	s.natsURL = srv.ClientURL()
	kek := filepath.Join(t.TempDir(), "credentials-key")
	if err := os.WriteFile(kek, []byte(credentials.NewKeyLine()+"\n"), 0o600); err != nil {
		t.Fatal(err)
	}
	s.admin = testenv.SecureConn(t, s.natsURL, s.sec.Client(s.sec.Deployment.CredsFile(busauth.RoleAdmin), false))
	if _, err := s.admin.Subscribe(">", func(m *nats.Msg) {
		s.mu.Lock()
		s.heard = append(s.heard, m)
		s.mu.Unlock()
	}); err != nil {
		t.Fatal(err)
	}
	sec := newDeploymentSecrets(t)
	s.log = launchEdge(t, "--nats", s.natsURL, "--link-secret-file", sec.linkSecretFile,
		"--nats-creds", s.sec.Deployment.CredsFile(busauth.RoleEdge), "--credentials-key-file", kek)
	s.url = edgeReady(t, s.log)
	return s
}

// workerConn connects as the workers of tool, with credentials issued for it, and
// returns the connection and the credentials file.
func (s *secureCredentialsStack) workerConn(t *testing.T, tool string) (*nats.Conn, string) {
	t.Helper()
	creds, _ := s.sec.WorkerCreds(t, tool)
	return testenv.SecureConn(t, s.natsURL, s.sec.Client(creds, false), workers.Inbox(tool)), creds
}

// setCredentials sets a connection's values with `toolgate tools credentials set`,
// from a file.
func (s *secureCredentialsStack) setCredentials(t *testing.T, account, tool, values string) string {
	t.Helper()
	f := filepath.Join(t.TempDir(), "values.json")
	if err := os.WriteFile(f, []byte(values), 0o600); err != nil {
		t.Fatal(err)
	}
	return admin(t, s.url, "tools", "credentials", "set", account, tool, "--from-file", f)
}

// assertNowhere fails the test if value is in any message the admin connection
// heard, in any message of any stream on the bus (the credentials bucket, the audit
// trail, the MCP event log, the calls records among them), in the edge's log, or on
// the metrics pages at urls (the edge's always).
func (s *secureCredentialsStack) assertNowhere(t *testing.T, value string, urls ...string) {
	t.Helper()
	for _, u := range append(urls, s.url+"/metrics") {
		if _, body := call(t, http.MethodGet, u, "", ""); strings.Contains(body, value) {
			t.Errorf("%s holds the value", u)
		}
	}
	if err := s.admin.Flush(); err != nil {
		t.Fatal(err)
	}
	s.mu.Lock()
	defer s.mu.Unlock()
	for _, m := range s.heard {
		if bytes.Contains(m.Data, []byte(value)) {
			t.Errorf("a message on %s holds the value in plaintext", m.Subject)
		}
		for k, vs := range m.Header {
			if strings.Contains(strings.Join(vs, "\n"), value) {
				t.Errorf("header %s of a message on %s holds the value in plaintext", k, m.Subject)
			}
		}
	}
	if strings.Contains(s.log.String(), value) {
		t.Error("the edge's log holds the value")
	}
	if read := testenv.SearchStreams(t, s.admin, value); read["KV_"+credentials.Bucket] == 0 {
		t.Fatalf("the credentials bucket holds no message to search (read %v)", read)
	}
}

func tokenHash(token string) string {
	sum := sha256.Sum256([]byte(token))
	return hex.EncodeToString(sum[:8])
}

// TestCredentialsReachOnlyTheirTool: a worker on its tool's credentials file reads
// the calling account's values (Call.Credentials); a worker of another tool, on its
// own file, can neither receive the call, nor open what it carries, nor read the
// credentials bucket; no message on the bus and no record of the bucket holds a value.
func TestCredentialsReachOnlyTheirTool(t *testing.T) {
	const canary = "canary-41d2-mail-token"
	s := newSecureCredentialsStack(t)
	nc, creds := s.workerConn(t, "mail")
	sealKey, err := workers.SealKeyFromCreds(creds, "mail")
	if err != nil {
		t.Fatal(err)
	}
	w := workers.New(nc, workers.Tool{ID: "mail", Connection: []workers.Field{{Name: "token", Secret: true, Description: "the mail API's token"}}},
		workers.WithSealKey(sealKey), workers.WithLogger(testenv.Logger(t)))
	w.Handle(workers.Func("whoami", "Who the token is", func(_ context.Context, c *workers.Call, _ struct{}) (string, error) {
		values, err := c.Credentials()
		if err != nil {
			return "", err
		}
		return tokenHash(values["token"]), nil
	}))
	ctx, cancel := context.WithCancel(context.Background())
	done := make(chan error, 1)
	go func() { done <- w.Run(ctx) }()
	t.Cleanup(func() { cancel(); <-done })

	admin(t, s.url, "accounts", "create", "acme")
	admin(t, s.url, "tools", "connect", "acme", "mail")
	var key edge.NewKey
	if err := json.Unmarshal([]byte(admin(t, s.url, "keys", "create", "acme")), &key); err != nil {
		t.Fatal(err)
	}
	testenv.WaitFor(t, "mail online", func() bool {
		status, body := call(t, http.MethodGet, s.url+"/get-tools", key.Secret, "")
		return status == http.StatusOK && strings.Contains(body, `"status":"online"`)
	})
	if status, body := call(t, http.MethodPost, s.url+"/tool-call/mail/whoami", key.Secret, `{}`); status != http.StatusConflict || !strings.Contains(body, `"missing":["token"]`) {
		t.Fatalf("a call before the token is set: %d %s", status, body)
	}
	if got := s.setCredentials(t, "acme", "mail", `{"token":"`+canary+`"}`); strings.Contains(got, canary) || !strings.Contains(got, `"fingerprint"`) {
		t.Fatalf("tools credentials set:\n%s", got)
	}

	// Another tool's worker, on its own credentials.
	spy, spyCreds := s.workerConn(t, "spy")
	var spied sync.WaitGroup
	spied.Add(1)
	refused := make(chan error, 1)
	spy.SetErrorHandler(func(_ *nats.Conn, _ *nats.Subscription, err error) {
		select {
		case refused <- err:
		default:
		}
	})
	if _, err := spy.Subscribe(wire.DefaultSubjects.Call("mail", "whoami"), func(*nats.Msg) { t.Error("the spy received a call of mail") }); err != nil {
		t.Fatal(err)
	}
	select {
	case err := <-refused:
		if !strings.Contains(strings.ToLower(err.Error()), "permissions violation") {
			t.Fatalf("the spy's subscription: %v", err)
		}
	case <-time.After(testenv.Patience):
		t.Fatal("the bus let the spy subscribe to mail's calls")
	}
	spyJS, _ := jetstream.New(spy)
	short, stop := context.WithTimeout(ctx, 2*time.Second)
	if _, err := spyJS.KeyValue(short, credentials.Bucket); err == nil {
		t.Fatal("the spy opened the credentials bucket")
	}
	stop()

	status, body := call(t, http.MethodPost, s.url+"/tool-call/mail/whoami", key.Secret, `{}`)
	if status != http.StatusOK || body != `"`+tokenHash(canary)+`"` {
		t.Fatalf("whoami: %d %s, want the hash of the account's token", status, body)
	}
	spyKey, err := workers.SealKeyFromCreds(spyCreds, "spy")
	if err != nil {
		t.Fatal(err)
	}
	if _, err := workers.SealKeyFromCreds(spyCreds, "mail"); err == nil {
		t.Fatal("the spy's credentials file carries mail's seal key")
	}
	sealed := 0
	s.mu.Lock()
	for _, m := range s.heard {
		if h := m.Header.Get(wire.HeaderCredentials); h != "" {
			sealed++
			if _, err := wire.OpenCredentials(spyKey, h, "acme", "mail"); err == nil {
				t.Error("the spy's seal key opened mail's credentials")
			}
		}
	}
	s.mu.Unlock()
	if sealed == 0 {
		t.Fatal("no call on the bus carried sealed credentials")
	}
	s.assertNowhere(t, canary)
}

// TestCredentialsKeyRotation rotates the key-encryption key as an operator would,
// without downtime: a new key first in the file (credentials add-key), an edge on the
// new file serving records the old key wrapped, rotate-key wrapping them again, and
// an edge holding the new key alone serving them then; an edge still on the old key
// alone can no longer open them.
func TestCredentialsKeyRotation(t *testing.T) {
	srv := testenv.Server(t)
	sec := newDeploymentSecrets(t)
	dir := t.TempDir()
	oldFile, bothFile, newFile := filepath.Join(dir, "old"), filepath.Join(dir, "both"), filepath.Join(dir, "new")
	if out, err := run(t, context.Background(), "credentials", "add-key", oldFile); err != nil || !strings.Contains(out, "is first in") {
		t.Fatalf("add-key: %v\n%s", err, out)
	}
	oldKeys := readFile(t, dir, "old")
	if err := os.WriteFile(bothFile, []byte(oldKeys), 0o600); err != nil {
		t.Fatal(err)
	}
	if out, err := run(t, context.Background(), "credentials", "add-key", bothFile); err != nil {
		t.Fatalf("add-key: %v\n%s", err, out)
	}
	newKey, _, _ := strings.Cut(readFile(t, dir, "both"), "\n")
	if err := os.WriteFile(newFile, []byte(newKey+"\n"), 0o600); err != nil {
		t.Fatal(err)
	}
	oldEdge := startDeploymentEdge(t, srv.ClientURL(), sec, "--credentials-key-file", oldFile)

	nc := testenv.Conn(t, srv.ClientURL())
	w := workers.New(nc, workers.Tool{ID: "mail", Connection: []workers.Field{{Name: "token", Secret: true}}}, workers.WithLogger(testenv.Logger(t)))
	w.Handle(workers.Func("whoami", "Who the token is", func(_ context.Context, c *workers.Call, _ struct{}) (string, error) {
		values, err := c.Credentials()
		return tokenHash(values["token"]), err
	}))
	ctx, cancel := context.WithCancel(context.Background())
	done := make(chan error, 1)
	go func() { done <- w.Run(ctx) }()
	t.Cleanup(func() { cancel(); <-done })

	admin(t, oldEdge, "accounts", "create", "acme")
	admin(t, oldEdge, "tools", "connect", "acme", "mail")
	var key edge.NewKey
	if err := json.Unmarshal([]byte(admin(t, oldEdge, "keys", "create", "acme")), &key); err != nil {
		t.Fatal(err)
	}
	set := newRootCmd()
	var out bytes.Buffer
	set.SetOut(&out)
	set.SetIn(strings.NewReader(`{"token":"t0k3n"}`))
	set.SetArgs([]string{"tools", "credentials", "set", "acme", "mail", "--from-file", "-", "--url", oldEdge})
	if err := set.Execute(); err != nil || !strings.Contains(out.String(), `"set": true`) {
		t.Fatalf("credentials set from standard input: %v\n%s", err, out.String())
	}
	whoami := func(edgeURL string) (int, string) {
		return call(t, http.MethodPost, edgeURL+"/tool-call/mail/whoami", key.Secret, `{}`)
	}
	testenv.WaitFor(t, "mail answers on the old key's edge", func() bool {
		status, body := whoami(oldEdge)
		return status == http.StatusOK && body == `"`+tokenHash("t0k3n")+`"`
	})

	bothEdge := startDeploymentEdge(t, srv.ClientURL(), sec, "--credentials-key-file", bothFile)
	if status, body := whoami(bothEdge); status != http.StatusOK || body != `"`+tokenHash("t0k3n")+`"` {
		t.Fatalf("an edge holding both keys, before the rotation: %d %s", status, body)
	}
	// The token signing key the first edge made is sealed under the old key too.
	if got := admin(t, bothEdge, "credentials", "rotate-key"); !strings.Contains(got, `"rewrapped": 1`) || !strings.Contains(got, `"records": 1`) ||
		!strings.Contains(got, `"signing_keys_rewrapped": 1`) || !strings.Contains(got, `"signing_keys": 1`) {
		t.Fatalf("rotate-key:\n%s", got)
	}
	newEdge := startDeploymentEdge(t, srv.ClientURL(), sec, "--credentials-key-file", newFile)
	for _, e := range []string{bothEdge, newEdge} {
		if status, body := whoami(e); status != http.StatusOK || body != `"`+tokenHash("t0k3n")+`"` {
			t.Fatalf("after the rotation: %d %s", status, body)
		}
	}
	testenv.WaitFor(t, "an edge holding the old key alone no longer opens the record", func() bool {
		status, body := whoami(oldEdge)
		if strings.Contains(body, "t0k3n") {
			t.Fatalf("an answer holds the token: %s", body)
		}
		return status == http.StatusInternalServerError
	})

	bad := filepath.Join(dir, "open")
	if err := os.WriteFile(bad, []byte(newKey+"\n"), 0o644); err != nil {
		t.Fatal(err)
	}
	if out, err := run(t, context.Background(), "edge", "--nats", srv.ClientURL(), "--listen", "127.0.0.1:0", "--link-secret-file", sec.linkSecretFile,
		"--credentials-key-file", bad); err == nil || !strings.Contains(err.Error(), "chmod 600") {
		t.Fatalf("an edge given a key file others may read: %v\n%s", err, out)
	}
}
