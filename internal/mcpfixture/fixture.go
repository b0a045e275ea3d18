// Package mcpfixture is an MCP server for tests, written with the official Go SDK. It
// serves the tools, resources, prompts and completions the MCP conformance suite's
// server scenarios ask for, so that a bridged copy of it can be run through the suite,
// and a few more that tests of the bridge need: a tool that sleeps until cancelled,
// one that exits its process, one that adds a tool at run time. Tests run it
// in-process over HTTP, or as a stdio child (see RunIfChild).
package mcpfixture

//lint:file-ignore SA1019 the conformance scenarios ask for sampling, which MCP deprecates only from 2026-07-28.

import (
	"bytes"
	"context"
	"crypto/hmac"
	"crypto/rand"
	"crypto/sha256"
	"encoding/base64"
	"encoding/binary"
	"encoding/json"
	"fmt"
	"image"
	"image/color"
	"image/png"
	"os"
	"strings"
	"sync"
	"time"

	"github.com/modelcontextprotocol/go-sdk/jsonrpc"
	"github.com/modelcontextprotocol/go-sdk/mcp"
)

// Options adjusts the fixture to where it runs.
type Options struct {
	// Exit, when set, adds the crash tool, which calls it after its delay. A stdio child
	// passes os.Exit; a server in a test's own process has no such tool.
	Exit func(code int)
	// Cancelled, when set, is told the name of a tool whose call was cancelled while
	// it ran, so that a test sees the cancellation reach the server.
	Cancelled func(tool string)
}

// Texts the conformance scenarios check.
const (
	SimpleText     = "This is a simple text response for testing."
	ErrorText      = "This tool intentionally returns an error for testing"
	StaticText     = "This is the content of the static text resource."
	EmbeddedText   = "This is an embedded resource content."
	SimplePrompt   = "This is a simple prompt for testing."
	EmbeddedPrompt = "Embedded resource content for testing."
	SchemaToolName = "json_schema_2020_12_tool"
	ExtraToolName  = "extra"
	// ExtraPromptName is the prompt test_trigger_prompt_change adds and removes.
	ExtraPromptName = "extra_prompt"
	DottedToolName  = "process.pid"
	// RemoteSchemaToolName is a tool whose input schema refers to another document.
	RemoteSchemaToolName = "remote_schema"
	// LogLaterToolName is a tool whose server sends log messages after the call.
	LogLaterToolName = "log_later"
	// MissingCapabilityToolName is a tool that needs the client's sampling and says
	// so with a JSON-RPC error, MissingSampling's.
	MissingCapabilityToolName = "test_missing_capability"
	TemplateURI               = "test://template/{id}/data"
	WatchedResource           = "test://watched-resource"
)

// New returns the fixture server. Each call returns a server of its own: state (the
// extra tool, subscriptions) is per server.
func New(opts Options) *mcp.Server {
	f := &fixture{opts: opts}
	_, _ = rand.Read(f.key[:])
	s := mcp.NewServer(&mcp.Implementation{Name: "mcpfixture", Title: "MCP fixture", Version: "1.0.0"}, &mcp.ServerOptions{
		Instructions:      "A server for tests: the conformance suite's fixtures and a few tools to exercise a bridge.",
		CompletionHandler: complete,
		// The SDK keeps the subscriptions; the handlers accept every URI.
		SubscribeHandler:   func(context.Context, *mcp.SubscribeRequest) error { return nil },
		UnsubscribeHandler: func(context.Context, *mcp.UnsubscribeRequest) error { return nil },
		// The tasks extension (tasks.go), besides what the SDK infers.
		Capabilities: &mcp.ServerCapabilities{Logging: &mcp.LoggingCapabilities{},
			Extensions: map[string]any{TasksExtension: map[string]any{}}},
	})
	f.server = s
	f.addConformanceTools()
	f.addBridgeTools()
	f.addInputRequiredTools()
	f.addTaskTools()
	f.addResources()
	addPrompts(s)
	return s
}

type fixture struct {
	opts   Options
	server *mcp.Server

	mu          sync.Mutex
	extra       bool
	extraPrompt bool
	key         [32]byte // signs the requestStates of the input-required tools

	taskStore *taskStore
}

func text(s string) *mcp.CallToolResult {
	return &mcp.CallToolResult{Content: []mcp.Content{&mcp.TextContent{Text: s}}}
}

var noArgs = json.RawMessage(`{"type":"object","properties":{}}`)

