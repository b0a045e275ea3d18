package main

//lint:file-ignore SA1019 the client declares sampling and roots, which MCP deprecates only from 2026-07-28, to exercise the server's tools that use them.

import (
	"bufio"
	"bytes"
	"context"
	"encoding/json"
	"fmt"
	"io"
	"net"
	"net/http"
	"os"
	"os/exec"
	"reflect"
	"regexp"
	"slices"
	"sort"
	"strings"
	"sync"
	"syscall"
	"testing"
	"time"

	mcpgotransport "github.com/mark3labs/mcp-go/client/transport"
	mcpgotypes "github.com/mark3labs/mcp-go/mcp"
	"github.com/modelcontextprotocol/go-sdk/jsonrpc"
	"github.com/modelcontextprotocol/go-sdk/mcp"

	"github.com/toolgate/toolgate/internal/testenv"
)

// everything is the MCP project's reference server, from npm.
const everything = "@modelcontextprotocol/server-everything"

// parityDifferences are the documented ways a server behind a link differs from the
// server itself, as paths in the compared JSON: the gateway names itself and gives
// the tool's own description as its instructions.
var parityDifferences = []string{"initialize.serverInfo", "initialize.instructions"}

// TestEverythingParity uses every tool, resource, prompt and notification of the
// reference server the same way directly (its own stdio process) and through a link
// (toolgate worker mcp, then the tool's Streamable HTTP link), with the same real
// client, and compares what the client received field by field. Only the documented
// differences may remain.
func TestEverythingParity(t *testing.T) {
	if testing.Short() {
		t.Skip("fetches a server from npm")
	}
	npx := testenv.NPXPackage(t, everything)

	_, link := bridgedLink(t, "everything", "--sessions", "1", "--", npx, "-y", everything)

	directRec := newRecorder()
	direct := parityClient(t, directRec, observedTransport{
		Transport: &mcp.CommandTransport{Command: exec.Command(npx, "-y", everything)}, see: directRec.see,
	})
	linkRec := newRecorder()
	linked := parityClient(t, linkRec, &mcp.StreamableClientTransport{
		Endpoint: link, HTTPClient: &http.Client{Transport: teeTransport{base: http.DefaultTransport, see: linkRec.see}},
	})

	var diffs []string
	compare := func(what string, d, l any) {
		t.Helper()
		found := jsonDiff(what, normalize(d), normalize(l))
		found = slices.DeleteFunc(found, func(s string) bool {
			return slices.ContainsFunc(parityDifferences, func(p string) bool { return strings.HasPrefix(s, p+":") || strings.HasPrefix(s, p+".") })
		})
		for _, f := range found {
			t.Errorf("%s", f)
		}
		diffs = append(diffs, found...)
	}
	// both runs op on each side and compares the raw results the client received.
	// Each op has the wait budget of its own: the whole sequence (some sixty ops on
	// each side) takes longer than one budget on a loaded machine.
	both := func(what string, op func(context.Context, *mcp.ClientSession) error) {
		t.Helper()
		var raw [2]any
		for i, side := range []struct {
			cs  *mcp.ClientSession
			rec *recorder
		}{{direct, directRec}, {linked, linkRec}} {
			mark := side.rec.mark()
			ctx, cancel := context.WithTimeout(context.Background(), testenv.Patience)
			err := op(ctx, side.cs)
			cancel()
			raw[i] = side.rec.lastAnswer(mark)
			if err != nil && raw[i] == nil {
				raw[i] = "error: " + err.Error()
			}
		}
		compare(what, raw[0], raw[1])
	}
	compare("initialize", directRec.initialize(), linkRec.initialize())

	// A client that declares nothing is offered what the server offers it.
	bareDirect, bareLink := newRecorder(), newRecorder()
	bare := func(rec *recorder, tr mcp.Transport) {
		c := mcp.NewClient(&mcp.Implementation{Name: "parity-bare", Version: "1"}, &mcp.ClientOptions{Capabilities: &mcp.ClientCapabilities{}})
		cs, err := c.Connect(testenv.Context(t), tr, &mcp.ClientSessionOptions{ProtocolVersion: sessionRevision})
		if err != nil {
			t.Fatal(err)
		}
		defer cs.Close()
		if _, err := cs.ListTools(testenv.Context(t), nil); err != nil {
			t.Fatal(err)
		}
	}
	mark := bareDirect.mark()
	bare(bareDirect, observedTransport{Transport: &mcp.CommandTransport{Command: exec.Command(npx, "-y", everything)}, see: bareDirect.see})
	bareTools := bareDirect.lastAnswer(mark)
	mark = bareLink.mark()
	bare(bareLink, &mcp.StreamableClientTransport{
		Endpoint: link, HTTPClient: &http.Client{Transport: teeTransport{base: http.DefaultTransport, see: bareLink.see}},
	})
	bareLinkTools := bareLink.lastAnswer(mark)
	if bareTools == nil || bareLinkTools == nil || strings.Contains(short(bareTools), "get-roots-list") {
		t.Fatalf("a client that declares nothing was listed %s directly", short(bareTools))
	}
	compare("tools/list of a client that declares no capability", bareTools, bareLinkTools)

	mark = directRec.mark()
	both("tools/list", func(tctx context.Context, cs *mcp.ClientSession) error {
		_, err := cs.ListTools(tctx, nil)
		return err
	})
	var listed struct {
		Tools []struct {
			*mcp.Tool
			Execution struct {
				TaskSupport string `json:"taskSupport"`
			} `json:"execution"`
		} `json:"tools"`
	}
	raw, _ := json.Marshal(directRec.lastAnswer(mark))
	if err := json.Unmarshal(raw, &listed); err != nil || len(listed.Tools) == 0 {
		t.Fatalf("the server's tools/list: %v %s", err, raw)
	}
	for _, lt := range listed.Tools {
		tool := lt.Tool
		if lt.Execution.TaskSupport == "required" {
			t.Logf("%s needs tasks, which the client does not use here", tool.Name)
			continue
		}
		args := everythingArgs(tool)
		both("tools/call "+tool.Name, func(tctx context.Context, cs *mcp.ClientSession) error {
			p := &mcp.CallToolParams{Name: tool.Name, Arguments: args}
			p.SetProgressToken("parity")
			_, err := cs.CallTool(tctx, p)
			return err
		})
	}

	var resources []*mcp.Resource
	both("resources/list", func(tctx context.Context, cs *mcp.ClientSession) error {
		res, err := cs.ListResources(tctx, nil)
		if err == nil && cs == direct {
			resources = res.Resources
		}
		return err
	})
	both("resources/templates/list", func(tctx context.Context, cs *mcp.ClientSession) error {
		_, err := cs.ListResourceTemplates(tctx, nil)
		return err
	})
	for _, r := range resources {
		both("resources/read "+r.URI, func(tctx context.Context, cs *mcp.ClientSession) error {
			_, err := cs.ReadResource(tctx, &mcp.ReadResourceParams{URI: r.URI})
			return err
		})
	}
	// What the tools made for the session (gzip-file-as-resource's file) reads back.
	both("resources/read of a session resource", func(tctx context.Context, cs *mcp.ClientSession) error {
		_, err := cs.ReadResource(tctx, &mcp.ReadResourceParams{URI: "demo://resource/session/parity.txt.gz"})
		return err
	})

	var prompts []*mcp.Prompt
	both("prompts/list", func(tctx context.Context, cs *mcp.ClientSession) error {
		res, err := cs.ListPrompts(tctx, nil)
		if err == nil && cs == direct {
			prompts = res.Prompts
		}
		return err
	})
	for _, p := range prompts {
		args := map[string]string{}
		for _, a := range p.Arguments {
			args[a.Name] = promptArg(a.Name)
		}
		both("prompts/get "+p.Name, func(tctx context.Context, cs *mcp.ClientSession) error {
			_, err := cs.GetPrompt(tctx, &mcp.GetPromptParams{Name: p.Name, Arguments: args})
			return err
		})
		for _, a := range p.Arguments {
			both("completion/complete "+p.Name+" "+a.Name, func(tctx context.Context, cs *mcp.ClientSession) error {
				_, err := cs.Complete(tctx, &mcp.CompleteParams{
					Ref: &mcp.CompleteReference{Type: "ref/prompt", Name: p.Name}, Argument: mcp.CompleteParamsArgument{Name: a.Name, Value: ""},
				})
				return err
			})
		}
	}

	// Notifications: progress and log messages of calls, requests of the server, and
	// what it sends outside calls (simulated logging, resource updates).
	both("resources/subscribe", func(tctx context.Context, cs *mcp.ClientSession) error {
		return cs.Subscribe(tctx, &mcp.SubscribeParams{URI: "demo://resource/static/document/architecture.md"})
	})
	both("logging/setLevel", func(tctx context.Context, cs *mcp.ClientSession) error {
		return cs.SetLoggingLevel(tctx, &mcp.SetLoggingLevelParams{Level: "debug"})
	})
	// toggle-simulated-logging and toggle-subscriber-updates, called above, started
	// both.
	for side, rec := range map[string]*recorder{"direct": directRec, "link": linkRec} {
		wait := max(30*time.Second, testenv.Patience)
		deadline := time.Now().Add(wait)
		for {
			n := rec.notes()
			if n["notifications/message"] >= 2 && n["notifications/resources/updated"] >= 1 {
				break
			}
			if time.Now().After(deadline) {
				t.Fatalf("%s: no log messages and resource updates outside calls within %v; notifications read: %v", side, wait, n)
			}
			time.Sleep(50 * time.Millisecond)
		}
	}
	compare("notification methods", directRec.noteKinds(), linkRec.noteKinds())
	compare("server requests", directRec.requests(), linkRec.requests())
	compare("progress notifications", directRec.progress(), linkRec.progress())
	t.Logf("%d differences beyond the documented ones", len(diffs))
	if len(diffs) > 0 {
		directRec.dump(t, "direct")
		linkRec.dump(t, "link")
	}
}

