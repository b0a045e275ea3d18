package main

import (
	"errors"
	"fmt"
	"net/http"
	"net/url"
	"strconv"
	"strings"

	"github.com/spf13/cobra"

	"github.com/toolgate/toolgate/edge"
	"github.com/toolgate/toolgate/registry"
)

// newAccountsUpdateCmd changes an account's name or limits while the edges run: only
// the flags given are sent, so the others keep their values.
func newAccountsUpdateCmd(c *adminClient) *cobra.Command {
	var (
		name           string
		rate           float64
		burst, session int
		quotas         []string
		clearQuotas    bool
		requireSignIn  bool
	)
	cmd := &cobra.Command{
		Use:   "update ID",
		Short: "Change an account's name or limits; every edge applies a new limit within seconds",
		Long: `Change an account's name or limits. Only the flags given change; a limit set to 0
is the edge's default again. Every edge applies a changed limit to its next call
once its view of the registry has it, within about a second.

--quota gives one quota rule as comma-separated name=value pairs: scope (account,
the default, or key), key_id (a rule of scope key counts that key only; without it,
each key apart), tool, method, and the limits per_minute, per_day, per_month (calendar
windows in UTC) and concurrent (calls at once), for example
  --quota 'tool=email,method=send_email,per_minute=100,per_day=5000'
The rules given replace the account's; --clear-quotas removes them all.`,
		Args: cobra.ExactArgs(1),
		RunE: func(cmd *cobra.Command, args []string) error {
			var u edge.AccountUpdate
			f := cmd.Flags()
			if f.Changed("name") {
				u.Name = edge.Value(name)
			}
			if f.Changed("rate") {
				u.Limits.Value.Rate = edge.Value(rate)
			}
			if f.Changed("burst") {
				u.Limits.Value.Burst = edge.Value(burst)
			}
			if f.Changed("sessions") {
				u.Limits.Value.Sessions = edge.Value(session)
			}
			switch {
			case clearQuotas && len(quotas) > 0:
				return errors.New("accounts update: give --quota or --clear-quotas, not both")
			case clearQuotas:
				u.Limits.Value.Quotas = edge.Value([]registry.Quota{})
			case len(quotas) > 0:
				rules, err := parseQuotas(quotas)
				if err != nil {
					return err
				}
				u.Limits.Value.Quotas = edge.Value(rules)
			}
			if f.Changed("require-sign-in") {
				u.RequireSignIn = edge.Value(requireSignIn)
			}
			l := u.Limits.Value
			u.Limits.Set = !l.Rate.IsZero() || !l.Burst.IsZero() || !l.Sessions.IsZero() || !l.Quotas.IsZero()
			if u.Name.IsZero() && u.Limits.IsZero() && u.RequireSignIn.IsZero() {
				return errors.New("accounts update: nothing to change: give --name, --rate, --burst, --sessions, --quota, --clear-quotas or --require-sign-in")
			}
			return c.print(cmd, http.MethodPatch, "/accounts/"+url.PathEscape(args[0]), u)
		},
	}
	cmd.Flags().StringVar(&name, "name", "", "the account's name")
	cmd.Flags().BoolVar(&requireSignIn, "require-sign-in", false, "the account's links answer only callers that signed in (OAuth) or send an API key (--require-sign-in=false: bare links work again)")
	cmd.Flags().Float64Var(&rate, "rate", 0, "tool calls per second per key (0: the edge's default)")
	cmd.Flags().IntVar(&burst, "burst", 0, "calls a key may make at once above the rate (0: the edge's default)")
	cmd.Flags().IntVar(&session, "sessions", 0, "concurrent MCP sessions (0: the default)")
	cmd.Flags().StringArrayVar(&quotas, "quota", nil, "a quota rule, such as 'tool=email,method=send_email,per_minute=100' (repeat; replaces the account's rules)")
	cmd.Flags().BoolVar(&clearQuotas, "clear-quotas", false, "remove the account's quota rules")
	return cmd
}

// parseQuotas reads --quota flags, each a rule as name=value pairs; the edge checks
// the rules themselves.
func parseQuotas(specs []string) ([]registry.Quota, error) {
	rules := make([]registry.Quota, 0, len(specs))
	for _, spec := range specs {
		q, err := parseQuota(spec)
		if err != nil {
			return nil, fmt.Errorf("accounts update: --quota %q: %w", spec, err)
		}
		rules = append(rules, q)
	}
	return rules, nil
}

func parseQuota(spec string) (registry.Quota, error) {
	var q registry.Quota
	for pair := range strings.SplitSeq(spec, ",") {
		name, value, ok := strings.Cut(strings.TrimSpace(pair), "=")
		if !ok {
			return q, fmt.Errorf("%q: want name=value", pair)
		}
		var err error
		switch name {
		case "scope":
			q.Scope = value
		case "key_id":
			q.KeyID = value
		case "tool":
			q.Tool = value
		case "method":
			q.Method = value
		case "per_minute":
			q.PerMinute, err = strconv.ParseInt(value, 10, 64)
		case "per_day":
			q.PerDay, err = strconv.ParseInt(value, 10, 64)
		case "per_month":
			q.PerMonth, err = strconv.ParseInt(value, 10, 64)
		case "concurrent":
			q.Concurrent, err = strconv.Atoi(value)
		default:
			return q, fmt.Errorf("%s: not a field of a quota (scope, key_id, tool, method, per_minute, per_day, per_month, concurrent)", name)
		}
		if err != nil {
			return q, fmt.Errorf("%s: %q is not a whole number", name, value)
		}
	}
	if q.Scope == "" {
		q.Scope = registry.QuotaAccount
		if q.KeyID != "" {
			q.Scope = registry.QuotaKey
		}
	}
	return q, nil
}
