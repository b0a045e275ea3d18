package mcpfixture_test

//lint:file-ignore SA1019 the test plays a client of the revisions with sampling and logging.

import (
	"context"
	"encoding/json"
	"os"
	"os/exec"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/modelcontextprotocol/go-sdk/mcp"

	"github.com/toolgate/toolgate/internal/mcpfixture"
	"github.com/toolgate/toolgate/internal/testenv"
)

func TestMain(m *testing.M) {
	mcpfixture.RunIfChild()
	os.Exit(m.Run())
}

// client connects to the fixture in memory, as a client that can sample and elicit
// and that records the notifications it gets.
type client struct {
	*mcp.ClientSession
	mu    sync.Mutex
	notes []string
}

func (c *client) note(s string) {
	c.mu.Lock()
	defer c.mu.Unlock()
	c.notes = append(c.notes, s)
}

// take returns the notifications so far, once there are n of them or testenv.Patience
// has passed: the SDK hands notifications to the handlers on a goroutine of their own,
// so the last may come after the call's result.
func (c *client) take(n int) []string {
	deadline := time.Now().Add(testenv.Patience)
	for {
		c.mu.Lock()
		if len(c.notes) >= n || time.Now().After(deadline) {
			notes := c.notes
			c.notes = nil
			c.mu.Unlock()
			return notes
		}
		c.mu.Unlock()
		time.Sleep(5 * time.Millisecond)
	}
}

func connect(t *testing.T, s *mcp.Server) *client {
	t.Helper()
	ctx := context.Background()
	c := &client{}
	cl := mcp.NewClient(&mcp.Implementation{Name: "test", Version: "1.0.0"}, &mcp.ClientOptions{
		CreateMessageHandler: func(_ context.Context, req *mcp.CreateMessageRequest) (*mcp.CreateMessageResult, error) {
			prompt := req.Params.Messages[0].Content.(*mcp.TextContent).Text
			return &mcp.CreateMessageResult{Role: "assistant", Model: "test", Content: &mcp.TextContent{Text: "echo of " + prompt}}, nil
		},
		ElicitationHandler: func(_ context.Context, req *mcp.ElicitRequest) (*mcp.ElicitResult, error) {
			return &mcp.ElicitResult{Action: "accept", Content: map[string]any{"username": "ada", "email": "ada@example.com"}}, nil
		},
		LoggingMessageHandler: func(_ context.Context, req *mcp.LoggingMessageRequest) {
			c.note("log " + string(req.Params.Level) + " " + req.Params.Data.(string))
		},
		ProgressNotificationHandler: func(_ context.Context, req *mcp.ProgressNotificationClientRequest) {
			b, _ := json.Marshal(req.Params.Progress)
			c.note("progress " + string(b))
		},
	})
	st, ct := mcp.NewInMemoryTransports()
	if _, err := s.Connect(ctx, st, nil); err != nil {
		t.Fatal(err)
	}
	cs, err := cl.Connect(ctx, ct, &mcp.ClientSessionOptions{ProtocolVersion: "2025-11-25"})
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { cs.Close() })
	if err := cs.SetLoggingLevel(ctx, &mcp.SetLoggingLevelParams{Level: "debug"}); err != nil {
		t.Fatal(err)
	}
	c.ClientSession = cs
	return c
}

func resultJSON(t *testing.T, r any) string {
	t.Helper()
	b, err := json.Marshal(r)
	if err != nil {
		t.Fatal(err)
	}
	return string(b)
}

func TestConformanceTools(t *testing.T) {
	c := connect(t, mcpfixture.New(mcpfixture.Options{}))
	ctx := context.Background()
	tests := []struct {
		name, tool string
		args       map[string]any
		meta       mcp.Meta
		want       []string // substrings of the result's JSON
		notes      []string
	}{
		{"simple text", "test_simple_text", nil, nil, []string{`"text":"` + mcpfixture.SimpleText + `"`}, nil},
		{"an image", "test_image_content", nil, nil, []string{`"type":"image"`, `"mimeType":"image/png"`, `"data":"iVBOR`}, nil},
		{"audio", "test_audio_content", nil, nil, []string{`"type":"audio"`, `"mimeType":"audio/wav"`, `"data":"UklGR`}, nil},
		{"an embedded resource", "test_embedded_resource", nil, nil, []string{`"uri":"test://embedded-resource"`, mcpfixture.EmbeddedText}, nil},
		{"mixed content", "test_multiple_content_types", nil, nil, []string{`"type":"text"`, `"type":"image"`, `"type":"resource"`, `test://mixed-content-resource`}, nil},
		{"logging", "test_tool_with_logging", nil, nil, []string{"successfully"}, []string{
			"log info Tool execution started", "log info Tool processing data", "log info Tool execution completed"}},
		{"progress", "test_tool_with_progress", nil, mcp.Meta{"progressToken": "p1"}, []string{"successfully"}, []string{"progress 0", "progress 50", "progress 100"}},
		{"an error", "test_error_handling", nil, nil, []string{`"isError":true`, mcpfixture.ErrorText}, nil},
		{"sampling", "test_sampling", map[string]any{"prompt": "hi"}, nil, []string{"LLM response: echo of hi"}, nil},
		{"elicitation", "test_elicitation", map[string]any{"message": "who?"}, nil, []string{`User response: action=accept, content={\"email\":\"ada@example.com\",\"username\":\"ada\"}`}, nil},
		{"2020-12 schema", mcpfixture.SchemaToolName, map[string]any{"name": "x"}, nil, []string{`Received: {\"name\":\"x\"}`}, nil},
		{"structured output", "echo", map[string]any{"text": "hey"}, nil, []string{`"structuredContent":{"length":3,"text":"hey"}`}, nil},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			res, err := c.CallTool(ctx, &mcp.CallToolParams{Meta: tt.meta, Name: tt.tool, Arguments: tt.args})
			if err != nil {
				t.Fatal(err)
			}
			got := resultJSON(t, res)
			for _, w := range tt.want {
				if !strings.Contains(got, w) {
					t.Errorf("result %s lacks %s", got, w)
				}
			}
			if notes := c.take(len(tt.notes)); strings.Join(notes, "|") != strings.Join(tt.notes, "|") {
				t.Errorf("notifications %q, want %q", notes, tt.notes)
			}
		})
	}

	t.Run("every tool has a description and an object input schema", func(t *testing.T) {
		res, err := c.ListTools(ctx, nil)
		if err != nil {
			t.Fatal(err)
		}
		for _, tool := range res.Tools {
			schema := resultJSON(t, tool.InputSchema)
			if tool.Description == "" || !strings.Contains(schema, `"type":"object"`) {
				t.Errorf("tool %s: description %q, schema %s", tool.Name, tool.Description, schema)
			}
			if tool.Name == mcpfixture.SchemaToolName {
				for _, k := range []string{`"$schema":"https://json-schema.org/draft/2020-12/schema"`, `"$defs"`, `"additionalProperties":false`} {
					if !strings.Contains(schema, k) {
						t.Errorf("2020-12 schema %s lost %s", schema, k)
					}
				}
			}
		}
	})
}