// parityClient connects the client both sides use: 2025-11-25 (the newest revision
// with sessions), every capability a client may declare, a root, and answers to
// sampling and elicitation.
func parityClient(t *testing.T, rec *recorder, tr mcp.Transport) *mcp.ClientSession {
	t.Helper()
	c := mcp.NewClient(&mcp.Implementation{Name: "parity", Version: "1"}, &mcp.ClientOptions{
		Capabilities: &mcp.ClientCapabilities{
			RootsV2:     &mcp.RootCapabilities{ListChanged: true},
			Sampling:    &mcp.SamplingCapabilities{},
			Elicitation: &mcp.ElicitationCapabilities{Form: &mcp.FormElicitationCapabilities{}, URL: &mcp.URLElicitationCapabilities{}},
		},
		CreateMessageHandler: func(context.Context, *mcp.CreateMessageRequest) (*mcp.CreateMessageResult, error) {
			return &mcp.CreateMessageResult{Model: "parity-model", Role: "assistant", Content: &mcp.TextContent{Text: "sampled"}}, nil
		},
		ElicitationHandler: func(_ context.Context, r *mcp.ElicitRequest) (*mcp.ElicitResult, error) {
			if r.Params.URL != "" {
				return &mcp.ElicitResult{Action: "decline"}, nil
			}
			return &mcp.ElicitResult{Action: "cancel"}, nil
		},
	})
	c.AddRoots(&mcp.Root{URI: "file:///tmp/parity", Name: "parity"})
	cs, err := c.Connect(testenv.Context(t), tr, &mcp.ClientSessionOptions{ProtocolVersion: sessionRevision})
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { _ = cs.Close() })
	return cs
}