func (f *fixture) addConformanceTools() {
	s := f.server
	add := func(name, description string, schema json.RawMessage, h mcp.ToolHandler) {
		s.AddTool(&mcp.Tool{Name: name, Description: description, InputSchema: schema}, h)
	}
	add("test_simple_text", "Returns a simple text", noArgs, func(context.Context, *mcp.CallToolRequest) (*mcp.CallToolResult, error) {
		return text(SimpleText), nil
	})
	add("test_image_content", "Returns a PNG image", noArgs, func(context.Context, *mcp.CallToolRequest) (*mcp.CallToolResult, error) {
		return &mcp.CallToolResult{Content: []mcp.Content{&mcp.ImageContent{Data: redPixel, MIMEType: "image/png"}}}, nil
	})
	add("test_audio_content", "Returns a WAV sound", noArgs, func(context.Context, *mcp.CallToolRequest) (*mcp.CallToolResult, error) {
		return &mcp.CallToolResult{Content: []mcp.Content{&mcp.AudioContent{Data: silence, MIMEType: "audio/wav"}}}, nil
	})
	add("test_embedded_resource", "Returns an embedded text resource", noArgs, func(context.Context, *mcp.CallToolRequest) (*mcp.CallToolResult, error) {
		return &mcp.CallToolResult{Content: []mcp.Content{&mcp.EmbeddedResource{Resource: &mcp.ResourceContents{
			URI: "test://embedded-resource", MIMEType: "text/plain", Text: EmbeddedText,
		}}}}, nil
	})
	add("test_multiple_content_types", "Returns text, an image and a resource", noArgs, func(context.Context, *mcp.CallToolRequest) (*mcp.CallToolResult, error) {
		return &mcp.CallToolResult{Content: []mcp.Content{
			&mcp.TextContent{Text: "Multiple content types test:"},
			&mcp.ImageContent{Data: redPixel, MIMEType: "image/png"},
			&mcp.EmbeddedResource{Resource: &mcp.ResourceContents{
				URI: "test://mixed-content-resource", MIMEType: "application/json", Text: `{"test":"data","value":123}`,
			}},
		}}, nil
	})
	add("test_tool_with_logging", "Sends three log messages while it runs", noArgs, func(ctx context.Context, req *mcp.CallToolRequest) (*mcp.CallToolResult, error) {
		for i, msg := range []string{"Tool execution started", "Tool processing data", "Tool execution completed"} {
			if i > 0 {
				if err := sleep(ctx, 50*time.Millisecond); err != nil {
					return nil, err
				}
			}
			if err := req.Session.Log(ctx, &mcp.LoggingMessageParams{Level: "info", Logger: "mcpfixture", Data: msg}); err != nil {
				return nil, err
			}
		}
		return text("Tool with logging executed successfully"), nil
	})
	add("test_tool_with_progress", "Reports progress 0, 50 and 100 of 100", noArgs, func(ctx context.Context, req *mcp.CallToolRequest) (*mcp.CallToolResult, error) {
		token := req.Params.GetProgressToken()
		for i, p := range []float64{0, 50, 100} {
			if i > 0 {
				if err := sleep(ctx, 50*time.Millisecond); err != nil {
					return nil, err
				}
			}
			if token == nil {
				continue
			}
			if err := req.Session.NotifyProgress(ctx, &mcp.ProgressNotificationParams{ProgressToken: token, Progress: p, Total: 100}); err != nil {
				return nil, err
			}
		}
		return text("Tool with progress executed successfully"), nil
	})
	add("test_error_handling", "Always fails", noArgs, func(context.Context, *mcp.CallToolRequest) (*mcp.CallToolResult, error) {
		res := text(ErrorText)
		res.IsError = true
		return res, nil
	})
	add("test_sampling", "Asks the client's model to complete a prompt",
		json.RawMessage(`{"type":"object","properties":{"prompt":{"type":"string","description":"The prompt to send to the LLM"}},"required":["prompt"]}`),
		sampling)
	add("test_elicitation", "Asks the user for a username and an e-mail address",
		json.RawMessage(`{"type":"object","properties":{"message":{"type":"string","description":"The message to show the user"}},"required":["message"]}`),
		elicit("User response", func(args map[string]any) *mcp.ElicitParams {
			msg, _ := args["message"].(string)
			return &mcp.ElicitParams{Message: msg, RequestedSchema: map[string]any{
				"type": "object",
				"properties": map[string]any{
					"username": map[string]any{"type": "string", "description": "User's response"},
					"email":    map[string]any{"type": "string", "description": "User's email address"},
				},
				"required": []string{"username", "email"},
			}}
		}))
	add("test_elicitation_sep1034_defaults", "Asks for input with a default for every primitive type", noArgs,
		elicit("Elicitation completed", func(map[string]any) *mcp.ElicitParams {
			return &mcp.ElicitParams{Message: "Please review your details", RequestedSchema: map[string]any{
				"type": "object",
				"properties": map[string]any{
					"name":     map[string]any{"type": "string", "default": "John Doe"},
					"age":      map[string]any{"type": "integer", "default": 30},
					"score":    map[string]any{"type": "number", "default": 95.5},
					"status":   map[string]any{"type": "string", "enum": []string{"active", "inactive", "pending"}, "default": "active"},
					"verified": map[string]any{"type": "boolean", "default": true},
				},
			}}
		}))
	add("test_elicitation_sep1330_enums", "Asks for input with every kind of enum", noArgs,
		elicit("Elicitation completed", func(map[string]any) *mcp.ElicitParams {
			titled := func(pairs ...string) []map[string]string {
				var out []map[string]string
				for i := 0; i < len(pairs); i += 2 {
					out = append(out, map[string]string{"const": pairs[i], "title": pairs[i+1]})
				}
				return out
			}
			return &mcp.ElicitParams{Message: "Please choose", RequestedSchema: map[string]any{
				"type": "object",
				"properties": map[string]any{
					"untitledSingle": map[string]any{"type": "string", "enum": []string{"option1", "option2", "option3"}},
					"titledSingle":   map[string]any{"type": "string", "oneOf": titled("value1", "First Option", "value2", "Second Option", "value3", "Third Option")},
					"legacyEnum": map[string]any{"type": "string", "enum": []string{"opt1", "opt2", "opt3"},
						"enumNames": []string{"Option One", "Option Two", "Option Three"}},
					"untitledMulti": map[string]any{"type": "array", "items": map[string]any{"type": "string", "enum": []string{"option1", "option2", "option3"}}},
					"titledMulti":   map[string]any{"type": "array", "items": map[string]any{"anyOf": titled("value1", "First Choice", "value2", "Second Choice", "value3", "Third Choice")}},
				},
			}}
		}))
	add(SchemaToolName, "Tool with JSON Schema 2020-12 features", json.RawMessage(`{
		"$schema": "https://json-schema.org/draft/2020-12/schema",
		"type": "object",
		"$defs": {"address": {"type": "object", "properties": {"street": {"type": "string"}, "city": {"type": "string"}}}},
		"properties": {"name": {"type": "string"}, "address": {"$ref": "#/$defs/address"}},
		"additionalProperties": false
	}`), func(_ context.Context, req *mcp.CallToolRequest) (*mcp.CallToolResult, error) {
		return text("Received: " + string(req.Params.Arguments)), nil
	})
	// The diagnostic tools of the 2026-07-28 scenarios (server-stateless).
	add("test_logging_tool", "Sends a log message while it runs", noArgs, func(ctx context.Context, req *mcp.CallToolRequest) (*mcp.CallToolResult, error) {
		if err := req.Session.Log(ctx, &mcp.LoggingMessageParams{Level: "info", Logger: "mcpfixture", Data: "logging tool ran"}); err != nil {
			return nil, err
		}
		return text("Logging tool executed"), nil
	})
	add("test_streaming_elicitation", "Asks the user a question before it answers", noArgs,
		elicit("Streaming elicitation completed", func(map[string]any) *mcp.ElicitParams {
			return &mcp.ElicitParams{Message: "Continue?", RequestedSchema: map[string]any{
				"type": "object", "properties": map[string]any{"ok": map[string]any{"type": "boolean"}},
			}}
		}))
	add("test_trigger_tool_change", "Adds the extra tool, or removes it; clients hear tools/list_changed", noArgs,
		func(context.Context, *mcp.CallToolRequest) (*mcp.CallToolResult, error) {
			return f.toggleExtra(), nil
		})
	add("test_trigger_prompt_change", "Adds the extra prompt, or removes it; clients hear prompts/list_changed", noArgs,
		func(context.Context, *mcp.CallToolRequest) (*mcp.CallToolResult, error) {
			return f.toggleExtraPrompt(), nil
		})
	add(MissingCapabilityToolName, "Needs the client's sampling: refused with -32021 (MissingRequiredClientCapability) when the client did not declare it", noArgs,
		func(_ context.Context, req *mcp.CallToolRequest) (*mcp.CallToolResult, error) {
			if caps := req.ClientCapabilities(); caps == nil || caps.Sampling == nil {
				return nil, MissingSampling()
			}
			return text("The client declared sampling"), nil
		})
	add("test_custom_headers", "Says back its region, which a 2026-07-28 call mirrors in the Mcp-Param-Region header",
		json.RawMessage(`{"type":"object","properties":{"region":{"type":"string","x-mcp-header":"Region"}},"required":["region"]}`),
		func(_ context.Context, req *mcp.CallToolRequest) (*mcp.CallToolResult, error) {
			var args struct {
				Region string `json:"region"`
			}
			if err := json.Unmarshal(req.Params.Arguments, &args); err != nil {
				return nil, err
			}
			return text("Region: " + args.Region), nil
		})
	add("test_reconnection", "Closes its SSE stream mid-call, when it has one, and answers after a moment", noArgs, func(ctx context.Context, req *mcp.CallToolRequest) (*mcp.CallToolResult, error) {
		if req.Extra != nil && req.Extra.CloseSSEStream != nil {
			req.Extra.CloseSSEStream(mcp.CloseSSEStreamArgs{RetryAfter: 100 * time.Millisecond})
		}
		if err := sleep(ctx, 200*time.Millisecond); err != nil {
			return nil, err
		}
		return text("Reconnection test completed"), nil
	})
}

