package audit_test

import (
	"slices"
	"strconv"
	"strings"
	"testing"
	"time"

	"github.com/nats-io/nats.go/jetstream"

	"github.com/toolgate/toolgate/audit"
	"github.com/toolgate/toolgate/bus/wire"
	"github.com/toolgate/toolgate/internal/testenv"
)

func TestOptionsNameTheWrongSetting(t *testing.T) {
	for _, tc := range []struct {
		opts audit.Options
		want string
	}{
		{audit.Options{}, ""},
		{audit.Options{MaxAge: time.Hour, MaxBytes: 64 << 20, Replicas: 3}, ""},
		{audit.Options{MaxAge: -time.Second}, "audit: max-age:"},
		{audit.Options{MaxAge: time.Second}, "audit: max-age:"},
		{audit.Options{MaxBytes: -1}, "audit: max-bytes:"},
		{audit.Options{MaxBytes: 1000}, "audit: max-bytes:"},
		{audit.Options{Replicas: 7}, "audit: replicas:"},
	} {
		err := tc.opts.Validate()
		if (tc.want == "") != (err == nil) || (err != nil && !strings.HasPrefix(err.Error(), tc.want)) {
			t.Errorf("%+v: %v, want %q", tc.opts, err, tc.want)
		}
	}
}

func TestAuditTokens(t *testing.T) {
	for in, want := range map[string]string{
		"send_email": "send_email", "resources/read": "resources_read", "": "_", "a.b*c>d e": "a_b_c_d_e",
		strings.Repeat("x", 200): strings.Repeat("x", 128),
	} {
		if got := wire.AuditToken(in); got != want {
			t.Errorf("AuditToken(%q) = %q, want %q", in, got, want)
		}
	}
	if got := wire.DefaultSubjects.Audit("call", "acme", "email", "resources/read", "ok"); got != "tg.audit.call.acme.email.resources_read.ok" {
		t.Errorf("Audit: %s", got)
	}
}

// TestEveryEdgeKeepsTheTrailAlike: the first edge makes the stream with its
// retention; another takes it as it is, refuses another retention, and changes it
// only when told to.
func TestEveryEdgeKeepsTheTrailAlike(t *testing.T) {
	nc := testenv.Conn(t, testenv.Server(t).ClientURL())
	ctx := testenv.Context(t)
	open := func(o audit.Options) error {
		trail, err := audit.Open(ctx, nc, o, testenv.Logger(t))
		if err == nil {
			err = trail.Close(ctx)
		}
		return err
	}
	if err := open(audit.Options{MaxAge: time.Hour}); err != nil {
		t.Fatal(err)
	}
	if err := open(audit.Options{}); err != nil {
		t.Fatalf("an edge without settings: %v", err)
	}
	if err := open(audit.Options{MaxAge: 2 * time.Hour}); err == nil || !strings.Contains(err.Error(), "max age 1h0m0s") {
		t.Fatalf("another retention: %v", err)
	}
	if err := open(audit.Options{MaxAge: 2 * time.Hour, MaxBytes: 8 << 20, Update: true}); err != nil {
		t.Fatal(err)
	}
	js, _ := jetstream.New(nc)
	st, err := js.Stream(ctx, "tg-audit")
	if err != nil {
		t.Fatal(err)
	}
	if c := st.CachedInfo().Config; c.MaxAge != 2*time.Hour || c.MaxBytes != 8<<20 || c.Replicas != 1 || c.Subjects[0] != "tg.audit.>" {
		t.Fatalf("the trail's stream: %+v", c)
	}
}

// TestReadBackPagesNewestFirst: ReadBack pages through one account's records newest
// first by the cursor, each once, past the other account's records between them and
// the filters' misses.
func TestReadBackPagesNewestFirst(t *testing.T) {
	nc := testenv.Conn(t, testenv.Server(t).ClientURL())
	ctx := testenv.Context(t)
	trail, err := audit.Open(ctx, nc, audit.Options{}, testenv.Logger(t))
	if err != nil {
		t.Fatal(err)
	}
	for i := range 25 {
		for _, r := range []audit.Record{
			{Kind: audit.KindCall, Account: "a", Tool: "echo", Method: "echo", Outcome: audit.OutcomeOK, RequestID: strconv.Itoa(i)},
			{Kind: audit.KindCall, Account: "b", Tool: "echo", Method: "echo", Outcome: audit.OutcomeOK, RequestID: "b"},
		} {
			if err := trail.Write(r); err != nil {
				t.Fatal(err)
			}
		}
	}
	// 500 records of another account: the first window back holds none of a's.
	for range 500 {
		trail.Send(audit.Record{Kind: audit.KindCall, Account: "b", Tool: "echo", Method: "echo", Outcome: audit.OutcomeOK})
	}
	if err := trail.Write(audit.Record{Kind: audit.KindCall, Account: "a", Tool: "clock", Method: "now", Outcome: audit.OutcomeOK, RequestID: "last"}); err != nil {
		t.Fatal(err)
	}
	var got []string
	f := audit.Filter{Account: "a", Tool: "echo", Limit: 10}
	for pages := 0; ; pages++ {
		page, err := trail.ReadBack(ctx, f)
		if err != nil {
			t.Fatal(err)
		}
		for _, r := range page.Records {
			got = append(got, r.RequestID)
		}
		if !page.More {
			break
		}
		if pages > 3 || page.Next == 0 {
			t.Fatalf("paging does not end: %+v", page)
		}
		f.Before = page.Next
	}
	var want []string
	for i := 24; i >= 0; i-- {
		want = append(want, strconv.Itoa(i))
	}
	if !slices.Equal(got, want) {
		t.Fatalf("newest first: %v, want %v", got, want)
	}
	page, err := trail.ReadBack(ctx, audit.Filter{Account: "a", Limit: 1})
	if err != nil || len(page.Records) != 1 || page.Records[0].RequestID != "last" || !page.More {
		t.Fatalf("the latest: %+v %v", page, err)
	}
}
