package main

import (
	"errors"
	"fmt"
	"os"
	"time"

	"github.com/spf13/cobra"

	"github.com/toolgate/toolgate/busauth"
)

func newCredsIssueCmd(dir *string) *cobra.Command {
	var out, name string
	var expiresIn time.Duration
	cmd := &cobra.Command{
		Use:   "issue TOOL [TOOL...] -o FILE",
		Short: "Issue a tool team's credentials: its workers may serve its tools and do nothing else",
		Long: `Issue the credentials file of a new NATS user that may serve the given tools and
nothing else on the bus: take the tools' calls in their queue groups, answer them,
report progress, follow cancels, write the tools' own records and presence. Give the
file to the tool team; their workers connect with it (toolgate worker ... --nats-creds
FILE, or nats.UserCredentials(FILE) in their own code). Each issue is a new user,
recorded in --dir's issued.json; toolgate creds revoke takes it away again.`,
		Example: `  toolgate creds issue email -o email.creds
  toolgate creds issue email echo clock -o demo.creds   # one worker process serving three tools`,
		Args: cobra.MinimumNArgs(1),
		RunE: func(cmd *cobra.Command, tools []string) error {
			if out == "" {
				return errors.New("creds issue: -o: required (a file, or - for standard output)")
			}
			if out != "-" {
				if _, err := os.Stat(out); err == nil {
					return fmt.Errorf("creds issue: -o: %s exists; give another file or remove it", out)
				}
			}
			d, err := busauth.Open(*dir)
			if err != nil {
				return err
			}
			creds, g, err := d.IssueWorker(tools, name, expiresIn)
			if err != nil {
				return err
			}
			if err := giveTreeToDirOwner(d.Dir()); err != nil { // the record, rewritten
				return fmt.Errorf("creds issue: %w", err)
			}
			if out == "-" {
				_, err := cmd.OutOrStdout().Write(creds)
				return err
			}
			if err := writeCreds(out, creds); err != nil {
				return fmt.Errorf("creds issue: -o: %w", err)
			}
			fmt.Fprintf(cmd.OutOrStdout(), "creds: wrote %s (mode 0600): user %s for %v\n", out, g.User, g.Tools)
			return nil
		},
	}
	cmd.Flags().StringVarP(&out, "output", "o", "", "the credentials file to write (mode 0600; - for standard output)")
	cmd.Flags().StringVar(&name, "name", "", "what the credentials are for (default worker-<tools>)")
	cmd.Flags().DurationVar(&expiresIn, "expires-in", 0, "how long the credentials are valid (0: until revoked)")
	return cmd
}

// writeCreds writes a credentials file that must not exist yet, mode 0600, belonging
// to the owner of its directory.
func writeCreds(path string, creds []byte) error {
	f, err := os.OpenFile(path, os.O_WRONLY|os.O_CREATE|os.O_EXCL, 0o600)
	if err != nil {
		return err
	}
	if _, err := f.Write(creds); err != nil {
		f.Close()
		return err
	}
	if err := f.Close(); err != nil {
		return err
	}
	return giveToDirOwner(path)
}
