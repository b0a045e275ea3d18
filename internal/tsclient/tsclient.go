// Package tsclient runs a real MCP client of the TypeScript SDK (npm
// @modelcontextprotocol/sdk, installed once into the repository's .cache by
// testenv.NPMPackage) for tests: client.mjs beside this file is the client, driven one
// command a line.
package tsclient

import (
	"bufio"
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"os/exec"
	"path/filepath"
	"runtime"
	"sync"
	"testing"
	"time"

	"github.com/toolgate/toolgate/internal/testenv"
)

// SDKVersion is the TypeScript SDK the tests run.
const SDKVersion = "1.32.2"

// Event is something the server sent the client outside an answer: "progress" (as
// the SDK's onprogress got it), "wire-progress" (as the client's transport received
// it), "log", "changed", "sampling" or "elicitation" (the client answers those two
// itself: a sampled "hi from the client", an accepted {"ok": true}).
type Event struct {
	Event    string  `json:"event"`
	Progress float64 `json:"progress"`
	Level    string  `json:"level"`
	Message  string  `json:"message"`
}

// Client is one running client, connected.
type Client struct {
	// Protocol is the revision initialize settled on; Session the session's id over
	// HTTP.
	Protocol, Session string
	Events            chan Event

	t      testing.TB
	cmd    *exec.Cmd
	stdin  io.WriteCloser
	stderr *testenv.Buffer

	mu      sync.Mutex
	next    int
	waiting map[int]chan answer
	done    chan struct{}

	authorize func(string) string // the user's sign-in, in oauth mode
}

type answer struct {
	Result json.RawMessage
	Error  string
}

// HTTP connects a client to url over Streamable HTTP; version pins the revision it
// asks for, "" takes the SDK's default.
func HTTP(t testing.TB, url, version string) *Client {
	return start(t, "http", url, version)
}

// Stdio starts command as a stdio MCP server (`toolgate connect LINK`, say) and
// connects a client to it.
func Stdio(t testing.TB, version string, command ...string) *Client {
	return start(t, append([]string{"stdio", version}, command...)...)
}

// OAuth connects a client to url over Streamable HTTP with the SDK's own OAuth flow:
// it discovers the server's authorization server, registers (by its client ID
// metadata document at metadataURL, or, with "", dynamically), and sends the user to
// sign in, which authorize does (a browser, say) and answers with the code that
// reached redirect.
func OAuth(t testing.TB, url, metadataURL, redirect string, authorize func(url string) (code string)) *Client {
	return startWith(t, authorize, "oauth", url, metadataURL, redirect)
}

// OAuthRegistered is OAuth with a client registered at the authorization server
// beforehand (its id and secret), as at an identity provider without registration.
func OAuthRegistered(t testing.TB, url, clientID, clientSecret, redirect string, authorize func(url string) (code string)) *Client {
	return startWith(t, authorize, "oauth", url, "", redirect, clientID, clientSecret)
}

func start(t testing.TB, args ...string) *Client {
	t.Helper()
	return startWith(t, nil, args...)
}

func startWith(t testing.TB, authorize func(string) string, args ...string) *Client {
	t.Helper()
	sdk := testenv.NPMPackage(t, "@modelcontextprotocol/sdk", SDKVersion)
	_, here, _, _ := runtime.Caller(0)
	script := filepath.Join(filepath.Dir(here), "client.mjs")
	cmd := exec.Command("node", append([]string{script, sdk}, args...)...)
	stdin, err := cmd.StdinPipe()
	if err != nil {
		t.Fatal(err)
	}
	stdout, err := cmd.StdoutPipe()
	if err != nil {
		t.Fatal(err)
	}
	c := &Client{t: t, cmd: cmd, stdin: stdin, stderr: &testenv.Buffer{}, Events: make(chan Event, 256),
		waiting: map[int]chan answer{}, done: make(chan struct{}), authorize: authorize}
	cmd.Stderr = c.stderr
	if err := cmd.Start(); err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() {
		stdin.Close()
		select {
		case <-c.done:
		case <-time.After(5 * time.Second):
			_ = cmd.Process.Kill()
			<-c.done
		}
	})
	ready := make(chan map[string]string, 1)
	go c.read(stdout, ready)
	select {
	case r := <-ready:
		if e := r["error"]; e != "" {
			t.Fatalf("the TypeScript client did not connect: %s\nstderr:\n%s", e, c.Stderr())
		}
		c.Protocol, c.Session = r["protocol"], r["session"]
	case <-c.done:
		t.Fatalf("the TypeScript client exited before it connected\nstderr:\n%s", c.Stderr())
	case <-time.After(60 * time.Second):
		t.Fatalf("the TypeScript client did not connect within 60s\nstderr:\n%s", c.Stderr())
	}
	return c
}