// everythingArgs are arguments for a tool: what its schema requires, from defaults
// and examples, with a few chosen so that the call stays on this machine.
func everythingArgs(tool *mcp.Tool) map[string]any {
	switch tool.Name {
	case "gzip-file-as-resource":
		return map[string]any{"name": "parity.txt.gz", "data": "data:text/plain;base64,aGVsbG8gcGFyaXR5", "outputType": "resourceLink"}
	case "trigger-long-running-operation":
		return map[string]any{"duration": 1, "steps": 2}
	case "trigger-url-elicitation":
		return map[string]any{"url": "https://example.com/parity", "message": "parity", "elicitationId": "parity-1"}
	}
	schema, _ := json.Marshal(tool.InputSchema)
	var s struct {
		Properties map[string]struct {
			Type    any   `json:"type"`
			Default any   `json:"default"`
			Enum    []any `json:"enum"`
		} `json:"properties"`
		Required []string `json:"required"`
	}
	_ = json.Unmarshal(schema, &s)
	args := map[string]any{}
	for _, name := range s.Required {
		p := s.Properties[name]
		switch {
		case p.Default != nil:
			args[name] = p.Default
		case len(p.Enum) > 0:
			args[name] = p.Enum[0]
		case p.Type == "number" || p.Type == "integer":
			args[name] = 2
		case p.Type == "boolean":
			args[name] = true
		default:
			args[name] = "parity"
		}
	}
	return args
}

