package audit

import (
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"strings"
	"time"

	"github.com/nats-io/nats.go"
	"github.com/nats-io/nats.go/jetstream"

	"github.com/toolgate/toolgate/bus/wire"
)

// Filter picks records of the trail. Empty fields match anything.
type Filter struct {
	Kind, Account, Tool, Method, Outcome string
	// User and Client pick the records that name them (Record.User, Record.Client).
	// Neither is in a record's subject: the records the other fields pick are read
	// and these checked on each.
	User, Client string
	// Since and Until bound when the records were stored (the stream's clock).
	Since, Until time.Time
	// After is the cursor: records stored after this stream sequence (0: from the
	// first, or from Since).
	After uint64
	// Before bounds the records read to those stored before this stream sequence (0:
	// no bound): ReadBack's cursor.
	Before uint64
	// Limit is how many records one read returns: DefaultLimit when 0, at most MaxLimit.
	Limit int
}

// The records one read returns, unless told otherwise, and at most.
const (
	DefaultLimit = 100
	MaxLimit     = 1000
)

// Page is one read of the trail.
type Page struct {
	Records []Record `json:"records"`
	// Next is the cursor to read on from: the sequence of the last record read (or
	// After, when none was).
	Next uint64 `json:"next"`
	// More says more records matched the filter when this page was read.
	More bool `json:"more"`
}

// matches checks r itself against f: a subject's tokens may stand for other values
// too (wire.AuditToken).
func (f Filter) matches(r *Record) bool {
	for _, c := range [][2]string{{f.Kind, r.Kind}, {f.Account, r.Account}, {f.Tool, r.Tool}, {f.Method, r.Method}, {f.Outcome, r.Outcome},
		{f.User, r.User}, {f.Client, r.Client}} {
		if c[0] != "" && c[0] != c[1] {
			return false
		}
	}
	return true
}

// subject is the subject filter of f: its tokens, and any token where f leaves a field empty.
func (f Filter) subject(s wire.Subjects) string {
	tokens := make([]string, 0, 5)
	for _, v := range []string{f.Kind, f.Account, f.Tool, f.Method, f.Outcome} {
		if v == "" {
			tokens = append(tokens, "*")
			continue
		}
		tokens = append(tokens, wire.AuditToken(v))
	}
	return strings.TrimSuffix(s.AuditAll(), ">") + strings.Join(tokens, ".")
}

// Read returns the records f picks, oldest first, through an ephemeral consumer of
// the stream that the server filters by subject.
func (t *Trail) Read(ctx context.Context, f Filter) (Page, error) {
	return readAgain(ctx, func() (Page, error) { return t.read(ctx, f) })
}

// ReadAttempts bounds how often a read of the trail is tried when JetStream had no
// responder for one of its requests, as happens for a moment while a server of the
// cluster comes or goes; ReadPause is the wait between two tries. A read changes
// nothing, so trying it again is safe.
const (
	ReadAttempts = 5
	ReadPause    = 200 * time.Millisecond
)

// readAgain runs read until it succeeds, fails otherwise than for want of a
// responder, or has been tried ReadAttempts times.
func readAgain(ctx context.Context, read func() (Page, error)) (Page, error) {
	for attempt := 1; ; attempt++ {
		page, err := read()
		if err == nil || !errors.Is(err, nats.ErrNoResponders) || attempt == ReadAttempts {
			return page, err
		}
		select {
		case <-ctx.Done():
			return Page{}, err
		case <-time.After(ReadPause):
		}
	}
}