func TestConformanceResourcesPromptsCompletion(t *testing.T) {
	c := connect(t, mcpfixture.New(mcpfixture.Options{}))
	ctx := context.Background()
	read := func(uri string) string {
		t.Helper()
		res, err := c.ReadResource(ctx, &mcp.ReadResourceParams{URI: uri})
		if err != nil {
			t.Fatal(err)
		}
		return resultJSON(t, res)
	}
	if got := read("test://static-text"); !strings.Contains(got, mcpfixture.StaticText) {
		t.Errorf("static text: %s", got)
	}
	if got := read("test://static-binary"); !strings.Contains(got, `"blob":"iVBOR`) || !strings.Contains(got, `"mimeType":"image/png"`) {
		t.Errorf("static binary: %s", got)
	}
	if got := read("test://template/123/data"); !strings.Contains(got, `{\"data\":\"Data for ID: 123\",\"id\":\"123\",\"templateTest\":true}`) {
		t.Errorf("template: %s", got)
	}
	list, err := c.ListResources(ctx, nil)
	if err != nil {
		t.Fatal(err)
	}
	for _, r := range list.Resources {
		if r.Name == "" || r.Description == "" {
			t.Errorf("resource %+v", r)
		}
	}
	if err := c.Subscribe(ctx, &mcp.SubscribeParams{URI: mcpfixture.WatchedResource}); err != nil {
		t.Errorf("subscribe: %v", err)
	}
	if err := c.Unsubscribe(ctx, &mcp.UnsubscribeParams{URI: mcpfixture.WatchedResource}); err != nil {
		t.Errorf("unsubscribe: %v", err)
	}
	for name, want := range map[string]string{
		"test_simple_prompt":                 mcpfixture.SimplePrompt,
		"test_prompt_with_arguments":         `Prompt with arguments: arg1='hello', arg2='world'`,
		"test_prompt_with_embedded_resource": `"uri":"test://x","mimeType":"text/plain","text":"` + mcpfixture.EmbeddedPrompt,
		"test_prompt_with_image":             `"type":"image"`,
	} {
		res, err := c.GetPrompt(ctx, &mcp.GetPromptParams{Name: name, Arguments: map[string]string{"arg1": "hello", "arg2": "world", "resourceUri": "test://x"}})
		if err != nil {
			t.Fatalf("%s: %v", name, err)
		}
		if got := resultJSON(t, res); !strings.Contains(got, want) {
			t.Errorf("%s: %s lacks %s", name, got, want)
		}
	}
	res, err := c.Complete(ctx, &mcp.CompleteParams{
		Ref:      &mcp.CompleteReference{Type: "ref/prompt", Name: "test_prompt_with_arguments"},
		Argument: mcp.CompleteParamsArgument{Name: "arg1", Value: "par"},
	})
	if err != nil {
		t.Fatal(err)
	}
	if got := strings.Join(res.Completion.Values, ","); got != "paris,park,party" {
		t.Errorf("completion: %s", got)
	}
}

func TestStdioChild(t *testing.T) {
	cmd := exec.Command(os.Args[0])
	cmd.Env = append(os.Environ(), mcpfixture.ChildEnv+"=stdio")
	var stderr strings.Builder
	cmd.Stderr = &stderr
	cl := mcp.NewClient(&mcp.Implementation{Name: "test", Version: "1.0.0"}, nil)
	ctx, cancel := context.WithTimeout(context.Background(), testenv.Patience)
	defer cancel()
	cs, err := cl.Connect(ctx, &mcp.CommandTransport{Command: cmd}, nil)
	if err != nil {
		t.Fatal(err)
	}
	res, err := cs.CallTool(ctx, &mcp.CallToolParams{Name: "crash", Arguments: map[string]any{}})
	if err == nil {
		t.Fatalf("crash answered %s", resultJSON(t, res))
	}
	cs.Close()
	if !strings.Contains(stderr.String(), "mcpfixture: serving on stdio") {
		t.Errorf("stderr: %q", stderr.String())
	}
}
