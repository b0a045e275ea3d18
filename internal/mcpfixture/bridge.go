package mcpfixture

//lint:file-ignore SA1019 log_later sends log messages, which MCP deprecates only from 2026-07-28.

import (
	"context"
	"crypto/sha256"
	"encoding/hex"
	"encoding/json"
	"fmt"
	"os"
	"strings"
	"time"

	"github.com/modelcontextprotocol/go-sdk/mcp"
)

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

// Identity is what env_identity answers.
type Identity struct {
	Identity string `json:"identity"` // "" when the token is not set
	PID      int    `json:"pid"`
}

// tokenOf is whom a request acts as: its bearer token over HTTP, else the process's
// $FIXTURE_TOKEN.
func tokenOf(req *mcp.CallToolRequest) string {
	if req.Extra != nil {
		if token, ok := strings.CutPrefix(req.Extra.Header.Get("Authorization"), "Bearer "); ok {
			return token
		}
	}
	return os.Getenv(EnvTokenVar)
}

// IdentityOf is what env_identity answers for token in process pid.
func IdentityOf(token string, pid int) Identity {
	if token == "" {
		return Identity{PID: pid}
	}
	sum := sha256.Sum256([]byte(token))
	return Identity{Identity: hex.EncodeToString(sum[:8]), PID: pid}
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
	mcp.AddTool(s, &mcp.Tool{Name: EnvHashToolName, Description: "Whom the server acts as: a hash of the request's bearer token over HTTP, else of $" + EnvTokenVar + "; and the process's id"},
		func(_ context.Context, req *mcp.CallToolRequest, _ struct{}) (*mcp.CallToolResult, Identity, error) {
			return nil, IdentityOf(tokenOf(req), os.Getpid()), nil
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