func promptArg(name string) string {
	switch name {
	case "resourceType":
		return "Text"
	case "resourceId":
		return "1"
	}
	return "parity"
}

// recorder keeps every message a client read, raw.
type recorder struct {
	mu   sync.Mutex
	msgs []jsonrpc.Message
}

func newRecorder() *recorder { return &recorder{} }

func (r *recorder) see(m jsonrpc.Message) {
	r.mu.Lock()
	defer r.mu.Unlock()
	r.msgs = append(r.msgs, m)
}

func (r *recorder) mark() int {
	r.mu.Lock()
	defer r.mu.Unlock()
	return len(r.msgs)
}

// lastAnswer is the result (or error) of the last response read since mark.
func (r *recorder) lastAnswer(mark int) any {
	r.mu.Lock()
	defer r.mu.Unlock()
	for i := len(r.msgs) - 1; i >= mark; i-- {
		if resp, ok := r.msgs[i].(*jsonrpc.Response); ok {
			if resp.Error != nil {
				return map[string]any{"error": resp.Error.Error()}
			}
			return resp.Result
		}
	}
	return nil
}

func (r *recorder) initialize() any {
	r.mu.Lock()
	defer r.mu.Unlock()
	for _, m := range r.msgs {
		if resp, ok := m.(*jsonrpc.Response); ok {
			return resp.Result
		}
	}
	return nil
}

func (r *recorder) notes() map[string]int {
	r.mu.Lock()
	defer r.mu.Unlock()
	n := map[string]int{}
	for _, m := range r.msgs {
		if req, ok := m.(*jsonrpc.Request); ok && !req.IsCall() {
			n[req.Method]++
		}
	}
	return n
}

// noteKinds are the methods of the notifications read, each once.
func (r *recorder) noteKinds() []string {
	var kinds []string
	for k := range r.notes() {
		kinds = append(kinds, k)
	}
	sort.Strings(kinds)
	return kinds
}

// requests are the server's requests, method and params, in order.
func (r *recorder) requests() []any {
	r.mu.Lock()
	defer r.mu.Unlock()
	var out []any
	for _, m := range r.msgs {
		if req, ok := m.(*jsonrpc.Request); ok && req.IsCall() {
			out = append(out, map[string]any{"method": req.Method, "params": req.Params})
		}
	}
	return out
}

// progress are the params of the progress notifications, in order.
func (r *recorder) progress() []any {
	r.mu.Lock()
	defer r.mu.Unlock()
	var out []any
	for _, m := range r.msgs {
		if req, ok := m.(*jsonrpc.Request); ok && req.Method == "notifications/progress" {
			out = append(out, req.Params)
		}
	}
	return out
}

// observedTransport shows see every message its connection reads.
type observedTransport struct {
	mcp.Transport
	see func(jsonrpc.Message)
}

func (t observedTransport) Connect(ctx context.Context) (mcp.Connection, error) {
	c, err := t.Transport.Connect(ctx)
	if err != nil {
		return nil, err
	}
	return observedConnection{Connection: c, see: t.see}, nil
}

type observedConnection struct {
	mcp.Connection
	see func(jsonrpc.Message)
}

func (c observedConnection) Read(ctx context.Context) (jsonrpc.Message, error) {
	m, err := c.Connection.Read(ctx)
	if err == nil {
		c.see(m)
	}
	return m, err
}

// teeTransport shows see every message of the HTTP responses, JSON or event streams.
type teeTransport struct {
	base http.RoundTripper
	see  func(jsonrpc.Message)
}

func (t teeTransport) RoundTrip(req *http.Request) (*http.Response, error) {
	resp, err := t.base.RoundTrip(req)
	if err != nil {
		return resp, err
	}
	switch ct := resp.Header.Get("Content-Type"); {
	case strings.HasPrefix(ct, "application/json"):
		body, err := io.ReadAll(resp.Body)
		resp.Body.Close()
		if err != nil {
			return nil, err
		}
		if m, err := jsonrpc.DecodeMessage(body); err == nil {
			t.see(m)
		}
		resp.Body = io.NopCloser(bytes.NewReader(body))
	case strings.HasPrefix(ct, "text/event-stream"):
		pr, pw := io.Pipe()
		body := resp.Body
		go func() {
			defer body.Close()
			sc := bufio.NewScanner(body)
			sc.Buffer(make([]byte, 0, 64<<10), 16<<20)
			var data []byte
			for sc.Scan() {
				line := sc.Bytes()
				if v, ok := bytes.CutPrefix(line, []byte("data:")); ok {
					data = append(data, bytes.TrimPrefix(v, []byte(" "))...)
				}
				if len(line) == 0 && len(data) > 0 {
					if m, err := jsonrpc.DecodeMessage(data); err == nil {
						t.see(m)
					}
					data = nil
				}
				if _, err := pw.Write(append(slices.Clone(line), '\n')); err != nil {
					return
				}
			}
			pw.CloseWithError(sc.Err())
		}()
		resp.Body = pr
	}
	return resp, nil
}

