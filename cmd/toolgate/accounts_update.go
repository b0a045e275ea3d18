package main

import (
	"errors"
	"fmt"
	"net/http"
	"net/url"
	"strconv"
	"strings"

	"github.com/spf13/cobra"
	"github.com/spf13/pflag"

	"github.com/toolgate/toolgate/edge"
	"github.com/toolgate/toolgate/registry"
)

// accountsUpdateLong is accounts update's help.
const accountsUpdateLong = `Change an account's name or limits. Only the flags given change; a limit set to 0
is the edge's default again. Every edge applies a changed limit to its next call
once its view of the registry has it, within about a second.

--quota gives one quota rule as comma-separated name=value pairs: scope (account,
the default, or key), key_id (a rule of scope key counts that key only; without it,
each key apart), tool, method, and the limits per_minute, per_day, per_month (calendar
windows in UTC) and concurrent (calls at once), for example
  --quota 'tool=email,method=send_email,per_minute=100,per_day=5000'
The rules given replace the account's; --clear-quotas removes them all.

--approval gives one approval rule the same way: tool, method (a method's name, or
'*' for every method of the tool) and expires_in (seconds the call waits for a
person's decision; the edge's --approval-expiry when absent), for example
  --approval 'tool=email,method=send_email,expires_in=600'
A call the rule names is answered 202 and runs only once a person approved it
(toolgate approvals, or the dashboard). The rules given replace the account's;
--clear-approvals removes them all.

--audit-arguments and --audit-result keep a call's arguments and result in its
audit record (without the fields the method's schemas mark secret), each cut at
--audit-max-data-size bytes; --audit-required refuses a call whose record cannot be
written (503 audit_unavailable).`

// newAccountsUpdateCmd changes an account's name or limits while the edges run: only
// the flags given are sent, so the others keep their values.
func newAccountsUpdateCmd(c *adminClient) *cobra.Command {
	var (
		name           string
		rate           float64
		burst, session int
		rules          ruleFlags
		au             auditFlags
		payloadBytes   int64
		requireSignIn  bool
	)
	cmd := &cobra.Command{
		Use:   "update ID",
		Short: "Change an account's name or limits; every edge applies a new limit within seconds",
		Long:  accountsUpdateLong,
		Args:  cobra.ExactArgs(1),
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
			if f.Changed("payload-bytes") {
				u.Limits.Value.PayloadBytes = edge.Value(payloadBytes)
			}
			if err := rules.apply(&u.Limits.Value); err != nil {
				return err
			}
			if f.Changed("require-sign-in") {
				u.RequireSignIn = edge.Value(requireSignIn)
			}
			l := u.Limits.Value
			u.Limits.Set = !l.Rate.IsZero() || !l.Burst.IsZero() || !l.Sessions.IsZero() || !l.PayloadBytes.IsZero() ||
				!l.Quotas.IsZero() || !l.Approvals.IsZero()
			u.Audit = au.update(f)
			if u.Name.IsZero() && u.Limits.IsZero() && u.Audit.IsZero() && u.RequireSignIn.IsZero() {
				return errors.New("accounts update: nothing to change: give --name, --rate, --burst, --sessions, --payload-bytes, --quota, --clear-quotas, --approval, --clear-approvals, --require-sign-in or an --audit-* flag")
			}
			return c.print(cmd, http.MethodPatch, "/accounts/"+url.PathEscape(args[0]), u)
		},
	}
	cmd.Flags().StringVar(&name, "name", "", "the account's name")
	cmd.Flags().BoolVar(&requireSignIn, "require-sign-in", false, "the account's links answer only callers that signed in (OAuth) or send an API key (--require-sign-in=false: bare links work again)")
	cmd.Flags().Float64Var(&rate, "rate", 0, "tool calls per second per key (0: the edge's default)")
	cmd.Flags().IntVar(&burst, "burst", 0, "calls a key may make at once above the rate (0: the edge's default)")
	cmd.Flags().IntVar(&session, "sessions", 0, "concurrent MCP sessions (0: the default)")
	cmd.Flags().Int64Var(&payloadBytes, "payload-bytes", 0, "largest request or reply of a tool call, in bytes, below the edges' --max-payload-bytes (0: theirs)")
	cmd.Flags().StringArrayVar(&rules.quotas, "quota", nil, "a quota rule, such as 'tool=email,method=send_email,per_minute=100' (repeat; replaces the account's rules)")
	cmd.Flags().BoolVar(&rules.clearQuotas, "clear-quotas", false, "remove the account's quota rules")
	cmd.Flags().StringArrayVar(&rules.approvals, "approval", nil, "an approval rule, such as 'tool=email,method=send_email,expires_in=600' (repeat; replaces the account's rules)")
	cmd.Flags().BoolVar(&rules.clearApprovals, "clear-approvals", false, "remove the account's approval rules")
	au.register(cmd)
	return cmd
}

