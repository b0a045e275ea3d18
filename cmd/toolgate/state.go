package main

import (
	"context"
	"errors"
	"fmt"
	"log/slog"
	"os"
	"strconv"
	"time"

	"github.com/nats-io/nats.go"
	"github.com/spf13/cobra"
	"github.com/toolgate/toolgate/workers"

	"github.com/toolgate/toolgate/bus/wire"
	"github.com/toolgate/toolgate/registry"
)

func newStateCmd() *cobra.Command {
	cmd := &cobra.Command{
		Use:   "state",
		Short: "Make the state buckets of tools whose workers keep state",
	}
	cmd.AddCommand(newStateCreateCmd())
	return cmd
}

func newStateCreateCmd() *cobra.Command {
	cfg := defaultWorkerConfig()
	var maxBytes int64
	if v, ok := os.LookupEnv("TOOLGATE_STATE_MAX_BYTES"); ok {
		n, err := strconv.ParseInt(v, 10, 64)
		if err != nil {
			n = -1 // Validate names the bad value
		}
		maxBytes = n
	}
	cmd := &cobra.Command{
		Use:   "create TOOL [TOOL...]",
		Short: "Make a tool's state bucket, which its workers (and nothing else) may use; keeps what exists",
		Long: `Make each tool's state bucket, tg-state-TOOL: a JetStream key-value bucket that the
tool's workers keep their state in (workers.Worker.State in the SDK), with the
credentials toolgate creds issue gives them, and that no other tool's credentials
reach. A tool's workers may read and write it but not make it, change its settings or
delete it: that is this command's, run with the admin role's credentials. A bucket
that exists is kept as it is.`,
		Example: `  toolgate state create weather --nats tls://nats-1:4222 --nats-creds admin.creds --nats-tls-ca ca.pem --replicas 3`,
		Args:    cobra.MinimumNArgs(1),
		RunE: func(cmd *cobra.Command, tools []string) error {
			o := registry.StateOptions{Replicas: cfg.Replicas, MaxBytes: maxBytes}
			if err := o.Validate(); err != nil {
				return err
			}
			if err := cfg.Validate(); err != nil {
				return fmt.Errorf("state create: %w", err)
			}
			for _, t := range tools {
				if err := wire.CheckToolID(t); err != nil {
					return fmt.Errorf("state create: %w", err)
				}
			}
			log := slog.New(slog.NewJSONHandler(cmd.ErrOrStderr(), nil))
			nc, ctx, stop, err := connectNATS(cmd.Context(), cfg.NATS, "toolgate-state", cfg.NATSAuth, cfg.Wait, log)
			if err != nil {
				return fmt.Errorf("state create: %w", err)
			}
			defer nc.Close()
			defer stop()
			ctx, cancel := context.WithTimeout(ctx, max(registryWait, cfg.Wait))
			defer cancel()
			for _, t := range tools {
				made, err := registry.CreateToolState(ctx, nc, t, o)
				if err != nil {
					return lost(ctx, fmt.Errorf("state create: %w (it needs the admin role's credentials)", err))
				}
				how := "kept"
				if made {
					how = "made"
				}
				fmt.Fprintf(cmd.OutOrStdout(), "state: %s %s, for the workers of %s\n", how, wire.StateBucket(t), t)
			}
			return nil
		},
	}
	f := cmd.Flags()
	f.StringVar(&cfg.NATS, "nats", cfg.NATS, "NATS URL, or several comma-separated (env TOOLGATE_NATS)")
	addNATSAuthFlags(f, &cfg.NATSAuth)
	f.Lookup("nats-creds").Usage = "the admin role's credentials file (creds/admin.creds of toolgate creds init) (env TOOLGATE_NATS_CREDS)"
	f.IntVar(&cfg.Replicas, "replicas", cfg.Replicas, "replicas of a bucket made: 1 on a single node, 3 in a cluster (env TOOLGATE_REPLICAS; 0: 1)")
	f.Int64Var(&maxBytes, "max-bytes", maxBytes, fmt.Sprintf("how many bytes a bucket made holds at most, up to %d; writes past it are refused (env TOOLGATE_STATE_MAX_BYTES; 0: %d)", int64(registry.MaxStateMaxBytes), registry.DefaultStateMaxBytes))
	f.DurationVar(&cfg.Wait, "wait", cfg.Wait, waitUsage+" (env TOOLGATE_WAIT)")
	return cmd
}

// waitForState waits up to wait for tool's state bucket, which an admin makes, and says
// once that it waits. The worker asks an edge (it has no JetStream reach of its own),
// so it waits for an edge too.
func waitForState(ctx context.Context, nc *nats.Conn, tool string, wait time.Duration, log *slog.Logger) error {
	deadline := time.Now().Add(wait)
	logged := false
	for {
		attempt, cancel := context.WithTimeout(ctx, 5*time.Second)
		st, err := workers.New(nc, workers.Tool{ID: tool}).State(attempt)
		cancel()
		if err == nil {
			st.Close()
			return nil
		}
		if time.Now().After(deadline) || ctx.Err() != nil {
			if errors.Is(err, workers.ErrNoState) {
				return fmt.Errorf("state of %s: %s is missing; an admin makes it (toolgate state create %s, or toolgate bootstrap for the demo tools)", tool, wire.StateBucket(tool), tool)
			}
			return fmt.Errorf("state of %s: %w (is an edge running?)", tool, err)
		}
		if !logged {
			log.Info("waiting for the tool's state bucket", "tool", tool, "bucket", wire.StateBucket(tool), "err", err)
			logged = true
		}
		select {
		case <-ctx.Done():
		case <-time.After(time.Second):
		}
	}
}
