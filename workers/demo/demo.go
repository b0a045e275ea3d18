// Package demo holds the built-in demo tools that `toolgate dev` and `toolgate worker
// demo` serve: email (mail goes to an outbox, the tool's state bucket in JetStream
// KV, never to the network),
// echo and clock. They show a tool's whole path through the gateway without any
// account elsewhere.
package demo

import (
	"bytes"
	"cmp"
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"net/mail"
	"slices"
	"strings"
	"time"
	_ "time/tzdata" // clock must know every IANA zone, whatever the host has installed

	"github.com/nats-io/nats.go"
	"github.com/nats-io/nuid"

	"github.com/toolgate/toolgate/workers"
)

// Version is the version the demo tools declare.
const Version = "1.0.0"

// StateTools are the demo tools whose workers keep state: the email tool's outbox is
// its state bucket (workers.Worker.State), which an admin makes before it starts
// (registry.CreateToolState; toolgate dev and toolgate bootstrap do).
var StateTools = []string{"email"}

// OutboxTTL is how long sent mail stays in the outbox.
const OutboxTTL = 24 * time.Hour

// Run serves the three demo tools on nc until ctx ends, then drains them. If one of
// them cannot start, the others are stopped and Run returns why. With the demo tools'
// credentials (toolgate creds issue email echo clock), nc must have been made with
// workers.Inbox("email").
func Run(ctx context.Context, nc *nats.Conn, opts ...workers.Option) error {
	email, err := Email(ctx, nc, opts...)
	if err != nil {
		return err
	}
	all := []*workers.Worker{email, Echo(nc, opts...), Clock(nc, opts...)}
	ctx, cancel := context.WithCancel(ctx)
	defer cancel()
	errs := make(chan error, len(all))
	for _, w := range all {
		go func() {
			err := w.Run(ctx)
			if err != nil {
				cancel()
			}
			errs <- err
		}()
	}
	var failed []error
	for range all {
		failed = append(failed, <-errs)
	}
	return errors.Join(failed...)
}

// Mail is one message in the outbox.
type Mail struct {
	ID       string    `json:"id"`
	To       string    `json:"to"`
	Subject  string    `json:"subject"`
	Body     string    `json:"body"`
	QueuedAt time.Time `json:"queued_at"`
}

type outbox struct{ kv *workers.State }

// Email returns the email tool's worker: send_email puts a message in the outbox,
// list_sent lists the outbox. The outbox is the tool's state bucket, which must
// exist (workers.ErrNoState otherwise); each message expires OutboxTTL after it was
// sent.
func Email(ctx context.Context, nc *nats.Conn, opts ...workers.Option) (*workers.Worker, error) {
	w := workers.New(nc, workers.Tool{
		ID: "email", Title: "Email", Version: Version,
		Description: "Sends e-mail. A demo: mail is kept in an outbox for a day and never leaves it.",
	}, opts...)
	kv, err := w.State(ctx)
	if err != nil {
		return nil, fmt.Errorf("demo: outbox: %w", err)
	}
	o := &outbox{kv: kv}

	send := workers.Func("send_email", "Send an e-mail message; it is queued in the outbox.", o.send)
	// The type cannot say that "to" is an e-mail address; the schema can.
	send.InputSchema = json.RawMessage(`{"type":"object","properties":{` +
		`"to":{"type":"string","format":"email","description":"the recipient's address"},` +
		`"subject":{"type":"string","maxLength":998},` +
		`"body":{"type":"string"}},` +
		`"required":["to","subject","body"],"additionalProperties":false}`)
	w.Handle(send)
	list := workers.Func("list_sent", "List the messages in the outbox, newest first.", o.list)
	list.InputSchema = json.RawMessage(`{"type":"object","properties":{` +
		`"limit":{"type":"integer","minimum":1,"maximum":1000,"description":"how many messages at most; 100 when absent"}},` +
		`"additionalProperties":false}`)
	w.Handle(list)
	return w, nil
}

type sendIn struct {
	To      string `json:"to"`
	Subject string `json:"subject"`
	Body    string `json:"body"`
}

type sendOut struct {
	ID       string    `json:"id"`
	QueuedAt time.Time `json:"queued_at"`
}

func invalidParams(format string, args ...any) error {
	return &workers.Error{Code: workers.CodeInvalidParams, Message: fmt.Sprintf(format, args...), Status: 400}
}

// send checks what the gateway's schema check already has, for callers on the bus
// that skip the gateway.
func (o *outbox) send(ctx context.Context, _ *workers.Call, in sendIn) (sendOut, error) {
	if addr, err := mail.ParseAddress(in.To); err != nil || addr.Address != in.To {
		return sendOut{}, invalidParams("to: %q is not an e-mail address", in.To)
	}
	if strings.ContainsAny(in.Subject, "\r\n") {
		return sendOut{}, invalidParams("subject: must be one line")
	}
	m := Mail{ID: "msg_" + nuid.Next(), To: in.To, Subject: in.Subject, Body: in.Body, QueuedAt: time.Now().UTC()}
	b, err := json.Marshal(m)
	if err != nil {
		return sendOut{}, err
	}
	if _, err := o.kv.Create(ctx, m.ID, b, OutboxTTL); err != nil {
		return sendOut{}, fmt.Errorf("outbox: %w", err)
	}
	return sendOut{ID: m.ID, QueuedAt: m.QueuedAt}, nil
}

