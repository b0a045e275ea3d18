package wire_test

import (
	"context"
	"encoding/json"
	"errors"
	"flag"
	"os"
	"path/filepath"
	"slices"
	"strings"
	"testing"
	"time"

	"github.com/nats-io/nats.go"
	"go.opentelemetry.io/otel/trace"

	"github.com/toolgate/toolgate/bus/wire"
)

var update = flag.Bool("update", false, "rewrite the golden files of testdata/ from what the code encodes")

// render writes a message as it crosses the bus: its subject, its headers in order,
// a blank line and its body.
func render(msg *nats.Msg) string {
	var b strings.Builder
	b.WriteString(msg.Subject + "\n")
	keys := make([]string, 0, len(msg.Header))
	for k := range msg.Header {
		keys = append(keys, k)
	}
	slices.Sort(keys)
	for _, k := range keys {
		for _, v := range msg.Header[k] {
			b.WriteString(k + ": " + v + "\n")
		}
	}
	b.WriteString("\n")
	b.Write(msg.Data)
	b.WriteString("\n")
	return b.String()
}

// golden compares got with testdata/name.golden, or writes it with -update.
func golden(t *testing.T, name, got string) {
	t.Helper()
	path := filepath.Join("testdata", name+".golden")
	if *update {
		if err := os.WriteFile(path, []byte(got), 0o644); err != nil {
			t.Fatal(err)
		}
		return
	}
	want, err := os.ReadFile(path)
	if err != nil {
		t.Fatalf("%v (run go test -update to write it)", err)
	}
	if got != string(want) {
		t.Errorf("%s changed: the wire contract changed.\n--- got\n%s--- want\n%s", path, got, want)
	}
}

// tracedContext carries a fixed remote span, as an edge's request context would.
func tracedContext() context.Context {
	return trace.ContextWithRemoteSpanContext(context.Background(), trace.NewSpanContext(trace.SpanContextConfig{
		TraceID:    trace.TraceID{0x4b, 0xf9, 0x2f, 0x35, 0x77, 0xb3, 0x4d, 0xa6, 0xa3, 0xce, 0x92, 0x9d, 0x0e, 0x0e, 0x47, 0x36},
		SpanID:     trace.SpanID{0x00, 0xf0, 0x67, 0xaa, 0x0b, 0xa9, 0x02, 0xb7},
		TraceFlags: trace.FlagsSampled,
		Remote:     true,
	}))
}

var deadline = time.UnixMilli(1767322800000) // 2026-01-02T03:00:00Z

