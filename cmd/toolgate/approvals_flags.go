package main

import (
	"context"
	"time"

	"github.com/spf13/pflag"

	"github.com/toolgate/toolgate/approvals"
)

// addApprovalFlags are the flags of `toolgate edge` for the calls held for a person's
// approval.
func addApprovalFlags(f *pflag.FlagSet, c *approvals.Config) {
	f.DurationVar(&c.Expiry, "approval-expiry", c.Expiry, "how long a call an account's approval rule holds waits for a person's decision, when the rule names no time; past it the call fails with approval_expired")
	f.DurationVar(&c.MaxExpiry, "approval-max-expiry", c.MaxExpiry, "the longest wait an approval rule may name (at most "+approvals.DefaultMaxExpiry.String()+"); the admin API refuses a longer one, and a rule set longer before is cut to it")
	f.StringVar(&c.Webhook.URL, "approval-webhook", c.Webhook.URL, "URL POSTed a JSON announcement of each new pending approval (empty: none)")
	f.DurationVar(&c.Webhook.Timeout, "approval-webhook-timeout", c.Webhook.Timeout, "how long each POST to --approval-webhook may take")
	f.IntVar(&c.Webhook.Attempts, "approval-webhook-attempts", c.Webhook.Attempts, "how many times an announcement is POSTed before it is given up (logged)")
}

// closeApprovals waits for the webhook's announcements under way, for as long as the
// edge gives calls in flight at shutdown.
func closeApprovals(a *approvals.Approvals, wait time.Duration) {
	ctx, cancel := context.WithTimeout(context.Background(), max(wait, time.Second))
	defer cancel()
	a.Close(ctx)
}