func (t *Trail) read(ctx context.Context, f Filter) (Page, error) {
	limit := f.limit()
	cfg := jetstream.ConsumerConfig{
		FilterSubject:     f.subject(t.opts.Subjects),
		AckPolicy:         jetstream.AckNonePolicy,
		InactiveThreshold: time.Minute, // should the delete below be lost
		MemoryStorage:     true,
	}
	switch {
	case f.After > 0:
		cfg.DeliverPolicy, cfg.OptStartSeq = jetstream.DeliverByStartSequencePolicy, f.After+1
	case !f.Since.IsZero():
		since := f.Since
		cfg.DeliverPolicy, cfg.OptStartTime = jetstream.DeliverByStartTimePolicy, &since
	}
	cons, err := t.js.CreateConsumer(ctx, t.stream, cfg)
	if err != nil {
		return Page{}, fmt.Errorf("audit: read: %w", err)
	}
	defer func() {
		dctx, cancel := context.WithTimeout(context.WithoutCancel(ctx), 2*time.Second)
		defer cancel()
		_ = t.js.DeleteConsumer(dctx, t.stream, cons.CachedInfo().Name)
	}()
	page := Page{Records: []Record{}, Next: f.After}
	pending := cons.CachedInfo().NumPending
	for pending > 0 && len(page.Records) < limit {
		batch, err := cons.Fetch(int(min(pending, uint64(limit-len(page.Records)))), jetstream.FetchMaxWait(5*time.Second))
		if err != nil {
			return Page{}, fmt.Errorf("audit: read: %w", err)
		}
		got := 0
		for msg := range batch.Messages() {
			got++
			meta, err := msg.Metadata()
			if err != nil {
				continue
			}
			if (!f.Until.IsZero() && meta.Timestamp.After(f.Until)) || (f.Before > 0 && meta.Sequence.Stream >= f.Before) {
				pending = 0 // the rest is later still
				break
			}
			pending, page.Next = meta.NumPending, meta.Sequence.Stream
			var r Record
			if json.Unmarshal(msg.Data(), &r) != nil || !f.matches(&r) || (!f.Since.IsZero() && meta.Timestamp.Before(f.Since)) {
				continue
			}
			r.Seq = meta.Sequence.Stream
			page.Records = append(page.Records, r)
		}
		if err := batch.Error(); err != nil {
			return Page{}, fmt.Errorf("audit: read: %w", err)
		}
		if got == 0 {
			break // what was pending has aged out meanwhile
		}
	}
	page.More = pending > 0
	return page, nil
}

// limit is how many records a read of f returns at most.
func (f Filter) limit() int {
	if f.Limit <= 0 {
		return DefaultLimit
	}
	return min(f.Limit, MaxLimit)
}

// ReadBack returns the records f picks, newest first: the latest f.Limit stored before
// f.Before (0: the latest of all). Next is the cursor to pass as Before for the older
// ones, and More says there are. It reads the stream forward a window of sequences
// at a time, each window further back and four times as long as the last, until it
// has a record more than the page holds or has reached the stream's first record.
func (t *Trail) ReadBack(ctx context.Context, f Filter) (Page, error) {
	return readAgain(ctx, func() (Page, error) { return t.readBack(ctx, f) })
}

func (t *Trail) readBack(ctx context.Context, f Filter) (Page, error) {
	limit := f.limit()
	st, err := t.js.Stream(ctx, t.stream)
	if err != nil {
		return Page{}, fmt.Errorf("audit: read: %w", err)
	}
	state := st.CachedInfo().State
	first, end := max(state.FirstSeq, 1), state.LastSeq+1
	if f.Before > 0 && f.Before < end {
		end = f.Before
	}
	var found []Record // oldest first, each older window's records before the later ones
	for window := uint64(4 * limit); end > first && len(found) <= limit; window *= 4 {
		start := first
		if end-first > window {
			start = end - window
		}
		older, err := t.readWindow(ctx, f, start, end, limit+1-len(found))
		if err != nil {
			return Page{}, err
		}
		found, end = append(older, found...), start
	}
	page := Page{Records: []Record{}, More: len(found) > limit}
	if page.More {
		found = found[len(found)-limit:]
	}
	for i := len(found) - 1; i >= 0; i-- {
		page.Records = append(page.Records, found[i])
	}
	if len(found) > 0 {
		page.Next = found[0].Seq
	}
	return page, nil
}

// readWindow reads the records f picks stored from sequence start to before end,
// and keeps the latest keep of them.
func (t *Trail) readWindow(ctx context.Context, f Filter, start, end uint64, keep int) ([]Record, error) {
	f.After, f.Before, f.Limit = start-1, end, MaxLimit
	var out []Record
	for {
		page, err := t.Read(ctx, f)
		if err != nil {
			return nil, err
		}
		out = append(out, page.Records...)
		if len(out) > keep {
			out = out[len(out)-keep:]
		}
		if !page.More || page.Next >= end-1 || page.Next == f.After {
			return out, nil
		}
		f.After = page.Next
	}
}