// sampling asks the client's model by returning an input request: on 2026-07-28 the
// client answers it and calls again; before, the SDK asks the client with
// sampling/createMessage and calls again itself.
func sampling(_ context.Context, req *mcp.CallToolRequest) (*mcp.CallToolResult, error) {
	if r, ok := req.Params.InputResponses["sampling"].(*mcp.CreateMessageWithToolsResult); ok {
		return text("LLM response: " + samplingText(r)), nil
	}
	var args struct {
		Prompt string `json:"prompt"`
	}
	if err := json.Unmarshal(req.Params.Arguments, &args); err != nil {
		return nil, err
	}
	return &mcp.CallToolResult{InputRequests: mcp.InputRequestMap{"sampling": &mcp.CreateMessageParams{
		Messages:  []*mcp.SamplingMessage{{Role: "user", Content: &mcp.TextContent{Text: args.Prompt}}},
		MaxTokens: 100,
	}}}, nil
}

// elicit asks the user as sampling asks the model, and reports the answer after label.
func elicit(label string, params func(args map[string]any) *mcp.ElicitParams) mcp.ToolHandler {
	return func(_ context.Context, req *mcp.CallToolRequest) (*mcp.CallToolResult, error) {
		if r, ok := req.Params.InputResponses["input"].(*mcp.ElicitResult); ok {
			content, err := json.Marshal(r.Content)
			if err != nil {
				return nil, err
			}
			return text(fmt.Sprintf("%s: action=%s, content=%s", label, r.Action, content)), nil
		}
		var args map[string]any
		if len(req.Params.Arguments) > 0 {
			if err := json.Unmarshal(req.Params.Arguments, &args); err != nil {
				return nil, err
			}
		}
		return &mcp.CallToolResult{InputRequests: mcp.InputRequestMap{"input": params(args)}}, nil
	}
}

