package main

import (
	"fmt"
	"io"

	"github.com/spf13/cobra"
)

func newUninstallCmd() *cobra.Command {
	cfg := defaultInstallConfig()
	cmd := &cobra.Command{
		Use:   "uninstall <tool-id> --client <name>",
		Short: "Take one tool out of one MCP client's configuration",
		Long: `Uninstall removes the tool's entry from the client's configuration and keeps
everything else; the previous file is saved as <file>.bak.`,
		Args: cobra.ExactArgs(1),
		RunE: func(cmd *cobra.Command, args []string) error {
			if err := runUninstall(cmd.OutOrStdout(), cfg, args[0]); err != nil {
				return fmt.Errorf("uninstall: %w", err)
			}
			return nil
		},
	}
	f := cmd.Flags()
	f.StringVar(&cfg.Client, "client", "", "the MCP client to change (see toolgate install --list-clients)")
	f.StringVar(&cfg.Scope, "scope", cfg.Scope, "user, or project for the configuration in the current directory")
	f.StringVar(&cfg.Name, "name", "", "the name the tool is listed under (default: the tool id)")
	f.BoolVar(&cfg.DryRun, "dry-run", false, "print what would be written, and where, without writing it")
	return cmd
}

func runUninstall(out io.Writer, cfg installConfig, toolID string) error {
	target, err := cfg.target(toolID)
	if err != nil {
		return err
	}
	name := cfg.name(toolID)
	ch, err := target.Uninstall(name)
	if err != nil {
		return err
	}
	title := target.Client.Title()
	if ch.Empty() {
		fmt.Fprintf(out, "%q is not in %s's configuration (%s); nothing changed.\n", name, title, ch.Path)
		return nil
	}
	if cfg.DryRun {
		fmt.Fprintf(out, "Would write %s:\n%s", ch.Path, ch.After)
		return nil
	}
	backup, err := ch.Apply()
	if err != nil {
		return err
	}
	fmt.Fprintf(out, "Removed %q from %s.\n  wrote %s\n  previous version saved as %s\n", name, title, ch.Path, backup)
	return nil
}