type listIn struct {
	Limit int `json:"limit,omitempty"`
}

type listOut struct {
	Messages []Mail `json:"messages"`
}

func (o *outbox) list(ctx context.Context, _ *workers.Call, in listIn) (listOut, error) {
	if in.Limit == 0 {
		in.Limit = 100
	}
	if in.Limit < 1 || in.Limit > 1000 {
		return listOut{}, invalidParams("limit: must be from 1 to 1000")
	}
	keys, err := o.kv.Keys(ctx)
	if err != nil {
		return listOut{}, fmt.Errorf("outbox: %w", err)
	}
	out := listOut{Messages: []Mail{}}
	for _, k := range keys {
		v, _, err := o.kv.Get(ctx, k)
		if errors.Is(err, workers.ErrKeyNotFound) {
			continue // expired since it was listed
		}
		if err != nil {
			return listOut{}, fmt.Errorf("outbox: %w", err)
		}
		var m Mail
		if err := json.Unmarshal(v, &m); err == nil {
			out.Messages = append(out.Messages, m)
		}
	}
	slices.SortFunc(out.Messages, func(a, b Mail) int {
		return cmp.Or(b.QueuedAt.Compare(a.QueuedAt), strings.Compare(b.ID, a.ID))
	})
	if len(out.Messages) > in.Limit {
		out.Messages = out.Messages[:in.Limit]
	}
	return out, nil
}

// Echo returns the echo tool's worker: echo answers with the object it is sent.
func Echo(nc *nats.Conn, opts ...workers.Option) *workers.Worker {
	w := workers.New(nc, workers.Tool{
		ID: "echo", Title: "Echo", Version: Version, Description: "Answers with the object it is sent.",
	}, opts...)
	anyObject := json.RawMessage(`{"type":"object","additionalProperties":true}`)
	w.Handle(workers.Method{
		Name: "echo", Description: "Return the parameters as they are.",
		InputSchema: anyObject, OutputSchema: anyObject,
		Handler: func(_ context.Context, c *workers.Call) (any, error) {
			if p := bytes.TrimLeft(c.Params, " \t\r\n"); len(p) == 0 || p[0] != '{' || !json.Valid(p) {
				return nil, invalidParams("parameters must be a JSON object")
			}
			return c.Params, nil
		},
	})
	return w
}

// Clock returns the clock tool's worker: now tells the time in a time zone; wait
// tells it after a while, a call that takes as long as its caller asks.
func Clock(nc *nats.Conn, opts ...workers.Option) *workers.Worker {
	w := workers.New(nc, workers.Tool{
		ID: "clock", Title: "Clock", Version: Version, Description: "Tells the time anywhere.",
	}, opts...)
	w.Handle(workers.Func("now", "The current time in a time zone, as RFC 3339.", now))
	w.Handle(workers.Func("wait", "Wait ms milliseconds (at most a minute), then tell the time in a time zone.", wait))
	return w
}

type waitIn struct {
	MS       int    `json:"ms" jsonschema:"how long to wait, in milliseconds (0 to 60000)"`
	Timezone string `json:"timezone,omitempty" jsonschema:"an IANA time zone name such as Europe/Paris; UTC when absent"`
}

// MaxWait is the longest wait clock's wait method takes.
const MaxWait = time.Minute

func wait(ctx context.Context, c *workers.Call, in waitIn) (nowOut, error) {
	d := time.Duration(in.MS) * time.Millisecond
	if d < 0 || d > MaxWait {
		return nowOut{}, invalidParams("ms: must be from 0 to %d", MaxWait.Milliseconds())
	}
	select {
	case <-time.After(d):
	case <-ctx.Done(): // the caller left, or its deadline passed: nobody reads the time
		return nowOut{}, ctx.Err()
	}
	return now(ctx, c, nowIn{Timezone: in.Timezone})
}

type nowIn struct {
	Timezone string `json:"timezone,omitempty" jsonschema:"an IANA time zone name such as Europe/Paris; UTC when absent"`
}

type nowOut struct {
	Time     string `json:"time"`
	Timezone string `json:"timezone"`
}

func now(_ context.Context, _ *workers.Call, in nowIn) (nowOut, error) {
	name := cmp.Or(in.Timezone, "UTC")
	loc, err := time.LoadLocation(name)
	if err != nil || name == "Local" { // Local is the server's zone, meaningless to a caller
		return nowOut{}, &workers.Error{Code: "invalid_timezone", Message: fmt.Sprintf("%q is not an IANA time zone name", in.Timezone), Status: 400}
	}
	return nowOut{Time: time.Now().In(loc).Format(time.RFC3339), Timezone: loc.String()}, nil
}