func (c *Client) read(stdout io.Reader, ready chan<- map[string]string) {
	defer close(c.done)
	defer func() { _ = c.cmd.Wait() }()
	sc := bufio.NewScanner(stdout)
	sc.Buffer(make([]byte, 1<<20), 256<<20) // a line holds a whole result: tests send up to 64 MiB
	for sc.Scan() {
		var m struct {
			ID       *int            `json:"id"`
			Result   json.RawMessage `json:"result"`
			Error    string          `json:"error"`
			Event    string          `json:"event"`
			Protocol string          `json:"protocol"`
			Session  string          `json:"session"`
		}
		if json.Unmarshal(sc.Bytes(), &m) != nil {
			continue
		}
		switch {
		case m.ID != nil:
			c.mu.Lock()
			ch := c.waiting[*m.ID]
			delete(c.waiting, *m.ID)
			c.mu.Unlock()
			if ch != nil {
				ch <- answer{m.Result, m.Error}
			}
		case m.Event == "authorize" && c.authorize != nil:
			var e Event
			_ = json.Unmarshal(sc.Bytes(), &e)
			go func() { // the browser's work: the reading goes on meanwhile
				b, _ := json.Marshal(map[string]string{"op": "finish", "code": c.authorize(e.Message)})
				_, _ = c.stdin.Write(append(b, '\n'))
			}()
		case m.Event == "ready" || m.Event == "failed":
			ready <- map[string]string{"protocol": m.Protocol, "session": m.Session, "error": m.Error}
		default:
			var e Event
			_ = json.Unmarshal(sc.Bytes(), &e)
			select {
			case c.Events <- e:
			default:
			}
		}
	}
}

// Do sends one command and returns its answer's result; an error answer is an error.
func (c *Client) Do(ctx context.Context, cmd map[string]any) (json.RawMessage, error) {
	c.mu.Lock()
	c.next++
	id := c.next
	ch := make(chan answer, 1)
	c.waiting[id] = ch
	c.mu.Unlock()
	cmd["id"] = id
	b, _ := json.Marshal(cmd)
	if _, err := c.stdin.Write(append(b, '\n')); err != nil {
		return nil, fmt.Errorf("tsclient: %w", err)
	}
	select {
	case a := <-ch:
		if a.Error != "" {
			return nil, errors.New(a.Error)
		}
		return a.Result, nil
	case <-c.done:
		return nil, fmt.Errorf("tsclient: the client exited\nstderr:\n%s", c.Stderr())
	case <-ctx.Done():
		return nil, ctx.Err()
	}
}

// ID is the id the next command gets, for commands that name another ("abort").
func (c *Client) ID() int {
	c.mu.Lock()
	defer c.mu.Unlock()
	return c.next + 1
}

// Stderr is what the client (and a stdio server it started) wrote on stderr.
func (c *Client) Stderr() string { return c.stderr.String() }

// Exited is closed once the client's process ended.
func (c *Client) Exited() <-chan struct{} { return c.done }

// WaitEvent waits for an event of kind and returns it.
func (c *Client) WaitEvent(kind string, within time.Duration) (Event, bool) {
	deadline := time.After(within)
	for {
		select {
		case e := <-c.Events:
			if e.Event == kind {
				return e, true
			}
		case <-deadline:
			return Event{}, false
		}
	}
}