// normalize decodes raw JSON (or anything) into plain values, lists of named objects
// sorted by name, so that order alone is no difference.
func normalize(v any) any {
	b, err := json.Marshal(v)
	if err != nil {
		return fmt.Sprint(v)
	}
	var out any
	_ = json.Unmarshal(b, &out)
	return sortNamed(out)
}

// clockReading is a time of day as the reference server writes one into what it makes
// at the moment of a call ("a plaintext resource created at 3:35:14 PM"): the direct
// call and the linked one are made at two moments, which may fall in two seconds, so
// the readings are compared as readings, not by their digits.
var clockReading = regexp.MustCompile(`\b\d{1,2}:\d{2}:\d{2} [AP]M\b`)

func sortNamed(v any) any {
	switch x := v.(type) {
	case string:
		return clockReading.ReplaceAllString(x, "<a time of day>")
	case map[string]any:
		for k, e := range x {
			x[k] = sortNamed(e)
		}
	case []any:
		for i, e := range x {
			x[i] = sortNamed(e)
		}
		key := func(e any) string {
			m, _ := e.(map[string]any)
			for _, k := range []string{"name", "uri", "uriTemplate"} {
				if s, ok := m[k].(string); ok {
					return s
				}
			}
			return ""
		}
		if len(x) > 0 && key(x[0]) != "" {
			sort.SliceStable(x, func(i, j int) bool { return key(x[i]) < key(x[j]) })
		}
	}
	return v
}

// jsonDiff lists where d and l differ, as "path: direct … link …".
func jsonDiff(path string, d, l any) []string {
	dm, dok := d.(map[string]any)
	lm, lok := l.(map[string]any)
	if dok && lok {
		var out []string
		keys := map[string]bool{}
		for k := range dm {
			keys[k] = true
		}
		for k := range lm {
			keys[k] = true
		}
		for _, k := range slices.Sorted(func(yield func(string) bool) {
			for k := range keys {
				if !yield(k) {
					return
				}
			}
		}) {
			dv, din := dm[k]
			lv, lin := lm[k]
			switch {
			case !din:
				out = append(out, fmt.Sprintf("%s.%s: only through the link: %s", path, k, short(lv)))
			case !lin:
				out = append(out, fmt.Sprintf("%s.%s: only direct: %s", path, k, short(dv)))
			default:
				out = append(out, jsonDiff(path+"."+k, dv, lv)...)
			}
		}
		return out
	}
	da, dok := d.([]any)
	la, lok := l.([]any)
	if dok && lok && len(da) == len(la) {
		var out []string
		for i := range da {
			out = append(out, jsonDiff(fmt.Sprintf("%s[%d]", path, i), da[i], la[i])...)
		}
		return out
	}
	if !reflect.DeepEqual(d, l) {
		return []string{fmt.Sprintf("%s: direct %s, link %s", path, short(d), short(l))}
	}
	return nil
}

func short(v any) string {
	b, _ := json.Marshal(v)
	if len(b) > 300 {
		return string(b[:300]) + "…"
	}
	return string(b)
}

func (r *recorder) dump(t *testing.T, side string) {
	r.mu.Lock()
	defer r.mu.Unlock()
	for _, m := range r.msgs {
		b, _ := jsonrpc.EncodeMessage(m)
		t.Logf("%s read %s", side, short(json.RawMessage(b)))
	}
}

// TestEverythingTasksThroughTheLink runs the reference server's tool that requires
// tasks (2025-11-25) with mcp-go, which speaks tasks, directly and through a link: the
// task-augmented call, tasks/list, tasks/get until the task ends, and tasks/result,
// whose content must be the same both ways.
func TestEverythingTasksThroughTheLink(t *testing.T) {
	if testing.Short() {
		t.Skip("fetches a server from npm")
	}
	npx := testenv.NPXPackage(t, everything)
	_, link := bridgedLink(t, "everything", "--sessions", "1", "--", npx, "-y", everything)
	compareTasks(t, mcpgotransport.NewStdio(npx, nil, "-y", everything), link)
}

