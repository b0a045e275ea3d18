package compose

import (
	"bytes"
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"net"
	"net/http"
	"sort"
	"strings"
	"sync"
	"time"
)

// hungAfter is how long a call may go unanswered before it counts as hung.
const hungAfter = 10 * time.Second

// tally counts what became of the calls sent one way (through one edge, or over
// the MCP session): answered, failed by status or kind of error, hung; and when the
// failures happened.
type tally struct {
	mu       sync.Mutex
	sent     int
	answered int
	retried  int            // connection errors a retrying client sent again
	failed   map[string]int // by status, or "conn" for a connection error
	hung     int
	// first and last are when the first and the last of the calls that failed or
	// hung were sent: calls sent in between failed, the window a user sees.
	first, last time.Time
	// fails lists when each call that failed was sent, and how it failed, in order.
	fails []failure
	// origin is the moment failures are told from (the fault's); zero prints none.
	origin time.Time
	// slowestMade and slowestRevoked are, for keys, the longest an edge took to
	// accept a new key, and to refuse a revoked one after its DELETE was answered;
	// slowestChange the longest a key's POST or DELETE took to be answered.
	slowestMade, slowestRevoked, slowestChange time.Duration
}

type failure struct {
	at   time.Time
	kind string
}

// fail counts a call sent at began that failed in the way kind says ("hung" for no
// answer within hungAfter).
func (c *tally) fail(kind string, began time.Time) {
	c.mu.Lock()
	defer c.mu.Unlock()
	if kind == "hung" {
		c.hung++
	} else {
		if c.failed == nil {
			c.failed = map[string]int{}
		}
		c.failed[kind]++
	}
	if c.first.IsZero() || began.Before(c.first) {
		c.first = began
	}
	if began.After(c.last) {
		c.last = began
	}
	c.fails = append(c.fails, failure{began, kind})
}

func (c *tally) add(f func(*tally)) {
	c.mu.Lock()
	defer c.mu.Unlock()
	f(c)
}

func (c *tally) failures() int {
	c.mu.Lock()
	defer c.mu.Unlock()
	n := c.hung
	for _, v := range c.failed {
		n += v
	}
	return n
}

// window is how long calls kept failing: from the sending of the first call that
// failed or hung to that of the last; 0 when none did.
func (c *tally) window() time.Duration {
	c.mu.Lock()
	defer c.mu.Unlock()
	if c.first.IsZero() {
		return 0
	}
	return c.last.Sub(c.first)
}

func (c *tally) String() string {
	c.mu.Lock()
	defer c.mu.Unlock()
	var kinds []string
	for k, v := range c.failed {
		kinds = append(kinds, fmt.Sprintf("%s:%d", k, v))
	}
	sort.Strings(kinds)
	n := 0
	for _, v := range c.failed {
		n += v
	}
	s := fmt.Sprintf("sent %d, answered %d, failed %d {%s}, hung %d", c.sent, c.answered, n, strings.Join(kinds, " "), c.hung)
	if c.slowestChange > 0 {
		s += fmt.Sprintf(", slowest on the edge: a key's creation or revocation answered after %s, a new key accepted after %s, a revoked one refused after %s",
			c.slowestChange.Round(100*time.Millisecond), c.slowestMade.Round(100*time.Millisecond), c.slowestRevoked.Round(100*time.Millisecond))
	}
	if c.retried > 0 {
		s += fmt.Sprintf(", resent after connection errors %d", c.retried)
	}
	if !c.first.IsZero() {
		s += fmt.Sprintf(", calls sent over %s failed", c.last.Sub(c.first).Round(time.Millisecond))
	}
	if !c.origin.IsZero() && len(c.fails) > 0 {
		var at []string
		for _, f := range c.fails {
			at = append(at, fmt.Sprintf("%s@%+.1fs", f.kind, f.at.Sub(c.origin).Seconds()))
		}
		s += " (sent at, from the fault: " + strings.Join(at, " ") + ")"
	}
	return s
}

