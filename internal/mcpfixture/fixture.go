// Package mcpfixture is an MCP server for tests, written with the official Go SDK. It
// serves the tools, resources, prompts and completions the MCP conformance suite's
// server scenarios ask for, so that a bridged copy of it can be run through the suite,
// and a few more that tests of the bridge need: a tool that sleeps until cancelled,
// one that exits its process, one that adds a tool at run time. Tests run it
// in-process over HTTP, or as a stdio child (see RunIfChild).
package mcpfixture

//lint:file-ignore SA1019 the conformance scenarios ask for sampling, which MCP deprecates only from 2026-07-28.

import (
	"context"
	"crypto/rand"
	"encoding/json"
	"sync"
	"time"

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
	// NoTasks makes a server that knows nothing of tasks: it declares no tasks
	// extension and has no tasks methods, and its task tools answer each call as it
	// comes (the gateway keeps their tasks; scripts/conformance.sh runs the tasks
	// scenarios through such a server).
	NoTasks bool
	// Plain declares no logging, no resource subscriptions and no tasks: a server
	// that says it keeps nothing per session, which a bridge may share by default.
	Plain bool
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
	// EnvHashToolName is a tool that says whom the server acts as: a hash of the
	// token in its environment (EnvTokenVar), never the token.
	EnvHashToolName = "env_identity"
	// EnvTokenVar is the variable env_identity hashes.
	EnvTokenVar     = "FIXTURE_TOKEN"
	TemplateURI     = "test://template/{id}/data"
	WatchedResource = "test://watched-resource"
)

// New returns the fixture server. Each call returns a server of its own: state (the
// extra tool, subscriptions) is per server.
func New(opts Options) *mcp.Server {
	f := &fixture{opts: opts}
	_, _ = rand.Read(f.key[:])
	caps := &mcp.ServerCapabilities{Logging: &mcp.LoggingCapabilities{},
		Extensions: map[string]any{TasksExtension: map[string]any{}}}
	if opts.NoTasks {
		caps.Extensions = nil
	}
	so := &mcp.ServerOptions{
		Instructions:      "A server for tests: the conformance suite's fixtures and a few tools to exercise a bridge.",
		CompletionHandler: complete,
		// The SDK keeps the subscriptions; the handlers accept every URI.
		SubscribeHandler:   func(context.Context, *mcp.SubscribeRequest) error { return nil },
		UnsubscribeHandler: func(context.Context, *mcp.UnsubscribeRequest) error { return nil },
		// The tasks extension (tasks.go), besides what the SDK infers.
		Capabilities: caps,
	}
	if opts.Plain {
		so.SubscribeHandler, so.UnsubscribeHandler, so.Capabilities = nil, nil, &mcp.ServerCapabilities{}
	}
	s := mcp.NewServer(&mcp.Implementation{Name: "mcpfixture", Title: "MCP fixture", Version: "1.0.0"}, so)
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

// addTool adds a tool whose arguments are described by schema.
func (f *fixture) addTool(name, description string, schema json.RawMessage, h mcp.ToolHandler) {
	f.server.AddTool(&mcp.Tool{Name: name, Description: description, InputSchema: schema}, h)
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
