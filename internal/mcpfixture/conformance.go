package mcpfixture

//lint:file-ignore SA1019 the conformance scenarios ask for sampling, which MCP deprecates only from 2026-07-28.

import (
	"bytes"
	"context"
	"encoding/binary"
	"encoding/json"
	"fmt"
	"image"
	"image/color"
	"image/png"
	"time"

	"github.com/modelcontextprotocol/go-sdk/mcp"
)

// addConformanceTools adds the tools the conformance suite's server scenarios call.
func (f *fixture) addConformanceTools() {
	f.addContentTools()
	f.addNotifyingTools()
	f.addAskingTools()
	f.addProtocolTools()
}

// addContentTools adds the tools that answer with each kind of content, and one that
// fails.
func (f *fixture) addContentTools() {
	f.addTool("test_simple_text", "Returns a simple text", noArgs, func(context.Context, *mcp.CallToolRequest) (*mcp.CallToolResult, error) {
		return text(SimpleText), nil
	})
	f.addTool("test_image_content", "Returns a PNG image", noArgs, func(context.Context, *mcp.CallToolRequest) (*mcp.CallToolResult, error) {
		return &mcp.CallToolResult{Content: []mcp.Content{&mcp.ImageContent{Data: redPixel, MIMEType: "image/png"}}}, nil
	})
	f.addTool("test_audio_content", "Returns a WAV sound", noArgs, func(context.Context, *mcp.CallToolRequest) (*mcp.CallToolResult, error) {
		return &mcp.CallToolResult{Content: []mcp.Content{&mcp.AudioContent{Data: silence, MIMEType: "audio/wav"}}}, nil
	})
	f.addTool("test_embedded_resource", "Returns an embedded text resource", noArgs, func(context.Context, *mcp.CallToolRequest) (*mcp.CallToolResult, error) {
		return &mcp.CallToolResult{Content: []mcp.Content{&mcp.EmbeddedResource{Resource: &mcp.ResourceContents{
			URI: "test://embedded-resource", MIMEType: "text/plain", Text: EmbeddedText,
		}}}}, nil
	})
	f.addTool("test_multiple_content_types", "Returns text, an image and a resource", noArgs, func(context.Context, *mcp.CallToolRequest) (*mcp.CallToolResult, error) {
		return &mcp.CallToolResult{Content: []mcp.Content{
			&mcp.TextContent{Text: "Multiple content types test:"},
			&mcp.ImageContent{Data: redPixel, MIMEType: "image/png"},
			&mcp.EmbeddedResource{Resource: &mcp.ResourceContents{
				URI: "test://mixed-content-resource", MIMEType: "application/json", Text: `{"test":"data","value":123}`,
			}},
		}}, nil
	})
	f.addTool("test_error_handling", "Always fails", noArgs, func(context.Context, *mcp.CallToolRequest) (*mcp.CallToolResult, error) {
		res := text(ErrorText)
		res.IsError = true
		return res, nil
	})
}

// addNotifyingTools adds the tools that send the client notifications while they
// run, or close its stream.
func (f *fixture) addNotifyingTools() {
	f.addTool("test_tool_with_logging", "Sends three log messages while it runs", noArgs, func(ctx context.Context, req *mcp.CallToolRequest) (*mcp.CallToolResult, error) {
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
	f.addTool("test_tool_with_progress", "Reports progress 0, 50 and 100 of 100", noArgs, func(ctx context.Context, req *mcp.CallToolRequest) (*mcp.CallToolResult, error) {
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
	// The diagnostic tools of the 2026-07-28 scenarios (server-stateless).
	f.addTool("test_logging_tool", "Sends a log message while it runs", noArgs, func(ctx context.Context, req *mcp.CallToolRequest) (*mcp.CallToolResult, error) {
		if err := req.Session.Log(ctx, &mcp.LoggingMessageParams{Level: "info", Logger: "mcpfixture", Data: "logging tool ran"}); err != nil {
			return nil, err
		}
		return text("Logging tool executed"), nil
	})
	f.addTool("test_reconnection", "Closes its SSE stream mid-call, when it has one, and answers after a moment", noArgs, func(ctx context.Context, req *mcp.CallToolRequest) (*mcp.CallToolResult, error) {
		if req.Extra != nil && req.Extra.CloseSSEStream != nil {
			req.Extra.CloseSSEStream(mcp.CloseSSEStreamArgs{RetryAfter: 100 * time.Millisecond})
		}
		if err := sleep(ctx, 200*time.Millisecond); err != nil {
			return nil, err
		}
		return text("Reconnection test completed"), nil
	})
}

// addAskingTools adds the tools that ask the client's model or its user before they
// answer.
func (f *fixture) addAskingTools() {
	f.addTool("test_sampling", "Asks the client's model to complete a prompt",
		json.RawMessage(`{"type":"object","properties":{"prompt":{"type":"string","description":"The prompt to send to the LLM"}},"required":["prompt"]}`),
		sampling)
	f.addTool("test_elicitation", "Asks the user for a username and an e-mail address",
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
	f.addTool("test_elicitation_sep1034_defaults", "Asks for input with a default for every primitive type", noArgs,
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
	f.addTool("test_elicitation_sep1330_enums", "Asks for input with every kind of enum", noArgs,
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
	f.addTool("test_streaming_elicitation", "Asks the user a question before it answers", noArgs,
		elicit("Streaming elicitation completed", func(map[string]any) *mcp.ElicitParams {
			return &mcp.ElicitParams{Message: "Continue?", RequestedSchema: map[string]any{
				"type": "object", "properties": map[string]any{"ok": map[string]any{"type": "boolean"}},
			}}
		}))
}

// addProtocolTools adds the tools that exercise what travels around a call: a JSON
// Schema 2020-12 input, list changes, a capability the client must declare, and a
// header mirrored from an argument.
func (f *fixture) addProtocolTools() {
	f.addTool(SchemaToolName, "Tool with JSON Schema 2020-12 features", json.RawMessage(`{
		"$schema": "https://json-schema.org/draft/2020-12/schema",
		"type": "object",
		"$defs": {"address": {"type": "object", "properties": {"street": {"type": "string"}, "city": {"type": "string"}}}},
		"properties": {"name": {"type": "string"}, "address": {"$ref": "#/$defs/address"}},
		"additionalProperties": false
	}`), func(_ context.Context, req *mcp.CallToolRequest) (*mcp.CallToolResult, error) {
		return text("Received: " + string(req.Params.Arguments)), nil
	})
	f.addTool("test_trigger_tool_change", "Adds the extra tool, or removes it; clients hear tools/list_changed", noArgs,
		func(context.Context, *mcp.CallToolRequest) (*mcp.CallToolResult, error) {
			return f.toggleExtra(), nil
		})
	f.addTool("test_trigger_prompt_change", "Adds the extra prompt, or removes it; clients hear prompts/list_changed", noArgs,
		func(context.Context, *mcp.CallToolRequest) (*mcp.CallToolResult, error) {
			return f.toggleExtraPrompt(), nil
		})
	f.addTool(MissingCapabilityToolName, "Needs the client's sampling: refused with -32021 (MissingRequiredClientCapability) when the client did not declare it", noArgs,
		func(_ context.Context, req *mcp.CallToolRequest) (*mcp.CallToolResult, error) {
			if caps := req.ClientCapabilities(); caps == nil || caps.Sampling == nil {
				return nil, MissingSampling()
			}
			return text("The client declared sampling"), nil
		})
	f.addTool("test_custom_headers", "Says back its region, which a 2026-07-28 call mirrors in the Mcp-Param-Region header",
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