// callLoad sends POST /tool-call/echo/echo through one edge in a bounded loop until
// stopped, checking that each answer is the body it sent.
type callLoad struct {
	tally
	edge string
	key  string
	// retry resends a call that met a connection error (nothing answered), to the
	// other edge, as a client behind two addresses or a balancer does; other errors
	// are never resent.
	retry string
}

// maxCalls bounds each loop, whatever happens to the stack.
const maxCalls = 20000

// callClient has no timeout of its own: a call that takes longer than hungAfter is
// counted as hung by the loop.
var callClient = &http.Client{Transport: &http.Transport{
	DialContext:           (&net.Dialer{Timeout: 2 * time.Second}).DialContext,
	MaxIdleConnsPerHost:   4,
	ResponseHeaderTimeout: hungAfter,
}}

func (l *callLoad) run(stop <-chan struct{}, every time.Duration) {
	for i := 0; i < maxCalls && !stopped(stop); i++ {
		body := fmt.Sprintf(`{"n":%d,"edge":%q}`, i, l.edge)
		l.add(func(c *tally) { c.sent++ })
		began := time.Now()
		kind := l.call(l.edge, body)
		for kind == "conn" && l.retry != "" && time.Since(began) < hungAfter {
			l.add(func(c *tally) { c.retried++ })
			time.Sleep(50 * time.Millisecond)
			if kind = l.call(l.retry, body); kind == "conn" {
				kind = l.call(l.edge, body)
			}
		}
		if kind == "" {
			l.add(func(c *tally) { c.answered++ })
		} else {
			l.fail(kind, began)
		}
		select {
		case <-stop:
		case <-time.After(every):
		}
	}
}

// call makes one call; "" when it was answered right, else what went wrong.
func (l *callLoad) call(edge, body string) string {
	req, err := http.NewRequest(http.MethodPost, edge+"/tool-call/echo/echo", strings.NewReader(body))
	if err != nil {
		return "request"
	}
	req.Header.Set("SERVICE_API_KEY", l.key)
	req.Header.Set("Content-Type", "application/json")
	resp, err := callClient.Do(req)
	if err != nil {
		if isTimeout(err) && !isDial(err) {
			return "hung"
		}
		return "conn"
	}
	defer resp.Body.Close()
	got, err := io.ReadAll(resp.Body)
	if err != nil {
		return "conn"
	}
	if resp.StatusCode != http.StatusOK {
		return fmt.Sprint(resp.StatusCode)
	}
	if !jsonEqual(got, []byte(body)) {
		return "wrong-answer"
	}
	return ""
}

func stopped(stop <-chan struct{}) bool {
	select {
	case <-stop:
		return true
	default:
		return false
	}
}

// isDial reports whether err is a failure to connect: nothing of the request was sent,
// so a client may send it again (elsewhere) whatever it is.
func isDial(err error) bool {
	var oe *net.OpError
	return errors.As(err, &oe) && oe.Op == "dial"
}

func isTimeout(err error) bool {
	var te interface{ Timeout() bool }
	return errors.As(err, &te) && te.Timeout()
}

func jsonEqual(a, b []byte) bool {
	var x, y any
	if json.Unmarshal(a, &x) != nil || json.Unmarshal(b, &y) != nil {
		return false
	}
	xb, _ := json.Marshal(x)
	yb, _ := json.Marshal(y)
	return bytes.Equal(xb, yb)
}

// adminLoad creates an API key and revokes it, again and again, through the edges in
// turn, and checks each time that the new key works and the revoked one is refused.
type adminLoad struct {
	tally
	edges    []string
	adminKey string
}

func (l *adminLoad) run(stop <-chan struct{}, every time.Duration) {
	for i := 0; i < maxCalls && !stopped(stop); i++ {
		edge := l.edges[i%len(l.edges)]
		l.add(func(c *tally) { c.sent++ })
		began := time.Now()
		if kind := l.cycle(edge); kind != "" {
			l.fail(kind, began)
		} else {
			l.add(func(c *tally) { c.answered++ })
		}
		select {
		case <-stop:
		case <-time.After(every):
		}
	}
}