type echoIn struct {
	Text string `json:"text" jsonschema:"what to say back"`
}

type echoOut struct {
	Text   string `json:"text"`
	Length int    `json:"length"`
}

type sleepIn struct {
	MS int `json:"ms,omitempty" jsonschema:"how long to sleep; until cancelled when absent"`
}

type crashIn struct {
	AfterMS int `json:"after_ms,omitempty" jsonschema:"how long to run before exiting"`
}

type pidOut struct {
	PID int `json:"pid"`
}

type updateIn struct {
	URI string `json:"uri"`
}

type logLaterIn struct {
	MS   int    `json:"ms,omitempty" jsonschema:"how long after the call the messages are sent"`
	Text string `json:"text" jsonschema:"what the messages say"`
}

func (f *fixture) addBridgeTools() {
	s := f.server
	mcp.AddTool(s, &mcp.Tool{Name: "echo", Title: "Echo", Description: "Says the text back, with its length",
		Annotations: &mcp.ToolAnnotations{ReadOnlyHint: true}},
		func(_ context.Context, _ *mcp.CallToolRequest, in echoIn) (*mcp.CallToolResult, echoOut, error) {
			return nil, echoOut{Text: in.Text, Length: len(in.Text)}, nil
		})
	mcp.AddTool(s, &mcp.Tool{Name: DottedToolName, Description: "The server process's id (a name with a dot)"},
		func(context.Context, *mcp.CallToolRequest, struct{}) (*mcp.CallToolResult, pidOut, error) {
			return nil, pidOut{PID: os.Getpid()}, nil
		})
	mcp.AddTool(s, &mcp.Tool{Name: "sleep", Description: "Sleeps for ms milliseconds, or until cancelled"},
		func(ctx context.Context, req *mcp.CallToolRequest, in sleepIn) (*mcp.CallToolResult, any, error) {
			if token := req.Params.GetProgressToken(); token != nil {
				_ = req.Session.NotifyProgress(ctx, &mcp.ProgressNotificationParams{
					ProgressToken: token, Message: fmt.Sprintf("sleeping in pid %d", os.Getpid()),
				})
			}
			d := time.Duration(in.MS) * time.Millisecond
			if in.MS == 0 {
				d = time.Hour
			}
			if err := sleep(ctx, d); err != nil {
				if f.opts.Cancelled != nil {
					f.opts.Cancelled("sleep")
				}
				return nil, nil, err
			}
			return text(fmt.Sprintf("slept %v", d)), nil, nil
		})
	if f.opts.Exit != nil {
		mcp.AddTool(s, &mcp.Tool{Name: "crash", Description: "Exits the server process mid-call, after after_ms"},
			func(ctx context.Context, req *mcp.CallToolRequest, in crashIn) (*mcp.CallToolResult, any, error) {
				if err := sleep(ctx, time.Duration(in.AfterMS)*time.Millisecond); err != nil {
					return nil, nil, err
				}
				if token := req.Params.GetProgressToken(); token != nil {
					_ = req.Session.NotifyProgress(ctx, &mcp.ProgressNotificationParams{ProgressToken: token, Message: "exiting"})
				}
				f.opts.Exit(3)
				return nil, nil, nil
			})
	}
	// A schema a gateway may not be able to compile: it refers to a document elsewhere.
	s.AddTool(&mcp.Tool{Name: RemoteSchemaToolName, Description: "Takes arguments described by a schema elsewhere",
		InputSchema: json.RawMessage(`{"type":"object","properties":{"thing":{"$ref":"https://schemas.example.com/thing.json"}}}`)},
		func(_ context.Context, req *mcp.CallToolRequest) (*mcp.CallToolResult, error) {
			return text("Received: " + string(req.Params.Arguments)), nil
		})
	mcp.AddTool(s, &mcp.Tool{Name: "toggle_extra", Description: "Adds the extra tool, or removes it; clients hear tools/list_changed"},
		func(context.Context, *mcp.CallToolRequest, struct{}) (*mcp.CallToolResult, any, error) {
			return f.toggleExtra(), nil, nil
		})
	mcp.AddTool(s, &mcp.Tool{Name: LogLaterToolName, Description: "Answers at once; ms later, outside any call, logs text at debug and at info"},
		func(_ context.Context, req *mcp.CallToolRequest, in logLaterIn) (*mcp.CallToolResult, any, error) {
			ss := req.Session
			go func() {
				time.Sleep(time.Duration(in.MS) * time.Millisecond)
				for _, level := range []mcp.LoggingLevel{"debug", "info"} {
					_ = ss.Log(context.Background(), &mcp.LoggingMessageParams{Level: level, Logger: "fixture", Data: in.Text})
				}
			}()
			return text("logging later"), nil, nil
		})
	mcp.AddTool(s, &mcp.Tool{Name: "update_resource", Description: "Tells subscribers that a resource changed"},
		func(ctx context.Context, _ *mcp.CallToolRequest, in updateIn) (*mcp.CallToolResult, any, error) {
			if err := s.ResourceUpdated(ctx, &mcp.ResourceUpdatedNotificationParams{URI: in.URI}); err != nil {
				return nil, nil, err
			}
			return text("updated " + in.URI), nil, nil
		})
}

