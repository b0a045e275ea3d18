package audit

import (
	"cmp"
	"context"
	"errors"
	"fmt"
	"os"
	"strconv"
	"time"

	"github.com/nats-io/nats.go/jetstream"

	"github.com/toolgate/toolgate/bus/wire"
	"github.com/toolgate/toolgate/registry"
)

// Options say where the trail is kept and for how long. A retention left at zero is
// taken from the stream as it is, or from the defaults when Open makes it; one given
// must be what the stream has, unless Update is set, so that every edge keeps the
// trail alike.
type Options struct {
	Subjects wire.Subjects
	// Replicas of the stream: the registry's (1 on a single node, 3 in a cluster).
	Replicas int
	// MaxAge drops records older than it; MaxBytes drops the oldest records once the
	// stream holds more.
	MaxAge   time.Duration
	MaxBytes int64
	// Update changes a stream that exists with other settings to these.
	Update bool
	// Edge names this edge instance in the records it writes: DefaultEdge() unless set.
	Edge string
}

// The trail's retention unless set: a month, and at most 1 GiB.
const (
	DefaultMaxAge   = 30 * 24 * time.Hour
	DefaultMaxBytes = 1 << 30
)

// The least retention a trail may be given: shorter would lose records before
// anyone could read them.
const (
	MinMaxAge   = time.Minute
	MinMaxBytes = 1 << 20
)

// DefaultEdge names this process in the records it writes: its host's name (a
// Kubernetes pod's) and its process id.
func DefaultEdge() string {
	host, err := os.Hostname()
	if err != nil {
		host = "edge"
	}
	return host + "-" + strconv.Itoa(os.Getpid())
}

// Validate names the first setting that is wrong.
func (o Options) Validate() error {
	switch {
	case o.MaxAge < 0 || (o.MaxAge > 0 && o.MaxAge < MinMaxAge):
		return fmt.Errorf("audit: max-age: must be at least %v, or 0 for the trail's own", MinMaxAge)
	case o.MaxBytes < 0 || (o.MaxBytes > 0 && o.MaxBytes < MinMaxBytes):
		return fmt.Errorf("audit: max-bytes: must be at least %d (1 MiB), or 0 for the trail's own", MinMaxBytes)
	case o.Replicas < 0 || o.Replicas > 5:
		return errors.New("audit: replicas: must be from 1 to 5, or 0 for 1")
	}
	return nil
}

// openStream makes the trail's stream, or checks it against o (see Options) and
// takes it as it is. It retries while a new cluster elects its JetStream leader.
func openStream(ctx context.Context, js jetstream.JetStream, o Options) (jetstream.Stream, error) {
	name := o.Subjects.AuditStream()
	var have *jetstream.StreamConfig
	err := retry(ctx, func(ctx context.Context) error {
		st, err := js.Stream(ctx, name)
		if err == nil {
			c := st.CachedInfo().Config
			have = &c
		}
		if errors.Is(err, jetstream.ErrStreamNotFound) {
			return nil
		}
		return err
	})
	if err != nil {
		return nil, fmt.Errorf("audit: stream %s: %w", name, err)
	}
	if have != nil {
		o.MaxAge = cmp.Or(o.MaxAge, have.MaxAge)
		o.MaxBytes = cmp.Or(o.MaxBytes, have.MaxBytes)
		if err := differ(name, *have, o); err != nil {
			return nil, err
		}
	}
	cfg := jetstream.StreamConfig{
		Name:        name,
		Description: "toolgate audit trail: one record per call answered and per admin change",
		Subjects:    []string{o.Subjects.AuditAll()},
		Retention:   jetstream.LimitsPolicy,
		Discard:     jetstream.DiscardOld,
		MaxAge:      cmp.Or(o.MaxAge, DefaultMaxAge),
		MaxBytes:    cmp.Or(o.MaxBytes, DefaultMaxBytes),
		Storage:     jetstream.FileStorage,
		Replicas:    cmp.Or(o.Replicas, 1),
	}
	var st jetstream.Stream
	err = retry(ctx, func(ctx context.Context) (err error) {
		st, err = js.CreateOrUpdateStream(ctx, cfg)
		return err
	})
	if err != nil {
		return nil, fmt.Errorf("audit: stream %s: %w", name, err)
	}
	return st, nil
}

// differ refuses a stream whose retention or replicas are not o's, unless o.Update.
func differ(name string, have jetstream.StreamConfig, o Options) error {
	if o.Update {
		return nil
	}
	for _, d := range []struct {
		setting    string
		have, want any
	}{{"max age", have.MaxAge, o.MaxAge}, {"max bytes", have.MaxBytes, o.MaxBytes}, {"replicas", have.Replicas, cmp.Or(o.Replicas, 1)}} {
		if d.have != d.want {
			return fmt.Errorf("audit: stream %s has %s %v, this edge asks for %v: give every edge the same settings, "+
				"leave --audit-max-age and --audit-max-bytes unset to take the trail's own, or change it on purpose (toolgate edge --update-registry)",
				name, d.setting, d.have, d.want)
		}
	}
	return nil
}

// retry runs op until it succeeds, fails in a way waiting will not mend, or ctx ends.
func retry(ctx context.Context, op func(context.Context) error) error {
	for {
		attempt, cancel := context.WithTimeout(ctx, 5*time.Second)
		err := op(attempt)
		cancel()
		if err == nil || !registry.Retryable(err) {
			return err
		}
		select {
		case <-ctx.Done():
			return fmt.Errorf("%w (last error: %v)", ctx.Err(), err)
		case <-time.After(100 * time.Millisecond):
		}
	}
}