func (l *adminLoad) cycle(edge string) string {
	status, body := l.do(http.MethodPost, edge+"/admin/keys", `{"account":"dev","name":"churn"}`)
	if status != http.StatusCreated && status != http.StatusOK {
		return failedChange("create", status, body)
	}
	var k struct {
		ID  string `json:"id"`
		Key string `json:"key"`
	}
	if json.Unmarshal([]byte(body), &k) != nil || k.ID == "" || k.Key == "" {
		return "create-answer"
	}
	// A new key works on every edge within a second or two (each follows the
	// registry); while a NATS node's loss has JetStream elect new leaders, an edge
	// whose registry consumer must be made again can make it only once the cluster
	// has its leaders (up to about ten seconds; the slowest is printed): within
	// keyTakesEffect.
	madeAt := time.Now()
	if !until(keyTakesEffect, func() bool { s, _ := get(edge+"/get-tools", k.Key); return s == http.StatusOK }) {
		return "new-key-refused"
	}
	l.add(func(c *tally) { c.slowestMade = max(c.slowestMade, time.Since(madeAt)) })
	if status, body := l.do(http.MethodDelete, edge+"/admin/keys/"+k.ID, ""); status != http.StatusNoContent && status != http.StatusOK {
		return failedChange("revoke", status, body)
	}
	revokedAt := time.Now()
	if !until(keyTakesEffect, func() bool { s, _ := get(edge+"/get-tools", k.Key); return s == http.StatusUnauthorized }) {
		return "revoked-key-works"
	}
	l.add(func(c *tally) { c.slowestRevoked = max(c.slowestRevoked, time.Since(revokedAt)) })
	return ""
}

// keyTakesEffect bounds how long a key made or revoked takes to work, or stop
// working, on the edge that made the change.
const keyTakesEffect = 2 * hungAfter

// failedChange names how a key's creation or revocation failed: by its status, or,
// with none, "timeout" (no answer within changeWait) or "conn".
func failedChange(change string, status int, body string) string {
	switch {
	case status != 0:
		return fmt.Sprintf("%s-%d", change, status)
	case strings.Contains(body, "Client.Timeout"):
		return change + "-timeout"
	}
	return change + "-conn"
}

// do sends one admin request and returns its status and body (0 and the error when
// nothing was answered), noting how long the answer took.
func (l *adminLoad) do(method, url, body string) (int, string) {
	began := time.Now()
	defer func() { l.add(func(c *tally) { c.slowestChange = max(c.slowestChange, time.Since(began)) }) }()
	req, err := http.NewRequest(method, url, strings.NewReader(body))
	if err != nil {
		return 0, err.Error()
	}
	req.Header.Set("Authorization", "Bearer "+l.adminKey)
	if body != "" {
		req.Header.Set("Content-Type", "application/json")
	}
	resp, err := adminClient.Do(req)
	if err != nil {
		return 0, err.Error()
	}
	defer resp.Body.Close()
	b, _ := io.ReadAll(resp.Body)
	return resp.StatusCode, string(b)
}

// changeWait is how long a key's creation or revocation may take to be answered: an
// admin change waits out a registry bucket's election of a new leader, which takes
// seconds after a NATS node is lost, for up to the edge's --registry-write-wait (15
// s), and a key's creation may meet two elections (the account's bucket, then the
// keys'). Up to 8.4 s were seen while a node was cut off.
const changeWait = 20 * time.Second

var adminClient = &http.Client{Timeout: changeWait}

func until(within time.Duration, cond func() bool) bool {
	deadline := time.Now().Add(within)
	for !cond() {
		if time.Now().After(deadline) {
			return false
		}
		time.Sleep(100 * time.Millisecond)
	}
	return true
}
