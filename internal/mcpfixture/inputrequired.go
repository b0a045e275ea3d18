package mcpfixture

//lint:file-ignore SA1019 the conformance scenarios ask for sampling, which MCP deprecates only from 2026-07-28.

import (
	"context"
	"crypto/hmac"
	"crypto/sha256"
	"encoding/base64"
	"encoding/json"
	"fmt"
	"strings"

	"github.com/modelcontextprotocol/go-sdk/jsonrpc"
	"github.com/modelcontextprotocol/go-sdk/mcp"
)

// The tools of the 2026-07-28 input-required scenarios (SEP-2322): each answers a
// call without the input it needs with an input_required result, under keys of its
// own, and completes once the client calls again with the answers. A client of an
// older revision is asked by the SDK itself, which then calls the handler again.
func (f *fixture) addInputRequiredTools() {
	f.addOneInputTools()
	f.addStatefulInputTools()
	f.addInputRequiredPrompt()
}

// addOneInputTools adds the tools that ask one thing, or what the client declared
// it can answer, and keep no state between the rounds.
func (f *fixture) addOneInputTools() {
	f.addTool("test_input_required_result_elicitation", "Asks the user's name (key user_name), then greets them", noArgs,
		func(_ context.Context, req *mcp.CallToolRequest) (*mcp.CallToolResult, error) {
			if r, ok := req.Params.InputResponses["user_name"].(*mcp.ElicitResult); ok {
				return text(fmt.Sprintf("Hello, %v!", r.Content["name"])), nil
			}
			return &mcp.CallToolResult{InputRequests: mcp.InputRequestMap{"user_name": askFor("What is your name?", "name")}}, nil
		})
	f.addTool("test_input_required_result_sampling", "Asks the client's model a question (key capital_question)", noArgs,
		func(_ context.Context, req *mcp.CallToolRequest) (*mcp.CallToolResult, error) {
			if r, ok := req.Params.InputResponses["capital_question"].(*mcp.CreateMessageWithToolsResult); ok {
				return text("LLM response: " + samplingText(r)), nil
			}
			return &mcp.CallToolResult{InputRequests: mcp.InputRequestMap{"capital_question": &mcp.CreateMessageParams{
				Messages:  []*mcp.SamplingMessage{{Role: "user", Content: &mcp.TextContent{Text: "What is the capital of France?"}}},
				MaxTokens: 100,
			}}}, nil
		})
	f.addTool("test_input_required_result_list_roots", "Asks the client's roots (key client_roots), then lists them", noArgs,
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
	f.addTool("test_input_required_result_capabilities", "Asks only what the client declared it can answer: a sampled message, the user, its roots", noArgs,
		func(_ context.Context, req *mcp.CallToolRequest) (*mcp.CallToolResult, error) {
			if len(req.Params.InputResponses) > 0 {
				return text("Inputs received"), nil
			}
			caps := req.ClientCapabilities()
			asks := mcp.InputRequestMap{}
			if caps != nil && caps.Sampling != nil {
				asks["greeting"] = greetingRequest(50)
			}
			if caps != nil && caps.Elicitation != nil {
				asks["user_name"] = askFor("What is your name?", "name")
			}
			if caps != nil && (caps.RootsV2 != nil || caps.Roots.ListChanged) {
				asks["client_roots"] = &mcp.ListRootsParams{}
			}
			if len(asks) == 0 {
				return text("The client can be asked nothing"), nil
			}
			return &mcp.CallToolResult{InputRequests: asks}, nil
		})
}

// addStatefulInputTools adds the tools that carry a signed requestState from one
// round to the next, and check it came back as given.
func (f *fixture) addStatefulInputTools() {
	f.addTool("test_input_required_result_request_state", "Asks for a confirmation (key confirm) with a signed requestState it checks on the retry", noArgs,
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
	f.addTool("test_input_required_result_multiple_inputs", "Asks for a name, a sampled greeting and the roots at once", noArgs,
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
				"user_name":    askFor("What is your name?", "name"),
				"greeting":     greetingRequest(50),
				"client_roots": &mcp.ListRootsParams{},
			}, RequestState: f.sealState("multiple_inputs")}, nil
		})
	f.addTool("test_input_required_result_multi_round", "Asks for a name (step1), then a colour (step2), each round with a new requestState", noArgs,
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
				return &mcp.CallToolResult{InputRequests: mcp.InputRequestMap{"step2": askFor("Step 2: What is your favorite color?", "color")},
					RequestState: f.sealState("multi_round.2")}, nil
			}
			return &mcp.CallToolResult{InputRequests: mcp.InputRequestMap{"step1": askFor("Step 1: What is your name?", "name")},
				RequestState: f.sealState("multi_round.1")}, nil
		})
	f.addTool("test_input_required_result_tampered_state", "Asks for a confirmation with a signed requestState, and refuses one that was changed", noArgs,
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
}

// addInputRequiredPrompt adds the prompt that asks for input before it is given.
func (f *fixture) addInputRequiredPrompt() {
	f.server.AddPrompt(&mcp.Prompt{Name: "test_input_required_result_prompt", Description: "Asks the user for the context the prompt uses (key user_context)"},
		func(_ context.Context, req *mcp.GetPromptRequest) (*mcp.GetPromptResult, error) {
			if r, ok := req.Params.InputResponses["user_context"].(*mcp.ElicitResult); ok {
				return &mcp.GetPromptResult{Messages: []*mcp.PromptMessage{{Role: "user",
					Content: &mcp.TextContent{Text: fmt.Sprintf("Use this context: %v", r.Content["context"])}}}}, nil
			}
			return &mcp.GetPromptResult{InputRequests: mcp.InputRequestMap{"user_context": askFor("What context should the prompt use?", "context")}}, nil
		})
}

// askFor asks the user for one string, property.
func askFor(message, property string) *mcp.ElicitParams {
	return &mcp.ElicitParams{Message: message, RequestedSchema: map[string]any{
		"type": "object", "properties": map[string]any{property: map[string]any{"type": "string"}}, "required": []string{property},
	}}
}

// greetingRequest asks the client's model for a greeting of at most n tokens.
func greetingRequest(n int) *mcp.CreateMessageParams {
	return &mcp.CreateMessageParams{
		Messages:  []*mcp.SamplingMessage{{Role: "user", Content: &mcp.TextContent{Text: "Generate a greeting"}}},
		MaxTokens: int64(n),
	}
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