func TestGoldenRequests(t *testing.T) {
	subj := wire.DefaultSubjects
	t.Run("a call of a method, from an MCP session, with progress", func(t *testing.T) {
		req := wire.Request{
			Tool: "email", Method: "send_email", CallID: "mcp-3f1c0a9e", RequestID: "req_42", Account: "acme", Deadline: deadline,
			Data: []byte(`{"to":"ada@example.com","subject":"Hello","body":"Hi"}`), MCPContext: wire.MCPContext{Session: "S1", ClientCapabilities: []string{"elicitation", "sampling"}, Progress: true},
		}
		msg := subj.Msg(tracedContext(), &req)
		golden(t, "call-request", render(msg))

		got, err := subj.ReadRequest(msg.Subject, msg.Header, msg.Data)
		if err != nil {
			t.Fatal(err)
		}
		got.Header = nil
		if !got.Deadline.Equal(req.Deadline) {
			t.Errorf("deadline %v, want %v", got.Deadline, req.Deadline)
		}
		got.Deadline, req.Deadline = time.Time{}, time.Time{}
		if a, b := mustJSON(t, got), mustJSON(t, req); a != b {
			t.Errorf("read back\n%s\nwant\n%s", a, b)
		}
	})
	t.Run("an MCP request other than a tool call, from a client that declared nothing", func(t *testing.T) {
		req := wire.Request{Tool: "email", MCP: true, Method: "resources/read", CallID: "Nx1", RequestID: "Nx1",
			Account: "acme", Deadline: deadline, Data: []byte(`{"uri":"mail://outbox"}`), MCPContext: wire.MCPContext{Session: "S1", ClientCapabilities: []string{}}}
		msg := subj.Msg(context.Background(), &req)
		golden(t, "mcp-request", render(msg))
		got, err := subj.ReadRequest(msg.Subject, msg.Header, msg.Data)
		if err != nil || !got.MCP || got.Method != "resources/read" || got.Tool != "email" {
			t.Fatalf("read back %+v, %v", got, err)
		}
		if got.ClientCapabilities == nil || got.Declared("sampling") {
			t.Errorf("capabilities %#v: a client that declared none must declare no sampling", got.ClientCapabilities)
		}
	})
	t.Run("a session's call and MCP request sent to one instance", func(t *testing.T) {
		for _, req := range []wire.Request{
			{Tool: "fixture", Method: "echo", Account: "acme", Data: []byte(`{}`), MCPContext: wire.MCPContext{Instance: "vm-1a2b", Session: "S1"}},
			{Tool: "fixture", MCP: true, Method: "resources/read", Account: "acme", Data: []byte(`{}`), MCPContext: wire.MCPContext{Instance: "vm-1a2b", Session: "S1"}},
		} {
			msg := subj.Msg(context.Background(), &req)
			want := "tg.inst.fixture.vm-1a2b.call.echo"
			if req.MCP {
				want = "tg.inst.fixture.vm-1a2b.mcp"
			}
			if msg.Subject != want {
				t.Errorf("subject %q, want %q", msg.Subject, want)
			}
			got, err := subj.ReadRequest(msg.Subject, msg.Header, msg.Data)
			if err != nil || got.Tool != req.Tool || got.Method != req.Method || got.MCP != req.MCP || got.Instance != req.Instance || got.Session != "S1" {
				t.Errorf("read back %+v, %v", got, err)
			}
		}
		if _, err := subj.ReadRequest("tg.inst.fixture", nil, nil); err == nil {
			t.Error("a subject naming no instance read as a request")
		}
	})
	t.Run("a call over HTTP: no session, capabilities unknown", func(t *testing.T) {
		req := wire.Request{Tool: "echo", Method: "echo", CallID: "Nx2", RequestID: "req_1", Account: "acme", Deadline: deadline, Data: []byte(`{}`)}
		msg := subj.Msg(context.Background(), &req)
		golden(t, "http-request", render(msg))
		got, _ := subj.ReadRequest(msg.Subject, msg.Header, msg.Data)
		if got.ClientCapabilities != nil || !got.Declared("sampling") {
			t.Errorf("capabilities %#v: unknown capabilities let the client answer", got.ClientCapabilities)
		}
	})
}

func mustJSON(t *testing.T, v any) string {
	t.Helper()
	b, err := json.Marshal(v)
	if err != nil {
		t.Fatal(err)
	}
	return string(b)
}

func TestGoldenReplies(t *testing.T) {
	const inbox = "_INBOX.edge.1"
	for _, tc := range []struct {
		name string
		msg  *nats.Msg
		// what the edge reads back
		status  int
		mcp     bool
		errText string
	}{
		{name: "reply", msg: wire.JSONReply(inbox, []byte(`{"id":"mail_1"}`)), status: 200},
		{name: "raw-reply", msg: wire.RawReply(inbox, 201, "text/plain; charset=utf-8", []byte("created")), status: 201},
		{name: "tool-result-reply", msg: wire.ToolResultReply(inbox, json.RawMessage(`{"content":[{"type":"text","text":"hi"}]}`)), status: 200, mcp: true},
		{name: "error-reply", msg: wire.ErrorReply(inbox, &wire.ToolError{Code: "unknown_city", Message: "no such city", Status: 404, Data: []byte(`{"city":"Atlantis"}`)}),
			errText: "tool error unknown_city: no such city"},
		{name: "error-reply-defaults", msg: wire.ErrorReply(inbox, &wire.ToolError{}), errText: "tool error internal: internal"},
		{name: "mcp-error-reply", msg: wire.RPCErrorReply(inbox, &wire.RPCError{Code: wire.RPCInvalidParams, Message: "no such resource", Data: json.RawMessage(`{"uri":"x://y"}`)}),
			errText: "JSON-RPC error -32602: no such resource"},
	} {
		t.Run(tc.name, func(t *testing.T) {
			golden(t, tc.name, render(tc.msg))
			r, err := wire.ReadReply(tc.msg)
			if tc.errText != "" {
				if err == nil || err.Error() != tc.errText {
					t.Fatalf("read back %v, want the error %q", err, tc.errText)
				}
				return
			}
			if err != nil || r.Status != tc.status || r.MCPResult != tc.mcp || string(r.Data) != string(tc.msg.Data) {
				t.Fatalf("read back %+v, %v", r, err)
			}
		})
	}
}