func (f *fixture) addResources() {
	s := f.server
	s.AddResource(&mcp.Resource{URI: "test://static-text", Name: "static-text", Description: "A static text resource", MIMEType: "text/plain"},
		func(context.Context, *mcp.ReadResourceRequest) (*mcp.ReadResourceResult, error) {
			return &mcp.ReadResourceResult{Contents: []*mcp.ResourceContents{{URI: "test://static-text", MIMEType: "text/plain", Text: StaticText}}}, nil
		})
	s.AddResource(&mcp.Resource{URI: "test://static-binary", Name: "static-binary", Description: "A static PNG image", MIMEType: "image/png"},
		func(context.Context, *mcp.ReadResourceRequest) (*mcp.ReadResourceResult, error) {
			return &mcp.ReadResourceResult{Contents: []*mcp.ResourceContents{{URI: "test://static-binary", MIMEType: "image/png", Blob: redPixel}}}, nil
		})
	s.AddResource(&mcp.Resource{URI: WatchedResource, Name: "watched-resource", Description: "A resource to subscribe to", MIMEType: "text/plain"},
		func(context.Context, *mcp.ReadResourceRequest) (*mcp.ReadResourceResult, error) {
			return &mcp.ReadResourceResult{Contents: []*mcp.ResourceContents{{URI: WatchedResource, MIMEType: "text/plain", Text: "watched"}}}, nil
		})
	s.AddResourceTemplate(&mcp.ResourceTemplate{URITemplate: TemplateURI, Name: "template-data", Description: "Data for an id", MIMEType: "application/json"},
		func(_ context.Context, req *mcp.ReadResourceRequest) (*mcp.ReadResourceResult, error) {
			id, ok := strings.CutPrefix(req.Params.URI, "test://template/")
			id, ok2 := strings.CutSuffix(id, "/data")
			if !ok || !ok2 || id == "" {
				return nil, mcp.ResourceNotFoundError(req.Params.URI)
			}
			body, err := json.Marshal(map[string]any{"id": id, "templateTest": true, "data": "Data for ID: " + id})
			if err != nil {
				return nil, err
			}
			return &mcp.ReadResourceResult{Contents: []*mcp.ResourceContents{{URI: req.Params.URI, MIMEType: "application/json", Text: string(body)}}}, nil
		})
}

