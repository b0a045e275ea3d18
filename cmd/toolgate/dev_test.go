package main

import (
	"context"
	"io"
	"net/http"
	"regexp"
	"strings"
	"testing"
	"time"

	"github.com/toolgate/toolgate/internal/testenv"
)

var (
	bannerKey  = regexp.MustCompile(`(?m)^    (tg_[0-9A-Za-z]{43})$`)
	bannerEdge = regexp.MustCompile(`(?m)^  edge\s+(http://\S+)$`)
)

// startDev runs `toolgate dev` on data with free ports and returns its edge URL and
// the key it printed, and a func that stops it and returns its error.
func startDev(t *testing.T, data string) (edgeURL, key string, stop func() error) {
	t.Helper()
	cfg := devConfig{Data: data, NATSListen: "127.0.0.1:0", Listen: "127.0.0.1:0"}
	ctx, cancel := context.WithCancel(context.Background())
	out := &testenv.Buffer{}
	done := make(chan error, 1)
	go func() { done <- runDev(ctx, cfg, out, testenv.Logger(t)) }()
	testenv.Eventually(t, 30*time.Second, "dev stack prints its banner", func() bool {
		return bannerKey.MatchString(out.String()) && bannerEdge.MatchString(out.String())
	})
	stop = func() error {
		cancel()
		select {
		case err := <-done:
			return err
		case <-time.After(20 * time.Second):
			t.Fatal("dev stack did not stop within 20s")
			return nil
		}
	}
	return bannerEdge.FindStringSubmatch(out.String())[1], bannerKey.FindStringSubmatch(out.String())[1], stop
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
	edgeURL, key, stop := startDev(t, data)

	t.Run("the printed key lists the three demo tools", func(t *testing.T) {
		testenv.Eventually(t, 10*time.Second, "all three tools online", func() bool {
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
	if err := stop(); err != nil {
		t.Fatalf("clean shutdown: %v", err)
	}

	t.Run("a restart on the same data keeps the key", func(t *testing.T) {
		edgeURL, again, stop := startDev(t, data)
		defer stop()
		if again != key {
			t.Fatalf("key changed across restarts")
		}
		testenv.Eventually(t, 10*time.Second, "the kept key works", func() bool {
			status, _ := call(t, http.MethodPost, edgeURL+"/tool-call/echo/echo", key, `{}`)
			return status == 200
		})
	})
}
