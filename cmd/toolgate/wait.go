package main

import (
	"context"
	"errors"
	"fmt"
	"io/fs"
	"log/slog"
	"net"
	"os"
	"time"

	"github.com/nats-io/nats.go"

	"github.com/toolgate/toolgate/bus"
)

// waitUsage describes --wait, which every role that joins a deployment shares. In a
// compose stack or a pod, nothing orders the start of NATS, the bootstrap that writes
// the secrets, and the roles that need both: each role waits for them itself, for a
// bounded time, and then fails saying what it waited for.
const waitUsage = "how long to wait at start for NATS, its JetStream cluster and the files this role reads (0: fail at once if NATS is unreachable)"

// registryWait is the least time a role gives the registry to open: a new cluster
// answers "not ready" while it elects its JetStream leader.
const registryWait = 30 * time.Second

// connectWithin connects to NATS with opts, trying again for up to wait while no
// server answers.
func connectWithin(ctx context.Context, urls, name string, log *slog.Logger, wait time.Duration, opts ...nats.Option) (*nats.Conn, error) {
	deadline := time.Now().Add(wait)
	for {
		nc, err := bus.Connect(urls, name, log, opts...)
		if err == nil || !unreachable(err) || time.Now().After(deadline) {
			return nc, err
		}
		log.Info("waiting for NATS", "url", urls, "err", err)
		select {
		case <-ctx.Done():
			return nil, fmt.Errorf("%w (waiting for NATS: %v)", ctx.Err(), err)
		case <-time.After(time.Second):
		}
	}
}

// unreachable tells a server that is not there yet (refused, unknown name, no answer)
// from one that answered and said no, such as bad credentials, which waiting does not
// mend.
func unreachable(err error) bool {
	var netErr net.Error
	return errors.Is(err, nats.ErrNoServers) || errors.As(err, &netErr)
}

// readSecretFileWithin reads a secret another process writes (the bootstrap), waiting
// up to wait for the file to appear.
func readSecretFileWithin(ctx context.Context, path string, wait time.Duration, log *slog.Logger) (string, error) {
	if err := waitForFile(ctx, path, wait, log); err != nil {
		return "", err
	}
	return readSecretFile(path)
}

// waitForFile waits up to wait for a file another process writes (the bootstrap, the
// step that makes the bus's credentials) to appear. After wait it returns the file's
// fs.ErrNotExist, for the caller to report in its own words.
func waitForFile(ctx context.Context, path string, wait time.Duration, log *slog.Logger) error {
	deadline := time.Now().Add(wait)
	logged := false
	for {
		_, err := os.Stat(path)
		if err == nil || !errors.Is(err, fs.ErrNotExist) || time.Now().After(deadline) {
			return err
		}
		if !logged {
			log.Info("waiting for a file", "path", path)
			logged = true
		}
		select {
		case <-ctx.Done():
			return fmt.Errorf("%w (waiting for %s)", ctx.Err(), path)
		case <-time.After(250 * time.Millisecond):
		}
	}
}