// ruleFlags are the rule lists of accounts update: each given replaces the account's.
type ruleFlags struct {
	quotas, approvals           []string
	clearQuotas, clearApprovals bool
}

func (f ruleFlags) apply(l *edge.LimitsUpdate) error {
	switch {
	case f.clearQuotas && len(f.quotas) > 0:
		return errors.New("accounts update: give --quota or --clear-quotas, not both")
	case f.clearQuotas:
		l.Quotas = edge.Value([]registry.Quota{})
	case len(f.quotas) > 0:
		rules, err := parseQuotas(f.quotas)
		if err != nil {
			return err
		}
		l.Quotas = edge.Value(rules)
	}
	switch {
	case f.clearApprovals && len(f.approvals) > 0:
		return errors.New("accounts update: give --approval or --clear-approvals, not both")
	case f.clearApprovals:
		l.Approvals = edge.Value([]registry.ApprovalRule{})
	case len(f.approvals) > 0:
		rules := make([]registry.ApprovalRule, 0, len(f.approvals))
		for _, spec := range f.approvals {
			r, err := parseApprovalRule(spec)
			if err != nil {
				return fmt.Errorf("accounts update: --approval %q: %w", spec, err)
			}
			rules = append(rules, r)
		}
		l.Approvals = edge.Value(rules)
	}
	return nil
}

// parseApprovalRule reads one --approval; the edge checks the rule itself.
func parseApprovalRule(spec string) (registry.ApprovalRule, error) {
	var r registry.ApprovalRule
	for pair := range strings.SplitSeq(spec, ",") {
		name, value, ok := strings.Cut(strings.TrimSpace(pair), "=")
		if !ok {
			return r, fmt.Errorf("%q: want name=value", pair)
		}
		switch name {
		case "tool":
			r.Tool = value
		case "method":
			r.Method = value
		case "expires_in":
			n, err := strconv.Atoi(value)
			if err != nil {
				return r, fmt.Errorf("expires_in: %q is not a whole number of seconds", value)
			}
			r.ExpiresIn = n
		default:
			return r, fmt.Errorf("%s: not a field of an approval rule (tool, method, expires_in)", name)
		}
	}
	return r, nil
}

// auditFlags are the flags of an account's audit settings.
type auditFlags struct {
	arguments, result, required bool
	maxDataSize                 int
}

func (a *auditFlags) register(cmd *cobra.Command) {
	cmd.Flags().BoolVar(&a.arguments, "audit-arguments", false, "keep each call's arguments in its audit record, secret fields left out (=false to stop)")
	cmd.Flags().BoolVar(&a.result, "audit-result", false, "keep each call's result in its audit record, secret fields left out (=false to stop)")
	cmd.Flags().IntVar(&a.maxDataSize, "audit-max-data-size", 0, "bytes of the arguments and of the result an audit record keeps, each (0: 4096)")
	cmd.Flags().BoolVar(&a.required, "audit-required", false, "refuse a call whose audit record cannot be written (=false to serve it and count the record lost)")
}

// update is the audit settings' patch of the flags given.
func (a *auditFlags) update(f *pflag.FlagSet) edge.Field[edge.AuditUpdate] {
	var u edge.AuditUpdate
	if f.Changed("audit-arguments") {
		u.IncludeArguments = edge.Value(a.arguments)
	}
	if f.Changed("audit-result") {
		u.IncludeResult = edge.Value(a.result)
	}
	if f.Changed("audit-max-data-size") {
		u.MaxDataSize = edge.Value(a.maxDataSize)
	}
	if f.Changed("audit-required") {
		u.Required = edge.Value(a.required)
	}
	set := !u.IncludeArguments.IsZero() || !u.IncludeResult.IsZero() || !u.MaxDataSize.IsZero() || !u.Required.IsZero()
	return edge.Field[edge.AuditUpdate]{Set: set, Value: u}
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