func addPrompts(s *mcp.Server) {
	user := func(c mcp.Content) *mcp.PromptMessage { return &mcp.PromptMessage{Role: "user", Content: c} }
	s.AddPrompt(&mcp.Prompt{Name: "test_simple_prompt", Description: "A prompt without arguments"},
		func(context.Context, *mcp.GetPromptRequest) (*mcp.GetPromptResult, error) {
			return &mcp.GetPromptResult{Messages: []*mcp.PromptMessage{user(&mcp.TextContent{Text: SimplePrompt})}}, nil
		})
	s.AddPrompt(&mcp.Prompt{Name: "test_prompt_with_arguments", Description: "A prompt with two arguments", Arguments: []*mcp.PromptArgument{
		{Name: "arg1", Description: "First test argument", Required: true},
		{Name: "arg2", Description: "Second test argument", Required: true},
	}}, func(_ context.Context, req *mcp.GetPromptRequest) (*mcp.GetPromptResult, error) {
		a := req.Params.Arguments
		return &mcp.GetPromptResult{Messages: []*mcp.PromptMessage{
			user(&mcp.TextContent{Text: fmt.Sprintf("Prompt with arguments: arg1='%s', arg2='%s'", a["arg1"], a["arg2"])}),
		}}, nil
	})
	s.AddPrompt(&mcp.Prompt{Name: "test_prompt_with_embedded_resource", Description: "A prompt that embeds a resource", Arguments: []*mcp.PromptArgument{
		{Name: "resourceUri", Description: "URI of the resource to embed", Required: true},
	}}, func(_ context.Context, req *mcp.GetPromptRequest) (*mcp.GetPromptResult, error) {
		return &mcp.GetPromptResult{Messages: []*mcp.PromptMessage{
			user(&mcp.EmbeddedResource{Resource: &mcp.ResourceContents{URI: req.Params.Arguments["resourceUri"], MIMEType: "text/plain", Text: EmbeddedPrompt}}),
			user(&mcp.TextContent{Text: "Please process the embedded resource above."}),
		}}, nil
	})
	s.AddPrompt(&mcp.Prompt{Name: "test_prompt_with_image", Description: "A prompt with an image"},
		func(context.Context, *mcp.GetPromptRequest) (*mcp.GetPromptResult, error) {
			return &mcp.GetPromptResult{Messages: []*mcp.PromptMessage{
				user(&mcp.ImageContent{Data: redPixel, MIMEType: "image/png"}),
				user(&mcp.TextContent{Text: "Please analyze the image above."}),
			}}, nil
		})
}

// complete suggests values for the prompt's arguments and the template's id.
func complete(_ context.Context, req *mcp.CompleteRequest) (*mcp.CompleteResult, error) {
	var candidates []string
	switch ref := req.Params.Ref; {
	case ref == nil:
	case ref.Type == "ref/prompt" && ref.Name == "test_prompt_with_arguments":
		candidates = []string{"paris", "park", "party"}
	case ref.Type == "ref/resource" && ref.URI == TemplateURI && req.Params.Argument.Name == "id":
		candidates = []string{"1", "2", "3", "123"}
	}
	values := []string{}
	for _, c := range candidates {
		if strings.HasPrefix(c, req.Params.Argument.Value) {
			values = append(values, c)
		}
	}
	return &mcp.CompleteResult{Completion: mcp.CompletionResultDetails{Values: values, Total: len(values)}}, nil
}

func sleep(ctx context.Context, d time.Duration) error {
	t := time.NewTimer(d)
	defer t.Stop()
	select {
	case <-t.C:
		return nil
	case <-ctx.Done():
		return ctx.Err()
	}
}

// redPixel is a 1x1 red PNG.
var redPixel = func() []byte {
	img := image.NewRGBA(image.Rect(0, 0, 1, 1))
	img.Set(0, 0, color.RGBA{R: 255, A: 255})
	var b bytes.Buffer
	if err := png.Encode(&b, img); err != nil {
		panic(err)
	}
	return b.Bytes()
}()

// silence is a WAV file of 10 ms of 8 kHz, 8-bit mono silence.
var silence = func() []byte {
	const rate, samples = 8000, 80
	var b bytes.Buffer
	w := func(v any) { _ = binary.Write(&b, binary.LittleEndian, v) }
	b.WriteString("RIFF")
	w(uint32(36 + samples))
	b.WriteString("WAVEfmt ")
	w(uint32(16))
	w(uint16(1)) // PCM
	w(uint16(1)) // mono
	w(uint32(rate))
	w(uint32(rate)) // bytes per second
	w(uint16(1))    // block align
	w(uint16(8))    // bits per sample
	b.WriteString("data")
	w(uint32(samples))
	b.Write(bytes.Repeat([]byte{128}, samples))
	return b.Bytes()
}()

// toggleExtra adds the extra tool, or removes it.
func (f *fixture) toggleExtra() *mcp.CallToolResult {
	f.mu.Lock()
	defer f.mu.Unlock()
	f.extra = !f.extra
	if !f.extra {
		f.server.RemoveTools(ExtraToolName)
		return text("extra removed")
	}
	f.server.AddTool(&mcp.Tool{Name: ExtraToolName, Description: "A tool that comes and goes", InputSchema: noArgs},
		func(context.Context, *mcp.CallToolRequest) (*mcp.CallToolResult, error) {
			return text("extra here"), nil
		})
	return text("extra added")
}

// toggleExtraPrompt adds the extra prompt, or removes it.
func (f *fixture) toggleExtraPrompt() *mcp.CallToolResult {
	f.mu.Lock()
	defer f.mu.Unlock()
	f.extraPrompt = !f.extraPrompt
	if !f.extraPrompt {
		f.server.RemovePrompts(ExtraPromptName)
		return text("extra prompt removed")
	}
	f.server.AddPrompt(&mcp.Prompt{Name: ExtraPromptName, Description: "A prompt that comes and goes"},
		func(context.Context, *mcp.GetPromptRequest) (*mcp.GetPromptResult, error) {
			return &mcp.GetPromptResult{Messages: []*mcp.PromptMessage{{Role: "user", Content: &mcp.TextContent{Text: "extra"}}}}, nil
		})
	return text("extra prompt added")
}

