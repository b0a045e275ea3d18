package main

import (
	"context"
	"encoding/json"
	"io"
	"net/http"
	"os"
	"path/filepath"
	"regexp"
	"strings"
	"testing"
	"time"

	"github.com/modelcontextprotocol/go-sdk/mcp"
	"github.com/nats-io/nats.go/jetstream"

	"github.com/toolgate/toolgate/internal/testenv"
	"github.com/toolgate/toolgate/registry"
)

var (
	bannerKey  = regexp.MustCompile(`(?m)^    (tg_[0-9A-Za-z]{43})$`)
	bannerEdge = regexp.MustCompile(`(?m)^  edge\s+(http://\S+)$`)
	bannerNATS = regexp.MustCompile(`(?m)^  NATS\s+(nats://\S+)`)
)

// devStack is a running `toolgate dev`, as its banner describes it; stop stops it and
// returns its error.
type devStack struct {
	edgeURL, natsURL, key string
	stop                  func() error
}

// startDevStack runs `toolgate dev` on data with free ports.
func startDevStack(t *testing.T, data string) devStack {
	t.Helper()
	stack, banner := startDevStackBanner(t, data)
	if !bannerKey.MatchString(banner) {
		t.Fatalf("the banner shows no key:\n%s", banner)
	}
	stack.key = bannerKey.FindStringSubmatch(banner)[1]
	return stack
}

// startDevStackBanner runs `toolgate dev` on data with free ports, and returns it with
// its banner.
func startDevStackBanner(t *testing.T, data string) (devStack, string) {
	t.Helper()
	cfg := devConfig{Data: data, NATSListen: "127.0.0.1:0", Listen: "127.0.0.1:0"}
	ctx, cancel := context.WithCancel(context.Background())
	out := &testenv.Buffer{}
	done := make(chan error, 1)
	go func() { done <- runDev(ctx, cfg, out, testenv.Logger(t)) }()
	testenv.WaitFor(t, "dev stack prints its banner", func() bool {
		return bannerEdge.MatchString(out.String())
	})
	stop := func() error {
		cancel()
		select {
		case err := <-done:
			return err
		case <-time.After(testenv.Patience):
			t.Fatalf("dev stack did not stop within %v", testenv.Patience)
			return nil
		}
	}
	banner := out.String()
	return devStack{
		edgeURL: bannerEdge.FindStringSubmatch(banner)[1], natsURL: bannerNATS.FindStringSubmatch(banner)[1], stop: stop,
	}, banner
}

func call(t *testing.T, method, url, key, body string) (int, string) {
	t.Helper()
	req, _ := http.NewRequest(method, url, strings.NewReader(body))
	req.Header.Set("SERVICE_API_KEY", key)
	req.Header.Set("Content-Type", "application/json")
	resp, err := http.DefaultClient.Do(req)
	if err != nil {
		t.Fatal(err)
	}
	defer resp.Body.Close()
	b, _ := io.ReadAll(resp.Body)
	return resp.StatusCode, string(b)
}

