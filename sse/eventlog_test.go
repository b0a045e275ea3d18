package sse

import (
	"context"
	"fmt"
	"strconv"
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
	l, err := openEventLog(testenv.Context(t), js, nc, bus.DefaultSubjects, 1, time.Minute)
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