// TestEverythingTasksThroughARemoteLink is TestEverythingTasksThroughTheLink with the
// server reached over Streamable HTTP (--url): the bridge makes the tasks methods and
// the task-augmented call on the server's session through the SDK.
func TestEverythingTasksThroughARemoteLink(t *testing.T) {
	if testing.Short() {
		t.Skip("fetches a server from npm")
	}
	npx := testenv.NPXPackage(t, everything)
	ln, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		t.Fatal(err)
	}
	port := ln.Addr().(*net.TCPAddr).Port
	ln.Close()
	cmd := exec.Command(npx, "-y", everything, "streamableHttp")
	cmd.Env = append(os.Environ(), fmt.Sprintf("PORT=%d", port))
	cmd.SysProcAttr = &syscall.SysProcAttr{Setpgid: true} // npx runs node as a child: stop both
	cmd.Stderr = testenv.LogWriter(t)
	if err := cmd.Start(); err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() {
		_ = syscall.Kill(-cmd.Process.Pid, syscall.SIGTERM)
		_ = cmd.Wait()
	})
	url := fmt.Sprintf("http://127.0.0.1:%d/mcp", port)
	testenv.Eventually(t, 2*time.Minute, "the server listens", func() bool {
		c, err := net.Dial("tcp", fmt.Sprintf("127.0.0.1:%d", port))
		if err == nil {
			c.Close()
		}
		return err == nil
	})
	_, link := bridgedLink(t, "everything", "--sessions", "1", "--url", url)
	direct, err := mcpgotransport.NewStreamableHTTP(url)
	if err != nil {
		t.Fatal(err)
	}
	compareTasks(t, direct, link)
}

// compareTasks runs the reference server's tool that requires tasks on server, then
// through link, and compares the task's results.
func compareTasks(t *testing.T, server mcpgotransport.Interface, link string) {
	t.Helper()
	// Each side has two minutes (or twice Patience) of its own for the task's whole
	// run: the research takes its time, and the two sides together outlast one budget.
	run := func(t *testing.T, tr mcpgotransport.Interface) []string {
		ctx, cancel := context.WithTimeout(context.Background(), max(2*time.Minute, 2*testenv.Patience))
		defer cancel()
		c := startMCPGo(t, ctx, tr)
		var call mcpgotypes.CallToolRequest
		call.Params.Name = "simulate-research-query"
		call.Params.Arguments = map[string]any{"topic": "parity"}
		ttl := int64(60000)
		call.Params.Task = &mcpgotypes.TaskParams{TTL: &ttl}
		// mcp-go reads the CreateTaskResult as a CallToolResult, which it is not;
		// the task is found with tasks/list.
		if _, err := c.CallTool(ctx, call); err != nil && !strings.Contains(err.Error(), "content is missing") {
			t.Fatalf("task-augmented tools/call: %v", err)
		}
		list, err := c.ListTasks(ctx, mcpgotypes.ListTasksRequest{})
		if err != nil || len(list.Tasks) != 1 {
			t.Fatalf("tasks/list: %+v %v", list, err)
		}
		var get mcpgotypes.GetTaskRequest
		get.Params.TaskId = list.Tasks[0].TaskId
		done, err := c.WaitForTask(ctx, get, 200*time.Millisecond)
		if err != nil || done.Status != mcpgotypes.TaskStatusCompleted {
			t.Fatalf("tasks/get until it ends: %+v %v", done, err)
		}
		var result mcpgotypes.TaskResultRequest
		result.Params.TaskId = get.Params.TaskId
		res, err := c.TaskResult(ctx, result)
		if err != nil {
			t.Fatalf("tasks/result: %v", err)
		}
		var texts []string
		for _, c := range res.Content {
			texts = append(texts, mcpgotypes.GetTextFromContent(c))
		}
		return texts
	}
	var direct, linked []string
	t.Run("directly", func(t *testing.T) {
		direct = run(t, server)
	})
	t.Run("through the link", func(t *testing.T) {
		tr, err := mcpgotransport.NewStreamableHTTP(link)
		if err != nil {
			t.Fatal(err)
		}
		linked = run(t, tr)
	})
	if len(direct) == 0 || !slices.Equal(direct, linked) {
		t.Fatalf("the task's result: directly %q, through the link %q", direct, linked)
	}
}