func TestDevStack(t *testing.T) {
	data := t.TempDir()
	first := startDevStack(t, data)
	edgeURL, key, stop := first.edgeURL, first.key, first.stop

	t.Run("the printed key lists the three demo tools", func(t *testing.T) {
		testenv.WaitFor(t, "all three tools online", func() bool {
			status, body := call(t, http.MethodGet, edgeURL+"/get-tools", key, "")
			return status == 200 && strings.Count(body, `"status":"online"`) == 3
		})
	})
	t.Run("a tool call reaches the echo worker and comes back", func(t *testing.T) {
		status, body := call(t, http.MethodPost, edgeURL+"/tool-call/echo/echo", key, `{"hello":"world"}`)
		if status != 200 || body != `{"hello":"world"}` {
			t.Fatalf("got %d %s", status, body)
		}
	})
	t.Run("an MCP client reaches a tool through its link", func(t *testing.T) {
		_, body := call(t, http.MethodGet, edgeURL+"/tools/echo", key, "")
		var tool struct {
			MCPURL string `json:"mcp_url"`
			SSEURL string `json:"sse_url"`
		}
		if err := json.Unmarshal([]byte(body), &tool); err != nil || tool.MCPURL == "" {
			t.Fatalf("GET /tools/echo: %s", body)
		}
		for name, transport := range map[string]mcp.Transport{
			"Streamable HTTP": &mcp.StreamableClientTransport{Endpoint: tool.MCPURL},
			"HTTP+SSE":        &mcp.SSEClientTransport{Endpoint: tool.SSEURL},
		} {
			t.Run(name, func(t *testing.T) {
				ctx, cancel := context.WithTimeout(context.Background(), testenv.Patience)
				defer cancel()
				client := mcp.NewClient(&mcp.Implementation{Name: "dev-test", Version: "1"}, nil)
				session, err := client.Connect(ctx, transport, nil)
				if err != nil {
					t.Fatal(err)
				}
				defer session.Close()
				tools, err := session.ListTools(ctx, nil)
				if err != nil || len(tools.Tools) != 1 || tools.Tools[0].Name != "echo" {
					t.Fatalf("tools/list: %+v, %v", tools, err)
				}
				res, err := session.CallTool(ctx, &mcp.CallToolParams{Name: "echo", Arguments: map[string]any{"hello": "mcp"}})
				if err != nil || res.IsError || len(res.Content) != 1 {
					t.Fatalf("tools/call: %+v, %v", res, err)
				}
				if text, ok := res.Content[0].(*mcp.TextContent); !ok || text.Text != `{"hello":"mcp"}` {
					t.Fatalf("tools/call content: %#v", res.Content[0])
				}
			})
		}
	})
	t.Run("the dashboard is served", func(t *testing.T) {
		resp, err := http.Get(edgeURL + "/dashboard/")
		if err != nil {
			t.Fatal(err)
		}
		resp.Body.Close()
		if resp.StatusCode != 200 {
			t.Fatalf("dashboard: %d", resp.StatusCode)
		}
	})
	// As an older version might have left it: a bucket with other settings than this
	// version's, which the restart must bring up to date rather than refuse.
	toolsHistory := func(natsURL string, set uint8) uint8 {
		t.Helper()
		js, err := jetstream.New(testenv.Conn(t, natsURL))
		if err != nil {
			t.Fatal(err)
		}
		ctx := testenv.Context(t)
		kv, err := js.KeyValue(ctx, registry.BucketTools)
		if err != nil {
			t.Fatal(err)
		}
		st, err := kv.Status(ctx)
		if err != nil {
			t.Fatal(err)
		}
		cfg := st.Config()
		if set != 0 {
			cfg.History = set
			if _, err := js.UpdateKeyValue(ctx, cfg); err != nil {
				t.Fatal(err)
			}
		}
		return cfg.History
	}
	toolsHistory(first.natsURL, 1)
	if err := stop(); err != nil {
		t.Fatalf("clean shutdown: %v", err)
	}

	t.Run("a restart on the same data keeps the key and updates the buckets", func(t *testing.T) {
		again := startDevStack(t, data)
		defer again.stop()
		edgeURL := again.edgeURL
		if again.key != key {
			t.Fatalf("key changed across restarts")
		}
		if h := toolsHistory(again.natsURL, 0); h != 5 {
			t.Fatalf("the tools bucket keeps history %d after the restart, want this version's 5", h)
		}
		testenv.WaitFor(t, "the kept key works", func() bool {
			status, _ := call(t, http.MethodPost, edgeURL+"/tool-call/echo/echo", key, `{}`)
			return status == 200
		})
	})
}

// TestDevStackWithARevokedKey: a dev key that was revoked is not offered as the key to
// use; the banner says it is revoked and how to make a new one, and the way it gives
// makes a key that works, with an id of its own.
func TestDevStackWithARevokedKey(t *testing.T) {
	data := t.TempDir()
	first := startDevStack(t, data)
	adminKey, err := os.ReadFile(filepath.Join(data, "admin-key"))
	if err != nil {
		t.Fatal(err)
	}
	req, _ := http.NewRequest(http.MethodDelete, first.edgeURL+"/admin/keys/"+devKeyID, nil)
	req.Header.Set("Authorization", "Bearer "+strings.TrimSpace(string(adminKey)))
	resp, err := http.DefaultClient.Do(req)
	if err != nil {
		t.Fatal(err)
	}
	resp.Body.Close()
	if resp.StatusCode != http.StatusOK {
		t.Fatalf("revoking the dev key: status %d", resp.StatusCode)
	}
	if err := first.stop(); err != nil {
		t.Fatal(err)
	}

	again, banner := startDevStackBanner(t, data)
	if bannerKey.MatchString(banner) || strings.Contains(banner, first.key) {
		again.stop()
		t.Fatalf("the banner offers the revoked key:\n%s", banner)
	}
	for _, want := range []string{"dev-key (" + first.key[:registry.KeyPrefixLen] + "...) was revoked at ", "it no longer works",
		"delete " + data + "/dev-key and start it again", "toolgate keys create dev --name dev --url " + again.edgeURL} {
		if !strings.Contains(banner, want) {
			again.stop()
			t.Fatalf("the banner does not say %q:\n%s", want, banner)
		}
	}
	if err := again.stop(); err != nil {
		t.Fatal(err)
	}

	if err := os.Remove(filepath.Join(data, "dev-key")); err != nil {
		t.Fatal(err)
	}
	fresh := startDevStack(t, data)
	defer fresh.stop()
	if fresh.key == first.key {
		t.Fatal("the new dev key is the revoked one")
	}
	testenv.WaitFor(t, "the new key works", func() bool {
		status, _ := call(t, http.MethodPost, fresh.edgeURL+"/tool-call/echo/echo", fresh.key, `{}`)
		return status == http.StatusOK
	})
	if status, body := call(t, http.MethodGet, fresh.edgeURL+"/get-tools", first.key, ""); status != http.StatusUnauthorized {
		t.Fatalf("the revoked key: %d %s", status, body)
	}
}
