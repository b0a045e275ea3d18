package main

import (
	"context"
	"errors"
	"fmt"
	"io"
	"log/slog"
	"os"
	"path/filepath"
	"strings"

	"github.com/spf13/cobra"

	"github.com/toolgate/toolgate/registry"
)

// bootstrapConfig is what `toolgate bootstrap` sets a deployment up with.
type bootstrapConfig struct {
	Worker workerConfig // NATS, replicas and how long to wait: as a worker joins
	// Data keeps the deployment's secrets: the link secret and the admin key the edges
	// read, and the dev account's key.
	Data string
	// Export is a directory the admin key and the dev key are copied to for scripts
	// (mode 0600); empty: none.
	Export string
}

// Validate names the first field that is wrong.
func (c bootstrapConfig) Validate() error {
	if err := c.Worker.Validate(); err != nil {
		return fmt.Errorf("bootstrap: %w", err)
	}
	if c.Data == "" {
		return errors.New("bootstrap: data: required")
	}
	if c.Export != "" && filepath.Clean(c.Export) == filepath.Clean(c.Data) {
		return errors.New("bootstrap: export: must be another directory than data")
	}
	return nil
}

func newBootstrapCmd() *cobra.Command {
	cfg := bootstrapConfig{Worker: defaultWorkerConfig(), Data: envOr("TOOLGATE_DATA", ""), Export: envOr("TOOLGATE_EXPORT", "")}
	cmd := &cobra.Command{
		Use:   "bootstrap",
		Short: "Set a deployment up once: the registry's buckets, the secrets the edges read, the dev account with its key and the demo tools",
		Long: `Set a deployment up, as toolgate dev sets up its own: the registry's buckets (with
--replicas), the link secret and the admin key the edges read from --data, the dev
account with its API key, connected to the demo tools, and the state bucket of the
demo email tool (its outbox), which its workers may use but not make. The admin key
and the dev key are copied to --export for scripts.

Run it as often as you like: what exists is kept, never rotated, and no key is
printed. Run as root, it gives the files it writes to the owner of their directory.`,
		Args: cobra.NoArgs,
		RunE: func(cmd *cobra.Command, _ []string) error {
			if err := cfg.Validate(); err != nil {
				return err
			}
			return runBootstrap(cmd.Context(), cfg, cmd.OutOrStdout(), slog.New(slog.NewJSONHandler(cmd.ErrOrStderr(), nil)))
		},
	}
	f := cmd.Flags()
	f.StringVar(&cfg.Worker.NATS, "nats", cfg.Worker.NATS, "NATS URL, or several comma-separated (env TOOLGATE_NATS)")
	addNATSAuthFlags(f, &cfg.Worker.NATSAuth)
	f.IntVar(&cfg.Worker.Replicas, "replicas", cfg.Worker.Replicas, replicasUsage+" (env TOOLGATE_REPLICAS)")
	f.DurationVar(&cfg.Worker.Wait, "wait", cfg.Worker.Wait, waitUsage+" (env TOOLGATE_WAIT)")
	f.StringVar(&cfg.Data, "data", cfg.Data, "directory of the deployment's secrets: link-secret, admin-key, dev-key (env TOOLGATE_DATA)")
	f.StringVar(&cfg.Export, "export", cfg.Export, "directory the admin key and the dev key are copied to (env TOOLGATE_EXPORT; empty: none)")
	return cmd
}

// runBootstrap sets the deployment up and says where the keys are.
func runBootstrap(ctx context.Context, cfg bootstrapConfig, out io.Writer, log *slog.Logger) error {
	nc, ctx, stop, err := connectNATS(ctx, cfg.Worker.NATS, "toolgate-bootstrap", cfg.Worker.NATSAuth, cfg.Worker.Wait, log)
	if err != nil {
		return fmt.Errorf("bootstrap: %w", err)
	}
	defer nc.Close()
	defer stop()
	setup, cancel := context.WithTimeout(ctx, max(registryWait, cfg.Worker.Wait))
	defer cancel()
	store, err := registry.Open(setup, nc, registry.Options{Replicas: cfg.Worker.Replicas})
	if err != nil {
		return fmt.Errorf("bootstrap: %w", err)
	}
	st, err := setupDev(setup, cfg.Data, store)
	if err != nil {
		return fmt.Errorf("bootstrap: %w", err)
	}
	for _, name := range []string{"link-secret", "admin-key", "dev-key", credentialsKeyFile} {
		if err := giveToDirOwner(filepath.Join(cfg.Data, name)); err != nil {
			return fmt.Errorf("bootstrap: data: %w", err)
		}
	}
	where := cfg.Data
	if cfg.Export != "" {
		for name, secret := range map[string]string{"admin-key": st.adminKey, "dev-key": st.key} {
			if err := exportSecret(filepath.Join(cfg.Export, name), secret); err != nil {
				return fmt.Errorf("bootstrap: export: %w", err)
			}
		}
		where = cfg.Export
	}
	how := "kept"
	if st.keyCreated {
		how = "new"
	}
	fmt.Fprintf(out, "toolgate bootstrap: account %q ready, connected to %s; its API key (%s) is in %s, the admin key in %s\n",
		devAccount, strings.Join(devTools, ", "), how, filepath.Join(where, "dev-key"), filepath.Join(where, "admin-key"))
	return nil
}

// exportSecret keeps a copy of secret at path, mode 0600, belonging to the owner of
// its directory; a copy that is already right is left alone.
func exportSecret(path, secret string) error {
	if have, err := readSecretFile(path); err != nil || have != secret {
		if err := os.MkdirAll(filepath.Dir(path), 0o700); err != nil {
			return err
		}
		if err := writeSecretFile(path, secret); err != nil {
			return err
		}
	}
	if err := os.Chmod(path, 0o600); err != nil {
		return err
	}
	return giveToDirOwner(path)
}