func TestGoldenNotificationsAndSessions(t *testing.T) {
	subj := wire.DefaultSubjects
	for _, tc := range []struct {
		name string
		n    wire.Notification
	}{
		{"progress", wire.Notification{Kind: wire.KindProgress, Progress: 1, Total: 2, Message: "half way"}},
		{"log", wire.Notification{Kind: wire.KindLog, Level: "info", Logger: "reporter", Data: json.RawMessage(`{"step":1}`)}},
	} {
		t.Run("a "+tc.name+" notification", func(t *testing.T) {
			b, err := tc.n.Encode()
			if err != nil {
				t.Fatal(err)
			}
			msg := nats.NewMsg(subj.Progress("email", "Nx1"))
			msg.Data = b
			golden(t, "notification-"+tc.name, render(msg))
			if got, err := wire.ReadNotification(b); err != nil || mustJSON(t, got) != mustJSON(t, tc.n) {
				t.Fatalf("read back %+v, %v", got, err)
			}
		})
	}
	t.Run("a session request and its cancel", func(t *testing.T) {
		b, err := wire.SessionRequest("tg-R1", "sampling/createMessage", map[string]any{"maxTokens": 10})
		if err != nil {
			t.Fatal(err)
		}
		msg := nats.NewMsg(subj.SessionOut("email", "S1"))
		msg.Data = b
		cancel := nats.NewMsg(subj.SessionOut("email", "S1"))
		cancel.Data = wire.SessionCancel("tg-R1", "context canceled")
		golden(t, "session-request", render(msg)+render(cancel))
	})
	t.Run("a client's answers", func(t *testing.T) {
		res, err := wire.ReadSessionAnswer([]byte(`{"jsonrpc":"2.0","id":"tg-R1","result":{"role":"assistant"}}`))
		if err != nil || string(res) != `{"role":"assistant"}` {
			t.Errorf("result %s, %v", res, err)
		}
		_, err = wire.ReadSessionAnswer([]byte(`{"jsonrpc":"2.0","id":"tg-R1","error":{"code":-1,"message":"declined"}}`))
		if re, ok := err.(*wire.RPCError); !ok || re.Code != -1 || re.Message != "declined" {
			t.Errorf("error %v, want the client's JSON-RPC error", err)
		}
	})
}

func TestGoldenRecords(t *testing.T) {
	tool := wire.Tool{ID: "email", Title: "Email", Version: "1.0.0", Capabilities: wire.Capabilities{Resources: true}, Holding: true,
		Methods:   []wire.Method{{Name: "send_email", InputSchema: json.RawMessage(`{"type":"object"}`), Timeout: wire.Duration(5 * time.Second)}},
		UpdatedAt: deadline.UTC()}
	s := wire.DefaultSubjects
	rec, err := s.AskRecordMsg(&tool)
	if err != nil {
		t.Fatal(err)
	}
	p := wire.Presence{Tool: "email", Instance: "host-1", Host: "host", Version: "1.0.0", StartedAt: deadline.UTC()}
	pres, err := s.AskPresenceMsg(&p, 2500*time.Millisecond)
	if err != nil {
		t.Fatal(err)
	}
	golden(t, "records", render(rec)+render(pres)+render(s.AskPresenceDeleteMsg("email", "host-1")))
}

