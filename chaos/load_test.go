package chaos_test

import (
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"net/http"
	"slices"
	"sort"
	"strings"
	"sync"
	"sync/atomic"
	"syscall"
	"time"
)

// hangAfter is when a call that has had no answer counts as hung.
const hangAfter = 10 * time.Second

// outcome is one call as its caller saw it.
type outcome struct {
	kind       string // the method called
	edge       int    // the edge that took it
	start, end time.Time
	status     int    // 0: no HTTP answer
	code       string // the error envelope's code, or the transport error
}

func (o outcome) ok() bool { return o.status == http.StatusOK }

// load calls the stack's tools from a number of callers at once, each one call after
// another, through the edges in turn, as a load balancer in front of them would: an
// edge that refuses connections is left alone for a moment and the call goes to the
// other (it was never sent, so sending it elsewhere is safe). A call in flight when
// its edge dies is not sent again: its caller sees the failure.
type load struct {
	s       *stack
	client  *http.Client
	next    atomic.Uint64
	downMu  sync.Mutex
	down    map[int]time.Time // edge -> until when it is left alone
	stop    chan struct{}
	wg      sync.WaitGroup
	mu      sync.Mutex
	done    []outcome
	pending map[uint64]time.Time // calls sent and not answered, by number, with their start
	seq     atomic.Uint64
}

func startLoad(s *stack, callers int) *load {
	l := &load{s: s, stop: make(chan struct{}), down: map[int]time.Time{}, pending: map[uint64]time.Time{},
		client: &http.Client{Timeout: hangAfter + 5*time.Second, Transport: &http.Transport{MaxIdleConnsPerHost: callers}}}
	for i := range callers {
		l.wg.Go(func() { l.caller(i) })
	}
	return l
}

// caller makes calls until the load stops: mostly quick echoes, and every fifth a
// clock wait of 400 ms, so that calls are in flight on a worker when it dies.
func (l *load) caller(i int) {
	for n := 0; ; n++ {
		select {
		case <-l.stop:
			return
		default:
		}
		kind, body := "echo", fmt.Sprintf(`{"caller":%d,"n":%d}`, i, n)
		if n%5 == 4 {
			kind, body = "wait", `{"ms":400}`
		}
		l.call(kind, body)
	}
}

func (l *load) call(kind, body string) {
	path := "/tool-call/echo/echo"
	if kind == "wait" {
		path = "/tool-call/clock/wait"
	}
	id := l.seq.Add(1)
	start := time.Now()
	l.mu.Lock()
	l.pending[id] = start
	l.mu.Unlock()
	o := outcome{kind: kind, start: start}
	for attempt := 0; ; attempt++ {
		o.edge = l.pick()
		req, _ := http.NewRequest(http.MethodPost, l.s.urls[o.edge]+path, strings.NewReader(body))
		req.Header.Set("SERVICE_API_KEY", l.s.key)
		req.Header.Set("Content-Type", "application/json")
		resp, err := l.client.Do(req)
		if err != nil {
			if errors.Is(err, syscall.ECONNREFUSED) && attempt < 10 {
				l.setDown(o.edge)
				continue // never sent: the balancer sends it to the other edge
			}
			o.code = transportError(err)
			break
		}
		b, _ := io.ReadAll(resp.Body)
		resp.Body.Close()
		o.status = resp.StatusCode
		if resp.StatusCode != http.StatusOK {
			var env struct {
				Error struct {
					Code string `json:"code"`
				} `json:"error"`
			}
			_ = json.Unmarshal(b, &env)
			o.code = env.Error.Code
		}
		break
	}
	o.end = time.Now()
	l.mu.Lock()
	delete(l.pending, id)
	l.done = append(l.done, o)
	l.mu.Unlock()
}

func transportError(err error) string {
	var ne interface{ Timeout() bool }
	switch {
	case errors.As(err, &ne) && ne.Timeout():
		return "client timeout"
	case errors.Is(err, syscall.ECONNRESET), errors.Is(err, io.EOF), errors.Is(err, io.ErrUnexpectedEOF):
		return "connection lost"
	}
	return "transport: " + err.Error()
}

// pick chooses the next edge in turn that is not left alone.
func (l *load) pick() int {
	n := len(l.s.urls)
	l.downMu.Lock()
	defer l.downMu.Unlock()
	for range n {
		e := int(l.next.Add(1) % uint64(n))
		if time.Now().After(l.down[e]) {
			return e
		}
	}
	return int(l.next.Add(1) % uint64(n))
}

