package main

import (
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"net/http"
	"os"
	"strings"

	"github.com/spf13/cobra"

	"github.com/toolgate/toolgate/credentials"
)

// maxCredentialsFile bounds the values file `tools credentials set` reads.
const maxCredentialsFile = 64 << 10

// toolsCredentialsCmd is `toolgate tools credentials`: a connection's values, set
// from a file or standard input (never from the command line, where other users of
// the machine see them), shown as names and fingerprints, cleared.
func toolsCredentialsCmd(c *adminClient) *cobra.Command {
	cmd := &cobra.Command{Use: "credentials", Short: "Set, show or clear the credentials of an account's connection to a tool"}
	var from string
	var patch bool
	set := &cobra.Command{Use: "set ACCOUNT TOOL --from-file FILE", Args: cobra.ExactArgs(2),
		Short: "Set a connection's credentials from a JSON object of field values in FILE (- for standard input)",
		Long: `Set a connection's credentials from a JSON object of field values, read from
FILE or, with --from-file -, from standard input: {"token": "..."}. Every field the
tool does not declare is refused. Without --patch the object replaces every value;
with it, only the fields it names change, and a field given null is removed.
The answer shows the fields' names, when each was set and a fingerprint, never a value.`,
		RunE: func(cmd *cobra.Command, args []string) error {
			body, err := readValuesFile(cmd, from)
			if err != nil {
				return err
			}
			method := http.MethodPut
			if patch {
				method = http.MethodPatch
			}
			return c.print(cmd, method, credentialsPath(args), json.RawMessage(body))
		}}
	set.Flags().StringVar(&from, "from-file", "", "file holding a JSON object of field values, - for standard input (required)")
	set.Flags().BoolVar(&patch, "patch", false, "change only the fields the object names (null removes one)")
	_ = set.MarkFlagRequired("from-file")
	show := &cobra.Command{Use: "show ACCOUNT TOOL", Args: cobra.ExactArgs(2),
		Short: "Show a connection's fields: which are set, when, and their fingerprints",
		RunE: func(cmd *cobra.Command, args []string) error {
			return c.print(cmd, http.MethodGet, credentialsPath(args), nil)
		}}
	clearCmd := &cobra.Command{Use: "clear ACCOUNT TOOL", Args: cobra.ExactArgs(2),
		Short: "Remove every value of a connection",
		RunE: func(cmd *cobra.Command, args []string) error {
			return c.print(cmd, http.MethodDelete, credentialsPath(args), nil)
		}}
	cmd.AddCommand(set, show, clearCmd)
	return cmd
}

func credentialsPath(args []string) string { return connectionPath(args) + "/credentials" }

// readValuesFile reads the values file (or standard input for "-"): a JSON object,
// whose text no error repeats.
func readValuesFile(cmd *cobra.Command, path string) ([]byte, error) {
	var r io.Reader = cmd.InOrStdin()
	if path != "-" {
		f, err := os.Open(path)
		if err != nil {
			return nil, err
		}
		defer f.Close()
		r = f
	}
	b, err := io.ReadAll(io.LimitReader(r, maxCredentialsFile+1))
	if err != nil {
		return nil, err
	}
	if len(b) > maxCredentialsFile {
		return nil, fmt.Errorf("credentials: %s: larger than %d bytes", path, maxCredentialsFile)
	}
	var obj map[string]json.RawMessage
	if !json.Valid(b) || json.Unmarshal(b, &obj) != nil || obj == nil {
		return nil, fmt.Errorf("credentials: %s: not a JSON object of field values", path)
	}
	return b, nil
}

// newCredentialsCmd is `toolgate credentials`: the deployment's key-encryption keys.
func newCredentialsCmd() *cobra.Command {
	cmd := adminCmd("credentials", "Manage the key-encryption keys of the connections' credentials",
		func(c *adminClient) *cobra.Command {
			return &cobra.Command{Use: "rotate-key", Args: cobra.NoArgs,
				Short: "Wrap every connection's credentials, and the OAuth signing keys, again under the edges' current key",
				Long: `Wrap every connection's credentials again under the current key (the first of
the edges' --credentials-key-file), leaving the values' ciphertext as it is; and the
OAuth token signing keys in tg-oauth-keys too (sealing any stored unencrypted).

To rotate without downtime: put a new key first in the key file (toolgate
credentials add-key FILE), keeping the old one after it; restart the edges one by
one (each opens records of either key, and writes under the new one); run this;
then remove the old key from the file and restart the edges again.`,
				RunE: func(cmd *cobra.Command, _ []string) error {
					return c.print(cmd, http.MethodPost, "/credentials/rotate-key", nil)
				}}
		})
	cmd.AddCommand(&cobra.Command{Use: "add-key FILE", Args: cobra.ExactArgs(1),
		Short: "Put a new key first in a key file (made, mode 0600, if missing), the keys it holds kept after it",
		RunE: func(cmd *cobra.Command, args []string) error {
			return addKey(args[0], cmd.OutOrStdout())
		}})
	return cmd
}

// addKey puts a fresh key first in the key file at path.
func addKey(path string, out io.Writer) error {
	have, err := os.ReadFile(path)
	if err != nil && !errors.Is(err, os.ErrNotExist) {
		return err
	}
	if len(have) > 0 {
		if _, err := credentials.ReadKeyFile(path); err != nil {
			return err
		}
	}
	line := credentials.NewKeyLine()
	if err := writeSecretFile(path, strings.TrimSpace(line+"\n"+string(have))); err != nil {
		return err
	}
	id, _, _ := strings.Cut(line, " ")
	fmt.Fprintf(out, "key %s is first in %s; restart the edges, then run toolgate credentials rotate-key\n", id, path)
	return nil
}

// credentialsKeyFile is the name of the key-encryption key file in a data directory
// (toolgate dev's, the bootstrap's).
const credentialsKeyFile = "credentials-key"