// The tools of the 2026-07-28 input-required scenarios (SEP-2322): each answers a
// call without the input it needs with an input_required result, under keys of its
// own, and completes once the client calls again with the answers. A client of an
// older revision is asked by the SDK itself, which then calls the handler again.
func (f *fixture) addInputRequiredTools() {
	s := f.server
	add := func(name, description string, h mcp.ToolHandler) {
		s.AddTool(&mcp.Tool{Name: name, Description: description, InputSchema: noArgs}, h)
	}
	askName := func(message, property string) *mcp.ElicitParams {
		return &mcp.ElicitParams{Message: message, RequestedSchema: map[string]any{
			"type": "object", "properties": map[string]any{property: map[string]any{"type": "string"}}, "required": []string{property},
		}}
	}
	greeting := func(n int) *mcp.CreateMessageParams {
		return &mcp.CreateMessageParams{
			Messages:  []*mcp.SamplingMessage{{Role: "user", Content: &mcp.TextContent{Text: "Generate a greeting"}}},
			MaxTokens: int64(n),
		}
	}
	add("test_input_required_result_elicitation", "Asks the user's name (key user_name), then greets them",
		func(_ context.Context, req *mcp.CallToolRequest) (*mcp.CallToolResult, error) {
			if r, ok := req.Params.InputResponses["user_name"].(*mcp.ElicitResult); ok {
				return text(fmt.Sprintf("Hello, %v!", r.Content["name"])), nil
			}
			return &mcp.CallToolResult{InputRequests: mcp.InputRequestMap{"user_name": askName("What is your name?", "name")}}, nil
		})
	add("test_input_required_result_sampling", "Asks the client's model a question (key capital_question)",
		func(_ context.Context, req *mcp.CallToolRequest) (*mcp.CallToolResult, error) {
			if r, ok := req.Params.InputResponses["capital_question"].(*mcp.CreateMessageWithToolsResult); ok {
				return text("LLM response: " + samplingText(r)), nil
			}
			return &mcp.CallToolResult{InputRequests: mcp.InputRequestMap{"capital_question": &mcp.CreateMessageParams{
				Messages:  []*mcp.SamplingMessage{{Role: "user", Content: &mcp.TextContent{Text: "What is the capital of France?"}}},
				MaxTokens: 100,
			}}}, nil
		})
	add("test_input_required_result_list_roots", "Asks the client's roots (key client_roots), then lists them",
		func(_ context.Context, req *mcp.CallToolRequest) (*mcp.CallToolResult, error) {
			if r, ok := req.Params.InputResponses["client_roots"].(*mcp.ListRootsResult); ok {
				var uris []string
				for _, root := range r.Roots {
					uris = append(uris, root.URI)
				}
				return text("Roots: " + strings.Join(uris, ", ")), nil
			}
			return &mcp.CallToolResult{InputRequests: mcp.InputRequestMap{"client_roots": &mcp.ListRootsParams{}}}, nil
		})
	add("test_input_required_result_request_state", "Asks for a confirmation (key confirm) with a signed requestState it checks on the retry",
		func(_ context.Context, req *mcp.CallToolRequest) (*mcp.CallToolResult, error) {
			if _, ok := req.Params.InputResponses["confirm"].(*mcp.ElicitResult); ok {
				if !f.openState(req.Params.RequestState, "request_state") {
					return nil, invalidState()
				}
				return text("state-ok: the requestState came back as it was given"), nil
			}
			return &mcp.CallToolResult{InputRequests: mcp.InputRequestMap{"confirm": &mcp.ElicitParams{Message: "Please confirm",
				RequestedSchema: map[string]any{"type": "object", "properties": map[string]any{"ok": map[string]any{"type": "boolean"}}, "required": []string{"ok"}}}},
				RequestState: f.sealState("request_state")}, nil
		})
	add("test_input_required_result_multiple_inputs", "Asks for a name, a sampled greeting and the roots at once",
		func(_ context.Context, req *mcp.CallToolRequest) (*mcp.CallToolResult, error) {
			in := req.Params.InputResponses
			_, named := in["user_name"].(*mcp.ElicitResult)
			_, greeted := in["greeting"].(*mcp.CreateMessageWithToolsResult)
			_, rooted := in["client_roots"].(*mcp.ListRootsResult)
			if named && greeted && rooted {
				if !f.openState(req.Params.RequestState, "multiple_inputs") {
					return nil, invalidState()
				}
				return text("All inputs received"), nil
			}
			return &mcp.CallToolResult{InputRequests: mcp.InputRequestMap{
				"user_name":    askName("What is your name?", "name"),
				"greeting":     greeting(50),
				"client_roots": &mcp.ListRootsParams{},
			}, RequestState: f.sealState("multiple_inputs")}, nil
		})
	add("test_input_required_result_multi_round", "Asks for a name (step1), then a colour (step2), each round with a new requestState",
		func(_ context.Context, req *mcp.CallToolRequest) (*mcp.CallToolResult, error) {
			in := req.Params.InputResponses
			if _, ok := in["step2"].(*mcp.ElicitResult); ok {
				if !f.openState(req.Params.RequestState, "multi_round.2") {
					return nil, invalidState()
				}
				return text("Both steps done"), nil
			}
			if _, ok := in["step1"].(*mcp.ElicitResult); ok {
				if !f.openState(req.Params.RequestState, "multi_round.1") {
					return nil, invalidState()
				}
				return &mcp.CallToolResult{InputRequests: mcp.InputRequestMap{"step2": askName("Step 2: What is your favorite color?", "color")},
					RequestState: f.sealState("multi_round.2")}, nil
			}
			return &mcp.CallToolResult{InputRequests: mcp.InputRequestMap{"step1": askName("Step 1: What is your name?", "name")},
				RequestState: f.sealState("multi_round.1")}, nil
		})
	add("test_input_required_result_tampered_state", "Asks for a confirmation with a signed requestState, and refuses one that was changed",
		func(_ context.Context, req *mcp.CallToolRequest) (*mcp.CallToolResult, error) {
			if req.Params.RequestState != "" || len(req.Params.InputResponses) > 0 {
				if !f.openState(req.Params.RequestState, "tampered_state") {
					return nil, invalidState()
				}
				return text("state-ok"), nil
			}
			return &mcp.CallToolResult{InputRequests: mcp.InputRequestMap{"confirm": &mcp.ElicitParams{Message: "Please confirm",
				RequestedSchema: map[string]any{"type": "object", "properties": map[string]any{"ok": map[string]any{"type": "boolean"}}}}},
				RequestState: f.sealState("tampered_state")}, nil
		})
	add("test_input_required_result_capabilities", "Asks only what the client declared it can answer: a sampled message, the user, its roots",
		func(_ context.Context, req *mcp.CallToolRequest) (*mcp.CallToolResult, error) {
			if len(req.Params.InputResponses) > 0 {
				return text("Inputs received"), nil
			}
			caps := req.ClientCapabilities()
			asks := mcp.InputRequestMap{}
			if caps != nil && caps.Sampling != nil {
				asks["greeting"] = greeting(50)
			}
			if caps != nil && caps.Elicitation != nil {
				asks["user_name"] = askName("What is your name?", "name")
			}
			if caps != nil && (caps.RootsV2 != nil || caps.Roots.ListChanged) {
				asks["client_roots"] = &mcp.ListRootsParams{}
			}
			if len(asks) == 0 {
				return text("The client can be asked nothing"), nil
			}
			return &mcp.CallToolResult{InputRequests: asks}, nil
		})
	s.AddPrompt(&mcp.Prompt{Name: "test_input_required_result_prompt", Description: "Asks the user for the context the prompt uses (key user_context)"},
		func(_ context.Context, req *mcp.GetPromptRequest) (*mcp.GetPromptResult, error) {
			if r, ok := req.Params.InputResponses["user_context"].(*mcp.ElicitResult); ok {
				return &mcp.GetPromptResult{Messages: []*mcp.PromptMessage{{Role: "user",
					Content: &mcp.TextContent{Text: fmt.Sprintf("Use this context: %v", r.Content["context"])}}}}, nil
			}
			return &mcp.GetPromptResult{InputRequests: mcp.InputRequestMap{"user_context": askName("What context should the prompt use?", "context")}}, nil
		})
}

