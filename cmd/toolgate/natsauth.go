package main

import (
	"context"
	"errors"
	"fmt"
	"io/fs"
	"log/slog"
	"os"
	"path/filepath"
	"strings"
	"time"

	"github.com/nats-io/nats.go"
	"github.com/spf13/pflag"

	"github.com/toolgate/toolgate/bus"
)

// addNATSAuthFlags adds the flags every role that connects to NATS shares: the
// role's credentials file and the TLS files, each with its TOOLGATE_* variable.
func addNATSAuthFlags(f *pflag.FlagSet, a *bus.ClientAuth) {
	f.StringVar(&a.Creds, "nats-creds", envOr("TOOLGATE_NATS_CREDS", ""), "NATS user credentials file (JWT and seed) of this role (env TOOLGATE_NATS_CREDS)")
	addNATSTLSFlags(f, a)
}

// addNATSTLSFlags adds the TLS files alone: a NATS node takes them for its client
// port and its routes, where credentials files have no use.
func addNATSTLSFlags(f *pflag.FlagSet, a *bus.ClientAuth) {
	f.StringVar(&a.CA, "nats-tls-ca", envOr("TOOLGATE_NATS_TLS_CA", ""), "CA certificate (PEM) that signs the NATS servers' certificates (and routes', and verified clients'); turns TLS on (env TOOLGATE_NATS_TLS_CA)")
	f.StringVar(&a.Cert, "nats-tls-cert", envOr("TOOLGATE_NATS_TLS_CERT", ""), "certificate (PEM): a client's, for servers that verify clients; a NATS node's own, for its clients and routes (env TOOLGATE_NATS_TLS_CERT)")
	f.StringVar(&a.Key, "nats-tls-key", envOr("TOOLGATE_NATS_TLS_KEY", ""), "the certificate's key (PEM) (env TOOLGATE_NATS_TLS_KEY)")
}

// connectNATS connects a role to NATS with its credentials and TLS files, waiting up
// to wait for those files and for a server to answer (see waitUsage). A refusal that
// waiting cannot cure is returned at once, naming its cause and the flag that would
// fix it. The context returned ends when the connection is lost for good (credentials
// revoked while running): the role stops and exits with lost(ctx). Call stop before
// closing the connection.
func connectNATS(ctx context.Context, url, name string, auth bus.ClientAuth, wait time.Duration, log *slog.Logger, extra ...nats.Option) (
	nc *nats.Conn, watched context.Context, stop context.CancelFunc, err error) {
	for _, f := range []string{auth.Creds, auth.CA, auth.Cert, auth.Key} {
		if f == "" {
			continue
		}
		if err := waitForFile(ctx, f, wait, log); err != nil && !errors.Is(err, fs.ErrNotExist) {
			return nil, nil, nil, err
		}
	}
	if err := auth.Validate(); err != nil {
		return nil, nil, nil, err
	}
	nc, err = connectWithin(ctx, url, name, log, wait, append(auth.Options(), extra...)...)
	if err != nil {
		return nil, nil, nil, withHint(err)
	}
	watched, stop = bus.Watch(ctx, nc)
	return nc, watched, stop, nil
}

// withHint adds to a refusal the flag that would cure it.
func withHint(err error) error {
	for _, h := range []struct {
		cause error
		hint  string
	}{
		{bus.ErrNoCredentials, "give this role's credentials file: --nats-creds or TOOLGATE_NATS_CREDS"},
		{bus.ErrCredentialsRefused, "check --nats-creds: issued for this deployment and not revoked (toolgate creds list)"},
		{bus.ErrServerNotTrusted, "give the CA that signed the servers' certificates: --nats-tls-ca or TOOLGATE_NATS_TLS_CA"},
		{bus.ErrClientCertRequired, "give a client certificate: --nats-tls-cert and --nats-tls-key"},
	} {
		if errors.Is(err, h.cause) {
			return fmt.Errorf("%w (%s)", err, h.hint)
		}
	}
	return err
}

// lost returns why the connection of connectNATS's context was lost, or err when it
// was not: a role that stopped because its credentials were revoked exits with that.
func lost(ctx context.Context, err error) error {
	if cause := context.Cause(ctx); errors.Is(cause, bus.ErrConnectionLost) {
		return errors.Join(withHint(cause), err)
	}
	return err
}

// giveTreeToDirOwner gives dir and everything in it to the owner of the directory dir
// is in, when run as root (see giveToDirOwner): a credentials command run as root in a
// container writes into a volume whose files the roles read as the image's user.
func giveTreeToDirOwner(dir string) error {
	// WalkDir visits a directory before what it holds, so each path takes the owner
	// its directory was just given.
	return filepath.WalkDir(dir, func(path string, _ fs.DirEntry, err error) error {
		if err != nil {
			return err
		}
		return giveToDirOwner(path)
	})
}

// exportFile copies a public file (a CA's certificate) to path, mode 0600, belonging
// to the owner of path's directory, and returns path when it made or changed it.
func exportFile(from, path string) ([]string, error) {
	b, err := os.ReadFile(from)
	if err != nil {
		return nil, err
	}
	if have, err := os.ReadFile(path); err == nil && string(have) == string(b) {
		return nil, nil
	}
	if err := os.MkdirAll(filepath.Dir(path), 0o700); err != nil {
		return nil, err
	}
	if err := writeSecretFile(path, strings.TrimSpace(string(b))); err != nil {
		return nil, err
	}
	return []string{path}, giveToDirOwner(path)
}

// envList is a comma-separated variable as a list; nil when it is unset or empty.
func envList(name string) []string {
	v := strings.TrimSpace(os.Getenv(name))
	if v == "" {
		return nil
	}
	return strings.Split(v, ",")
}