func TestGoldenAsks(t *testing.T) {
	s := wire.DefaultSubjects
	var out string
	for _, m := range []*nats.Msg{
		s.AskStateMsg("email", wire.StateCreate, "msg_1", []byte(`{"to":"ada@example.com"}`), 0, 24*time.Hour),
		s.AskStateMsg("email", wire.StateUpdate, "msg_1", []byte(`{"to":"bo@example.com"}`), 7, 0),
		s.AskStateMsg("email", wire.StateGet, "msg_1", nil, 0, 0),
		s.AskStateMsg("email", wire.StateKeys, "", nil, 0, 0),
		s.AskPayloadMsg("email", wire.PayloadPut, "P1", 0, []byte("the first part of a reply")),
		s.AskPayloadMsg("email", wire.PayloadGet, "P1", 3, nil),
		func() *nats.Msg { // a reply whose bytes are a payload's
			m := wire.RawReply("_INBOX.edge.R1", 0, "image/png", nil)
			m.Header.Set(wire.HeaderPayload, wire.Payload{ID: "P1", Size: 3 << 20, Parts: 4}.String())
			return m
		}(),
		wire.AskReply("_INBOX.tool.email.N1.t1", 8, []byte(`{"to":"bo@example.com"}`)),
		wire.AskErrorReply("_INBOX.tool.email.N1.t2", wire.AskExists, "the key has a value, or another revision"),
	} {
		out += render(m)
	}
	golden(t, "asks", out)
}

func TestAskReplies(t *testing.T) {
	body, rev, err := wire.ReadAskReply(wire.AskReply("r", 8, []byte("v")))
	if err != nil || rev != 8 || string(body) != "v" {
		t.Fatalf("%q %d %v", body, rev, err)
	}
	_, _, err = wire.ReadAskReply(wire.AskErrorReply("r", wire.AskNotFound, "no"))
	if !errors.Is(err, wire.ErrAskNotFound) || errors.Is(err, wire.ErrAskExists) {
		t.Fatalf("%v", err)
	}
	noResponders := nats.NewMsg("r")
	noResponders.Header.Set("Status", "503")
	if _, _, err := wire.ReadAskReply(noResponders); !errors.Is(err, wire.ErrNotStored) {
		t.Fatalf("no responders: %v", err)
	}
	for reply, ok := range map[string]bool{
		"_INBOX.tool.email.N1.t1": true, "_INBOX.tool.email.": false, "_INBOX.tool.emailx.N1": false,
		"_INBOX.tool.email.*": false, "_INBOX.tool.email.>": false, "$KV.tg-keys.x": false, "tg.call.beta.run": false, "": false,
	} {
		if got := wire.AskReplyAllowed("email", reply); got != ok {
			t.Errorf("AskReplyAllowed(email, %q) = %v", reply, got)
		}
	}
	for reply, ok := range map[string]bool{"_INBOX.x": true, "tg.answer.email.S.P": true, "": false, "$JS.API.DIRECT.GET.x": false, "$KV.tg-keys.x": false} {
		if got := wire.CallReplyAcceptable(reply); got != ok {
			t.Errorf("CallReplyAcceptable(%q) = %v", reply, got)
		}
	}
	for subject, want := range map[string]wire.Ask{
		"tg.reg.email.record":          {Kind: wire.AskRecordKind, Tool: "email"},
		"tg.reg.email.presence.host-1": {Kind: wire.AskPresenceKind, Tool: "email", Instance: "host-1"},
		"tg.state.email.get":           {Kind: wire.AskStateKind, Tool: "email", Op: wire.StateGet},
		"tg.sessout.email.S1":          {Kind: wire.AskSessionKind, Tool: "email", Session: "S1"},
		"tg.answer.email.S1.P1":        {Kind: wire.AskAnswerKind, Tool: "email", Session: "S1", Post: "P1"},
		"tg.state.email.drop":          {},
		"tg.reg.Email.record":          {},
		"tg.reg.email.record.x":        {},
		"tg.call.email.get":            {},
		"other.reg.email.record":       {},
	} {
		got, ok := wire.DefaultSubjects.ParseAsk(subject)
		if ok != (want.Kind != 0) || got != want {
			t.Errorf("ParseAsk(%s) = %+v, %v", subject, got, ok)
		}
	}
}

