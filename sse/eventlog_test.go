package sse

import (
	"context"
	"fmt"
	"strconv"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/nats-io/nats.go/jetstream"

	"github.com/toolgate/toolgate/bus"
	"github.com/toolgate/toolgate/internal/testenv"
)

func testLog(t *testing.T) *eventLog {
	t.Helper()
	srv := testenv.Server(t)
	nc := testenv.Conn(t, srv.ClientURL())
	js, err := jetstream.New(nc)
	if err != nil {
		t.Fatal(err)
	}
	l, err := openEventLog(testenv.Context(t), js, nc, bus.DefaultSubjects, 1, time.Minute, false)
	if err != nil {
		t.Fatal(err)
	}
	return l
}

// collect runs a follower the way a stream does, until it has n records.
func collect(t *testing.T, ctx context.Context, f *follower, n int, replay bool) []string {
	t.Helper()
	var got []string
	deliver := func(rec record) bool {
		got = append(got, string(rec.data))
		return len(got) == n
	}
	if replay {
		if done, err := f.stored(ctx, deliver); err != nil || done {
			if err != nil {
				t.Fatal(err)
			}
			return got
		}
	}
	for {
		select {
		case m := <-f.live:
			done, err := f.take(ctx, m, deliver)
			if err != nil {
				t.Fatal(err)
			}
			if done {
				return got
			}
		case <-ctx.Done():
			t.Fatalf("got %d records of %d: %v", len(got), n, got)
		}
	}
}

func appendN(t *testing.T, l *eventLog, subject string, from, to int) {
	t.Helper()
	for i := from; i < to; i++ {
		if _, err := l.appendRecord(context.Background(), subject, []byte(strconv.Itoa(i)), nil, ""); err != nil {
			t.Error(err)
			return
		}
	}
}

func want(from, to int) string {
	var s []string
	for i := from; i < to; i++ {
		s = append(s, strconv.Itoa(i))
	}
	return fmt.Sprint(s)
}

// TestFollowerHandsOverFromStoreToLive: a stream resumed while records keep coming
// gets each record once, in order: the stored ones, then the live ones, none lost
// at the seam.
func TestFollowerHandsOverFromStoreToLive(t *testing.T) {
	l := testLog(t)
	ctx := testenv.Context(t)
	subject := l.standaloneSubject("s1")
	appendN(t, l, subject, 0, 50)

	f, err := l.follow(subject)
	if err != nil {
		t.Fatal(err)
	}
	defer f.stop()
	var wg sync.WaitGroup
	wg.Go(func() { appendN(t, l, subject, 50, 300) })
	got := collect(t, ctx, f, 300, true)
	wg.Wait()
	if fmt.Sprint(got) != want(0, 300) {
		t.Fatalf("got %v", got)
	}
}

// TestFollowerReadsWhatTheLiveFeedLost: records the live feed never delivered (here:
// taken off it unseen, as a full buffer drops them) are read from the store as soon
// as a later record shows they are missing.
func TestFollowerReadsWhatTheLiveFeedLost(t *testing.T) {
	l := testLog(t)
	ctx := testenv.Context(t)
	subject := l.postSubject("s1", "p1")
	f, err := l.follow(subject)
	if err != nil {
		t.Fatal(err)
	}
	defer f.stop()
	appendN(t, l, subject, 0, 3)
	if got := collect(t, ctx, f, 3, false); fmt.Sprint(got) != want(0, 3) {
		t.Fatalf("got %v", got)
	}
	appendN(t, l, subject, 3, 6)
	for range 3 {
		<-f.live // lost
	}
	appendN(t, l, subject, 6, 8)
	if got := collect(t, ctx, f, 5, false); fmt.Sprint(got) != want(3, 8) {
		t.Fatalf("after losing 3, 4 and 5 got %v", got)
	}
}

// TestEventLogKeepsItsSettings: an edge opening the shared event log takes its
// retention when it names none, refuses a retention or replica count that differs
// without changing the log, and changes it only when told to.
func TestEventLogKeepsItsSettings(t *testing.T) {
	srv := testenv.Server(t)
	nc := testenv.Conn(t, srv.ClientURL())
	js, err := jetstream.New(nc)
	if err != nil {
		t.Fatal(err)
	}
	ctx := testenv.Context(t)
	open := func(replicas int, retention time.Duration, update bool) (*eventLog, error) {
		return openEventLog(ctx, js, nc, bus.DefaultSubjects, replicas, retention, update)
	}
	maxAge := func() time.Duration {
		st, err := js.Stream(ctx, eventStreamName(bus.DefaultSubjects))
		if err != nil {
			t.Fatal(err)
		}
		return st.CachedInfo().Config.MaxAge
	}

	if _, err := open(1, 0, false); err != nil || maxAge() != DefaultEventRetention {
		t.Fatalf("creating the log without a retention: %v, max age %v; want the default %v", err, maxAge(), DefaultEventRetention)
	}
	if _, err := open(1, 3*time.Minute, true); err != nil || maxAge() != 3*time.Minute {
		t.Fatalf("changing it on purpose: %v, max age %v; want 3m", err, maxAge())
	}
	if _, err := open(1, 0, false); err != nil || maxAge() != 3*time.Minute {
		t.Fatalf("an edge naming no retention: %v, max age %v; want the log's 3m kept", err, maxAge())
	}
	for _, tc := range []struct {
		replicas  int
		retention time.Duration
		setting   string
	}{{1, time.Hour, "retention"}, {3, 0, "replicas"}} {
		_, err := open(tc.replicas, tc.retention, false)
		if err == nil || !strings.Contains(err.Error(), "has "+tc.setting) {
			t.Fatalf("an edge asking for %d replicas and retention %v: %v, want a refusal naming the %s", tc.replicas, tc.retention, err, tc.setting)
		}
		if maxAge() != 3*time.Minute {
			t.Fatalf("a refused open changed the log's max age to %v", maxAge())
		}
	}
}
