package main

import (
	"context"
	"encoding/json"
	"fmt"
	"io"
	"net/http"
	"net/url"
	"strconv"
	"strings"
	"time"

	"github.com/spf13/cobra"

	"github.com/toolgate/toolgate/audit"
)

// auditFollowEvery is how often `toolgate audit --follow` asks for new records.
const auditFollowEvery = time.Second

// auditCmd reads the audit trail: the records a filter picks, then, with --follow,
// each new one as it is written, like tail -f.
type auditCmd struct {
	client *adminClient
	filter url.Values
	follow bool
	json   bool
}

func newAuditCmd() *cobra.Command {
	a := &auditCmd{filter: url.Values{}}
	var kind, account, tool, method, outcome, user, client, since, until string
	cmd := &cobra.Command{
		Use:   "audit",
		Short: "Read the audit trail: who called what, how it ended, and the admin changes",
		Long: `Prints the records, oldest first, one a line (--json: as JSON lines, to export).
--since and --until take an RFC 3339 time or a duration before now (5m, 24h).`,
		Args: cobra.NoArgs,
		RunE: func(cmd *cobra.Command, _ []string) error {
			for name, v := range map[string]string{"kind": kind, "account": account, "tool": tool, "method": method,
				"outcome": outcome, "user": user, "client": client, "since": since, "until": until} {
				if v != "" {
					a.filter.Set(name, v)
				}
			}
			return a.run(cmd.Context(), cmd.OutOrStdout())
		},
	}
	a.client = withAdminFlags(cmd)
	f := cmd.Flags()
	f.StringVar(&kind, "kind", "", "call or admin")
	f.StringVar(&account, "account", "", "only this account's records")
	f.StringVar(&tool, "tool", "", "only this tool's records")
	f.StringVar(&method, "method", "", "only this method's records (a tool's method, an MCP method, an admin change)")
	f.StringVar(&outcome, "outcome", "", "only records that ended so: ok, or an error code (rate_limited, tool_error, ...)")
	f.StringVar(&user, "user", "", "only the records of this user of the account (its calls, its dashboard changes as the record's user)")
	f.StringVar(&client, "client", "", "only the records of calls made with tokens of this OAuth client (its client_id)")
	f.StringVar(&since, "since", "", "only records stored since then")
	f.StringVar(&until, "until", "", "only records stored until then")
	f.BoolVarP(&a.follow, "follow", "f", false, "go on printing new records as they are written, until interrupted")
	f.BoolVar(&a.json, "json", false, "print each record as a line of JSON")
	return cmd
}

// run prints what the filter picks, page by page, then follows.
func (a *auditCmd) run(ctx context.Context, out io.Writer) error {
	a.filter.Set("limit", strconv.Itoa(audit.MaxLimit))
	for {
		page, err := a.read(ctx)
		if err != nil {
			if a.follow && ctx.Err() != nil {
				return nil // interrupted
			}
			return err
		}
		for _, r := range page.Records {
			if err := a.print(out, r); err != nil {
				return err
			}
		}
		// The cursor replaces the time it started from.
		a.filter.Set("after", strconv.FormatUint(page.Next, 10))
		if page.More {
			continue
		}
		if !a.follow {
			return nil
		}
		select {
		case <-ctx.Done():
			return nil
		case <-time.After(auditFollowEvery):
		}
	}
}

func (a *auditCmd) read(ctx context.Context) (audit.Page, error) {
	var page audit.Page
	_, body, err := a.client.do(ctx, http.MethodGet, "/audit?"+a.filter.Encode(), nil)
	if err != nil {
		return page, err
	}
	if err := json.Unmarshal(body, &page); err != nil {
		return page, fmt.Errorf("audit: the edge's answer: %w", err)
	}
	return page, nil
}

// print writes one record: as JSON, or as one line a person reads.
func (a *auditCmd) print(out io.Writer, r audit.Record) error {
	if a.json {
		b, err := json.Marshal(r)
		if err != nil {
			return err
		}
		_, err = fmt.Fprintf(out, "%s\n", b)
		return err
	}
	_, err := fmt.Fprintln(out, recordLine(r))
	return err
}

// recordLine is r as one line: when, what, who, how it ended, how long it took.
func recordLine(r audit.Record) string {
	what := strings.TrimPrefix(r.Tool+"/"+r.Method, "/")
	who := "link"
	switch {
	case r.By != "": // a dashboard change: who made it (Key is then the key it made or revoked)
		who = r.By
	case r.Key != "":
		who = r.Key
	case r.Kind == audit.KindAdmin:
		who = "admin"
	}
	fields := []string{r.Time.UTC().Format(time.RFC3339Nano), r.Kind, r.Account, what, r.Transport, r.Outcome}
	if r.Status != 0 {
		fields = append(fields, strconv.Itoa(r.Status))
	}
	fields = append(fields, (time.Duration(r.LatencyUS) * time.Microsecond).String(), who, "edge="+r.Edge)
	named := [][2]string{{"user", r.User}, {"client", r.Client}, {"worker", r.Worker}}
	if r.By != "" {
		named = append(named, [2]string{"key", r.Key}) // the key a dashboard change made or revoked
	}
	for _, f := range named {
		if f[1] != "" {
			fields = append(fields, f[0]+"="+f[1])
		}
	}
	if r.RequestID != "" {
		fields = append(fields, "request="+r.RequestID)
	}
	if r.TraceID != "" {
		fields = append(fields, "trace="+r.TraceID)
	}
	return strings.Join(fields, " ")
}