func TestGoldenHolding(t *testing.T) {
	s := wire.DefaultSubjects
	msg, err := s.HoldingMsg("email", &wire.Holding{Instance: "host-1", Calls: []string{"Nx1", "mcp-3f1c0a9e"}})
	if err != nil {
		t.Fatal(err)
	}
	golden(t, "holding", render(msg))
	tool, ok := s.ParseHolding(msg.Subject)
	h, err := wire.ReadHolding(msg.Data)
	if !ok || tool != "email" || err != nil || h.Instance != "host-1" || len(h.Calls) != 2 {
		t.Fatalf("read back: tool %q (%v), %+v, %v", tool, ok, h, err)
	}
	for _, subject := range []string{s.Progress("email", "Nx1"), "tg.progress.email.x.holding", "tg.progress..holding"} {
		if _, ok := s.ParseHolding(subject); ok {
			t.Errorf("%s read as a Holding subject", subject)
		}
	}
}

func TestListChangedSubject(t *testing.T) {
	s := wire.DefaultSubjects
	for _, list := range []string{wire.ListTools, wire.ListPrompts, wire.ListResources} {
		tool, got, ok := s.ParseListChanged(s.ListChanged("email"), []byte(list))
		if !ok || tool != "email" || got != list {
			t.Errorf("read back %s: tool %q list %q (%v)", list, tool, got, ok)
		}
	}
	for _, c := range []struct{ subject, body string }{
		{s.ListChanged("email"), "roots"}, {s.ListChanged("email"), ""}, {s.Progress("email", "Nx1"), "tools"},
		{"tg.progress.email.x.listchanged", "tools"}, {"tg.progress..listchanged", "tools"}, {s.Holding("email"), "tools"},
	} {
		if _, _, ok := s.ParseListChanged(c.subject, []byte(c.body)); ok {
			t.Errorf("%s %q read as a list change", c.subject, c.body)
		}
	}
}

// TestGoldenSubjects lists every subject of the contract for one tool, call and session.
func TestGoldenSubjects(t *testing.T) {
	s := wire.DefaultSubjects
	lines := []string{
		"call " + s.Call("email", "send_email"),
		"call all " + s.CallAll("email"),
		"queue group " + s.QueueGroup("email"),
		"mcp " + s.MCP("email"),
		"cancel " + s.Cancel("email", "Nx1"),
		"cancels of a tool " + s.CancelTool("email"),
		"every cancel " + s.CancelAll(),
		"progress " + s.Progress("email", "Nx1"),
		"holding " + s.Holding("email"),
		"every holding " + s.HoldingAll(),
		"list changed " + s.ListChanged("email"),
		"every list changed " + s.ListChangedAll(),
		"session out " + s.SessionOut("email", "S1"),
		"session post " + s.SessionPost("email", "S1", "P1"),
		"session reply " + s.SessionReply("email", "S1", "tg-R1"),
		"session replies of a tool " + s.SessionReplies("email"),
		"event log " + strings.Join(s.EventLog(), " "),
		"logged " + s.Logged(s.SessionPost("email", "S1", "P1")),
		"tool record " + wire.ToolRecord("email"),
		"ask record " + s.AskRecord("email"),
		"ask presence " + s.AskPresence("email", "host-1"),
		"ask state " + s.AskState("email", wire.StateGet),
		"ask payload " + s.AskPayload("email", wire.PayloadGet),
		"ask session " + s.AskSession("email", "S1"),
		"stream answer " + s.StreamAnswer("email", "S1", "P1"),
		"stream answer logged " + s.StreamAnswerLogged("email", "S1", "P1"),
		"asks " + strings.Join(s.Asks(), " "),
		"ask queue " + s.AskQueue(),
		"presence " + wire.PresenceRecord("email", "host-1"),
		"worker inbox " + wire.WorkerInbox("email"),
		"another prefix " + wire.Subjects{Prefix: "acme.tg"}.Cancel("email", "Nx1"),
	}
	golden(t, "subjects", strings.Join(lines, "\n")+"\n")
}