func samplingText(r *mcp.CreateMessageWithToolsResult) string {
	var b strings.Builder
	for _, c := range r.Content {
		if t, ok := c.(*mcp.TextContent); ok {
			b.WriteString(t.Text)
		}
	}
	return b.String()
}

// sealState is a requestState that says what it is for, signed with the fixture's
// key, so that a changed one is noticed (openState).
func (f *fixture) sealState(what string) string {
	mac := hmac.New(sha256.New, f.key[:])
	mac.Write([]byte(what))
	return what + "." + base64.RawURLEncoding.EncodeToString(mac.Sum(nil))
}

// openState reports whether state is one sealState made for what.
func (f *fixture) openState(state, what string) bool {
	return hmac.Equal([]byte(f.sealState(what)), []byte(state))
}

// MissingSampling is the JSON-RPC error of a request that needs the client's
// sampling, which the client did not declare: -32021, with the capability it needs
// in data.requiredCapabilities.
func MissingSampling() *jsonrpc.Error {
	// Written out: the SDK's ClientCapabilities would name roots too.
	return &jsonrpc.Error{Code: CodeMissingCapability, Message: "Missing required client capability: sampling",
		Data: json.RawMessage(`{"requiredCapabilities":{"sampling":{}}}`)}
}

func invalidState() error {
	return &jsonrpc.Error{Code: jsonrpc.CodeInvalidParams, Message: "requestState failed its integrity check"}
}
