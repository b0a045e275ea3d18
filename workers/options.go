package workers

import (
	"fmt"
	"log/slog"
	"os"
	"time"

	"github.com/nats-io/nkeys"

	"github.com/toolgate/toolgate/bus/wire"
)

// DefaultConcurrency is how many calls one instance runs at once unless told otherwise.
const DefaultConcurrency = 64

// Option adjusts a Worker.
type Option func(*config)

type config struct {
	instance     string
	concurrency  int
	cancelWindow time.Duration
	cancelMax    int
	presenceTTL  time.Duration
	heartbeat    time.Duration
	log          *slog.Logger
	subjects     wire.Subjects
	sealKey      nkeys.KeyPair
}

// WithInstance names this instance in the presence bucket and in nats micro metadata
// (letters, digits, '-' and '_'). By default it is the host name and a random suffix.
func WithInstance(name string) Option { return func(c *config) { c.instance = name } }

// WithConcurrency bounds how many calls the instance runs at once (DefaultConcurrency
// by default). At the bound the calls taken wait for a slot, in order, and are named
// on the tool's Holding subject as running ones are (see wire.HoldingAfter); past 16
// waiting per slot the worker takes no more until one finishes, and the server's
// routing and the connection's pending queue hold the rest. Those are not named: an
// edge gives them up after its --call-lost-after, wire.HoldingLost by default (its caller gets a 503 and may try again
// later) and cancels them, so that they do not run once their caller was answered.
// A waiting call whose deadline passes, or whose caller cancels it, never runs: its
// caller has already been answered.
func WithConcurrency(n int) Option { return func(c *config) { c.concurrency = n } }

// WithCancelMemory sets how long, and for how many call ids at most, the instance
// remembers cancels that name no call running here, so that a call still waiting for
// a slot, or on its way, never starts once its caller gave up (by default
// DefaultCancelMemory and DefaultCancelMemoryMax; the oldest go first past the
// bound). A call that waits longer is still stopped by its deadline.
func WithCancelMemory(window time.Duration, max int) Option {
	return func(c *config) { c.cancelWindow, c.cancelMax = window, max }
}

// WithPresenceTTL sets how long the instance's presence outlives its last heartbeat:
// how long after a crash the tool still shows it (wire.DefaultPresenceTTL by
// default). The server counts whole seconds, at least one; the presence bucket's own
// TTL bounds it, so a longer one lasts only that long.
func WithPresenceTTL(d time.Duration) Option { return func(c *config) { c.presenceTTL = d } }

// WithHeartbeat sets how often presence is refreshed; by default a third of the
// presence TTL, so that two lost heartbeats do not make the instance vanish.
func WithHeartbeat(d time.Duration) Option { return func(c *config) { c.heartbeat = d } }

// WithLogger sets the logger (slog.Default() by default). Parameters and results are
// never logged.
func WithLogger(l *slog.Logger) Option { return func(c *config) { c.log = l } }

// WithSubjects sets the bus subjects' prefix (wire.DefaultSubjects by default).
func WithSubjects(s wire.Subjects) Option { return func(c *config) { c.subjects = s } }

// WithSealKey sets the tool's seal key: the X25519 key pair (nkeys curve keys) whose
// public key the tool's record carries, to which the edges seal each account's
// connection values for each call, and with which the worker opens them. Every
// instance of the tool must hold the same: a worker credentials file issued by
// `toolgate creds issue` carries the tool's (SealKeyFromCreds). Without one, a tool
// that declares Connection fields makes a key of its own at Run, which serves one
// instance alone: another instance would replace the record's key with its own.
func WithSealKey(kp nkeys.KeyPair) Option { return func(c *config) { c.sealKey = kp } }

// SealKeyFromCreds reads tool's seal key from a worker credentials file.
func SealKeyFromCreds(path, tool string) (nkeys.KeyPair, error) {
	b, err := os.ReadFile(path)
	if err != nil {
		return nil, fmt.Errorf("workers: seal key: %w", err)
	}
	defer clear(b)
	kp, err := wire.ParseSealKey(b, tool)
	if err != nil {
		return nil, fmt.Errorf("workers: seal key: %s: %w", path, err)
	}
	return kp, nil
}
