package registry_test

import (
	"context"
	"fmt"
	"strconv"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/nats-io/nats.go"
	"github.com/nats-io/nats.go/jetstream"

	"github.com/toolgate/toolgate/bus/wire"
	"github.com/toolgate/toolgate/internal/testenv"
	"github.com/toolgate/toolgate/registry"
)

// testJetStream is a NATS server of the test's own, and JetStream on it.
func testJetStream(t *testing.T) (*nats.Conn, jetstream.JetStream) {
	t.Helper()
	nc := testenv.Conn(t, testenv.Server(t).ClientURL())
	js, err := jetstream.New(nc)
	if err != nil {
		t.Fatal(err)
	}
	return nc, js
}

func testLog(t *testing.T) *registry.EventLog {
	t.Helper()
	nc, js := testJetStream(t)
	l, err := registry.OpenEventLog(testenv.Context(t), js, nc, wire.DefaultSubjects, 1, time.Minute, false)
	if err != nil {
		t.Fatal(err)
	}
	return l
}

// collect runs a follower the way a stream does, until it has n records.
func collect(t *testing.T, ctx context.Context, f *registry.Follower, n int, replay bool) []string {
	t.Helper()
	var got []string
	deliver := func(rec registry.Record) bool {
		got = append(got, string(rec.Data))
		return len(got) == n
	}
	if replay {
		if done, err := f.Stored(ctx, deliver); err != nil || done {
			if err != nil {
				t.Fatal(err)
			}
			return got
		}
	}
	for {
		select {
		case m := <-f.Live():
			done, err := f.Take(ctx, m, deliver)
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

func appendN(t *testing.T, l *registry.EventLog, subject string, from, to int) {
	t.Helper()
	for i := from; i < to; i++ {
		if _, err := l.Append(context.Background(), subject, []byte(strconv.Itoa(i)), nil, ""); err != nil {
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
	subject := l.StandaloneSubject("kit", "s1")
	appendN(t, l, subject, 0, 50)

	f, err := l.Follow(subject)
	if err != nil {
		t.Fatal(err)
	}
	defer f.Stop()
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
	subject := l.PostSubject("kit", "s1", "p1")
	f, err := l.Follow(subject)
	if err != nil {
		t.Fatal(err)
	}
	defer f.Stop()
	appendN(t, l, subject, 0, 3)
	if got := collect(t, ctx, f, 3, false); fmt.Sprint(got) != want(0, 3) {
		t.Fatalf("got %v", got)
	}
	appendN(t, l, subject, 3, 6)
	for range 3 {
		<-f.Live() // lost
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
	nc, js := testJetStream(t)
	ctx := testenv.Context(t)
	open := func(replicas int, retention time.Duration, update bool) (*registry.EventLog, error) {
		return registry.OpenEventLog(ctx, js, nc, wire.DefaultSubjects, replicas, retention, update)
	}
	maxAge := func() time.Duration {
		st, err := js.Stream(ctx, wire.DefaultSubjects.EventLogStream())
		if err != nil {
			t.Fatal(err)
		}
		return st.CachedInfo().Config.MaxAge
	}

	if _, err := open(1, 0, false); err != nil || maxAge() != registry.DefaultEventRetention {
		t.Fatalf("creating the log without a retention: %v, max age %v; want the default %v", err, maxAge(), registry.DefaultEventRetention)
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

// TestEventLogTakesThisVersionsSubjects: a deployment's event log, made by a version
// whose session subjects named no tool, takes this version's subjects and republishing
// when an edge opens it, keeping its records; a record then goes through it.
func TestEventLogTakesThisVersionsSubjects(t *testing.T) {
	nc, js := testJetStream(t)
	ctx := testenv.Context(t)
	old, err := js.CreateStream(ctx, jetstream.StreamConfig{
		Name: wire.DefaultSubjects.EventLogStream(), Subjects: []string{"tg.sess.*.out", "tg.sess.*.out.*"},
		MaxAge: time.Minute, Storage: jetstream.FileStorage, Replicas: 1, Duplicates: time.Minute,
		RePublish: &jetstream.RePublish{Source: "tg.sess.>", Destination: "tg.logged.sess.>"},
	})
	if err != nil {
		t.Fatal(err)
	}
	if _, err := js.Publish(ctx, "tg.sess.s0.out", []byte("before")); err != nil {
		t.Fatal(err)
	}

	l, err := registry.OpenEventLog(ctx, js, nc, wire.DefaultSubjects, 1, 0, false)
	if err != nil {
		t.Fatalf("opening the older log: %v", err)
	}
	info, err := old.Info(ctx)
	if err != nil {
		t.Fatal(err)
	}
	if got, want := fmt.Sprint(info.Config.Subjects), fmt.Sprint(wire.DefaultSubjects.EventLog()); got != want {
		t.Errorf("subjects %s, want %s", got, want)
	}
	if info.State.Msgs != 1 || info.Config.MaxAge != time.Minute {
		t.Errorf("the log kept %d records and max age %v, want its 1 and 1m", info.State.Msgs, info.Config.MaxAge)
	}
	subject := l.StandaloneSubject("kit", "s1")
	f, err := l.Follow(subject)
	if err != nil {
		t.Fatal(err)
	}
	defer f.Stop()
	appendN(t, l, subject, 0, 2)
	if got := collect(t, ctx, f, 2, false); fmt.Sprint(got) != want(0, 2) {
		t.Fatalf("live through the updated log: %v", got)
	}
}