func (l *load) setDown(e int) {
	l.downMu.Lock()
	l.down[e] = time.Now().Add(500 * time.Millisecond)
	l.downMu.Unlock()
}

// halt stops the callers and waits for their last calls, at most until a call would
// count as hung; it returns how many calls were still without an answer then.
func (l *load) halt() int {
	close(l.stop)
	finished := make(chan struct{})
	go func() { l.wg.Wait(); close(finished) }()
	select {
	case <-finished:
	case <-time.After(hangAfter + 10*time.Second):
	}
	l.mu.Lock()
	defer l.mu.Unlock()
	return len(l.pending)
}

// between returns the calls answered that started at or after from and before until.
func (l *load) between(from, until time.Time) []outcome {
	l.mu.Lock()
	defer l.mu.Unlock()
	var out []outcome
	for _, o := range l.done {
		if !o.start.Before(from) && o.start.Before(until) {
			out = append(out, o)
		}
	}
	return out
}

// settle waits until every call started from from to until has its answer, or has
// waited hangAfter for it, and returns how many still have none: those hung.
func (l *load) settle(from, until time.Time) int {
	for {
		var oldest time.Time
		n := 0
		l.mu.Lock()
		for _, start := range l.pending {
			if !start.Before(from) && start.Before(until) {
				n++
				if oldest.IsZero() || start.Before(oldest) {
					oldest = start
				}
			}
		}
		l.mu.Unlock()
		if n == 0 || time.Since(oldest) >= hangAfter {
			return n
		}
		time.Sleep(100 * time.Millisecond)
	}
}

// figures sums up the calls around one fault at time at.
type figures struct {
	name               string
	calls, ok, failed  int
	hung               int
	codes              map[string]int
	window             time.Duration // from the fault to the last failed call's answer
	firstOK            time.Duration // from the fault to the start of the first call after which every call succeeded
	p50, p99, maxAfter time.Duration // latency of the calls that succeeded after the window
}

func summarize(name string, calls []outcome, unanswered int, at time.Time) figures {
	f := figures{name: name, calls: len(calls) + unanswered, hung: unanswered, codes: map[string]int{}}
	var lastFail time.Time
	for _, o := range calls {
		if o.end.Sub(o.start) > hangAfter {
			f.hung++
		}
		if o.ok() {
			f.ok++
			continue
		}
		f.failed++
		code := o.code
		if o.status != 0 {
			code = fmt.Sprintf("%d %s", o.status, o.code)
		}
		f.codes[code]++
		if o.end.After(lastFail) {
			lastFail = o.end
		}
	}
	if f.failed > 0 {
		f.window = max(lastFail.Sub(at), 0)
	}
	sort.Slice(calls, func(i, j int) bool { return calls[i].start.Before(calls[j].start) })
	recovered := at
	for _, o := range calls {
		if !o.ok() && o.start.After(recovered) {
			recovered = o.start
		}
	}
	f.firstOK = recovered.Sub(at)
	var lat []time.Duration
	for _, o := range calls {
		if o.ok() && o.kind == "echo" && o.start.After(at.Add(f.window)) {
			lat = append(lat, o.end.Sub(o.start))
		}
	}
	slices.Sort(lat)
	if len(lat) > 0 {
		f.p50, f.p99, f.maxAfter = lat[len(lat)/2], lat[len(lat)*99/100], lat[len(lat)-1]
	}
	return f
}

func (f figures) String() string {
	var codes []string
	for c, n := range f.codes {
		codes = append(codes, fmt.Sprintf("%s x%d", c, n))
	}
	sort.Strings(codes)
	return fmt.Sprintf("%-28s calls %5d  ok %5d  failed %3d  hung %d  failing for %6.2fs  all ok from +%5.2fs  echo after: p50 %5.1fms p99 %6.1fms max %6.1fms  %s",
		f.name, f.calls, f.ok, f.failed, f.hung, f.window.Seconds(), f.firstOK.Seconds(),
		ms(f.p50), ms(f.p99), ms(f.maxAfter), strings.Join(codes, ", "))
}

func ms(d time.Duration) float64 { return float64(d.Microseconds()) / 1000 }
