package chaos_test

import (
	"strings"
	"testing"
	"time"

	"github.com/toolgate/toolgate/internal/testenv"
)

// The most a fault may make calls fail for, and how long each is watched.
const (
	maxWindow = 2 * time.Second
	watch     = 6 * time.Second
)

// TestChaos runs the stack under load and, one after the other, kills a NATS node, an
// edge and a worker, each brought back before the next. For each fault: no call hangs
// (no answer within 10 s), every call sent gets its answer, and calls fail for at most
// two seconds after the fault. Last, NATS restarts entirely while a worker dies: no
// call hangs, and presence is true again (one worker of each tool). The figures are
// printed (go test -v, or make chaos).
func TestChaos(t *testing.T) {
	if testing.Short() {
		t.Skip("the chaos test runs the whole stack as processes; -short skips it")
	}
	s := startStack(t, testenv.Toolgate(t))
	l := startLoad(s, 8)

	var node *process // the NATS node killed: the one the most processes are connected to
	var on []string   // those processes
	var killedAt time.Time
	presenceTrue, bucketBack := make(chan time.Duration, 1), make(chan time.Duration, 1)
	faults := []struct {
		name    string
		kill    func()
		restore func()
	}{
		{"a NATS node killed", func() {
			var n int
			n, on = s.busiestNode()
			node = s.nats[n]
			t.Logf("killing %s, which %s are connected to", node.name, strings.Join(on, ", "))
			killedAt = time.Now()
			node.kill()
		}, func() {
			t.Logf("on another node after the kill: %s", s.reconnected(on, killedAt))
			node.start()
		}},
		{"an edge killed", s.edges[1].kill, func() { s.edges[1].start(); s.waitReady(s.urls[1], 60*time.Second) }},
		{"a worker killed", s.workers[0].kill, s.workers[0].start},
		{"NATS restarted entirely", func() {
			for _, n := range s.nats {
				n.kill()
			}
			s.workers[1].kill() // dies while NATS is down: its presence must not outlive it
			time.Sleep(time.Second)
			for _, n := range s.nats {
				n.start()
			}
			restarted := time.Now()
			go func() { bucketBack <- s.presenceLeader(restarted.Add(time.Minute)).Sub(restarted) }()
			go func() {
				for time.Since(restarted) < time.Minute && !s.showInstances(1) {
					time.Sleep(100 * time.Millisecond)
				}
				presenceTrue <- time.Since(restarted)
			}()
		}, func() {
			back, took := <-bucketBack, <-presenceTrue
			if took < time.Minute {
				t.Logf("presence true (one worker of each tool) %v after NATS started again; its bucket had a leader again after %v",
					took.Round(100*time.Millisecond), back.Round(100*time.Millisecond))
			} else {
				t.Errorf("presence not true (one worker of each tool) a minute after NATS started again")
			}
			s.workers[1].start()
		}},
	}
	var all []figures
	for _, f := range faults {
		time.Sleep(2 * time.Second) // load on a healthy stack first
		at := time.Now()
		f.kill()
		time.Sleep(watch)
		from, until := at.Add(-time.Second), at.Add(watch)
		unanswered := l.settle(from, until)
		fig := summarize(f.name, l.between(from, until), unanswered, at)
		all = append(all, fig)
		t.Log(fig)
		if fig.hung > 0 {
			t.Errorf("%s: %d calls hung (no answer within %v)", f.name, fig.hung, hangAfter)
		}
		if fig.window > maxWindow && f.name != "NATS restarted entirely" { // calls fail until it is back
			t.Errorf("%s: calls failed for %v after the fault, more than %v", f.name, fig.window.Round(time.Millisecond), maxWindow)
		}
		f.restore()
		s.waitHealthy(60 * time.Second)
	}
	if lost := l.halt(); lost > 0 {
		t.Errorf("%d calls never got an answer", lost)
	}
	t.Log("figures, per fault (calls started from 1 s before the fault to 6 s after):")
	for _, f := range all {
		t.Log(f)
	}
}
