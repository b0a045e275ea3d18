package main

import (
	"bytes"
	"context"
	"encoding/json"
	"net/http"
	"os"
	"path/filepath"
	"reflect"
	"strings"
	"testing"

	"github.com/toolgate/toolgate/edge"
	"github.com/toolgate/toolgate/internal/testenv"
	"github.com/toolgate/toolgate/registry"
)

// run executes one toolgate command line and returns what it printed.
func run(t *testing.T, ctx context.Context, args ...string) (string, error) {
	t.Helper()
	var out bytes.Buffer
	root := newRootCmd()
	root.SetOut(&out)
	root.SetErr(&out)
	root.SetArgs(args)
	err := root.ExecuteContext(ctx)
	return out.String(), err
}

// startEdge runs `toolgate edge` on natsURL until the test ends and returns its URL.
// The admin key file is found through TOOLGATE_ADMIN_KEY_FILE, as an operator would
// pass it; the admin commands read the same variable.
func startEdge(t *testing.T, natsURL string, flags ...string) (url, adminKey string) {
	t.Helper()
	sec := newDeploymentSecrets(t)
	return startDeploymentEdge(t, natsURL, sec, flags...), sec.adminKey
}

// deploymentSecrets are the files every edge of one deployment reads: the link secret
// and the admin key.
type deploymentSecrets struct {
	linkSecretFile, adminKeyFile, adminKey string
}

// newDeploymentSecrets writes a deployment's secrets, and points the admin commands
// at its admin key.
func newDeploymentSecrets(t *testing.T) deploymentSecrets {
	t.Helper()
	dir := t.TempDir()
	sec := deploymentSecrets{linkSecretFile: filepath.Join(dir, "link-secret"), adminKeyFile: filepath.Join(dir, "admin-key"), adminKey: registry.NewKey()}
	if err := os.WriteFile(sec.linkSecretFile, []byte(registry.NewLinkSecret()+"\n"), 0o600); err != nil {
		t.Fatal(err)
	}
	if err := os.WriteFile(sec.adminKeyFile, []byte(sec.adminKey+"\n"), 0o600); err != nil {
		t.Fatal(err)
	}
	t.Setenv("TOOLGATE_ADMIN_KEY_FILE", sec.adminKeyFile)
	return sec
}

// startDeploymentEdge runs `toolgate edge` with a deployment's secrets until the test
// ends, and returns its URL once it is ready.
func startDeploymentEdge(t *testing.T, natsURL string, sec deploymentSecrets, flags ...string) (url string) {
	t.Helper()
	return startEdgeWith(t, append([]string{"--nats", natsURL, "--link-secret-file", sec.linkSecretFile}, flags...)...)
}

// admin runs one admin command against url and returns what it printed.
func admin(t *testing.T, url string, args ...string) string {
	t.Helper()
	got, err := run(t, context.Background(), append(args, "--url", url)...)
	if err != nil {
		t.Fatalf("toolgate %s: %v\n%s", strings.Join(args, " "), err, got)
	}
	return got
}

// TestEdgeAndAdminCommands starts `toolgate edge` on a real NATS server and drives an
// account's life through `toolgate accounts|keys|tools|links`.
func TestEdgeAndAdminCommands(t *testing.T) {
	srv := testenv.Server(t)
	url, _ := startEdge(t, srv.ClientURL(), "--base-url", "https://gw.example.com")
	admin := func(args ...string) string {
		t.Helper()
		return admin(t, url, args...)
	}
	admin("accounts", "create", "acme", "--name", "Acme", "--rate", "10")
	if got := admin("accounts", "list"); !strings.Contains(got, `"id": "acme"`) || !strings.Contains(got, `"rate": 10`) {
		t.Fatalf("accounts list:\n%s", got)
	}
	var updated registry.Account
	if err := json.Unmarshal([]byte(admin("accounts", "update", "acme", "--burst", "4", "--sessions", "2", "--payload-bytes", "5000000")), &updated); err != nil ||
		updated.Name != "Acme" || !reflect.DeepEqual(updated.Limits, registry.Limits{Rate: 10, Burst: 4, Sessions: 2, PayloadBytes: 5000000}) {
		t.Fatalf("accounts update: %+v %v", updated, err)
	}
	if got := admin("accounts", "update", "acme", "--name", "Acme Corp", "--rate", "0"); !strings.Contains(got, `"name": "Acme Corp"`) || strings.Contains(got, `"rate"`) {
		t.Fatalf("accounts update --name --rate 0:\n%s", got)
	}
	var audited registry.Account
	if err := json.Unmarshal([]byte(admin("accounts", "update", "acme", "--audit-arguments", "--audit-required", "--audit-max-data-size", "512")), &audited); err != nil ||
		audited.Audit != (registry.AuditSettings{IncludeArguments: true, Required: true, MaxDataSize: 512}) || audited.Name != "Acme Corp" {
		t.Fatalf("accounts update --audit-*: %+v %v", audited, err)
	}
	audited = registry.Account{}
	if err := json.Unmarshal([]byte(admin("accounts", "update", "acme", "--audit-required=false", "--audit-result")), &audited); err != nil ||
		audited.Audit != (registry.AuditSettings{IncludeArguments: true, IncludeResult: true, MaxDataSize: 512}) {
		t.Fatalf("accounts update --audit-required=false --audit-result: %+v %v", audited, err)
	}
	if _, err := run(t, context.Background(), "accounts", "update", "acme", "--audit-max-data-size", "-1", "--url", url); err == nil || !strings.Contains(err.Error(), "/audit/max_data_size:") {
		t.Fatalf("accounts update --audit-max-data-size -1: %v", err)
	}
	if got := admin("accounts", "update", "acme", "--require-sign-in"); !strings.Contains(got, `"require_sign_in": true`) {
		t.Fatalf("accounts update --require-sign-in:\n%s", got)
	}
	if got := admin("accounts", "update", "acme", "--require-sign-in=false"); strings.Contains(got, `"require_sign_in"`) {
		t.Fatalf("accounts update --require-sign-in=false:\n%s", got)
	}
	if _, err := run(t, context.Background(), "accounts", "update", "acme", "--url", url); err == nil || !strings.Contains(err.Error(), "nothing to change") {
		t.Fatalf("accounts update without flags: %v", err)
	}
	if _, err := run(t, context.Background(), "accounts", "update", "acme", "--burst", "-1", "--url", url); err == nil || !strings.Contains(err.Error(), "/limits/burst:") {
		t.Fatalf("accounts update --burst -1: %v", err)
	}
	if _, err := run(t, context.Background(), "accounts", "update", "acme", "--payload-bytes", "-1", "--url", url); err == nil || !strings.Contains(err.Error(), "/limits/payload_bytes:") {
		t.Fatalf("accounts update --payload-bytes -1: %v", err)
	}
	var quoted registry.Account
	if err := json.Unmarshal([]byte(admin("accounts", "update", "acme", "--quota", "tool=echo,method=echo,per_minute=100,per_day=5000",
		"--quota", "scope=key,per_month=9,concurrent=2")), &quoted); err != nil ||
		!reflect.DeepEqual(quoted.Limits.Quotas, []registry.Quota{
			{Scope: "account", Tool: "echo", Method: "echo", PerMinute: 100, PerDay: 5000},
			{Scope: "key", PerMonth: 9, Concurrent: 2},
		}) {
		t.Fatalf("accounts update --quota: %+v %v", quoted, err)
	}
	var usage edge.Usage
	if err := json.Unmarshal([]byte(admin("accounts", "usage", "acme")), &usage); err != nil || len(usage.Rules) != 1 ||
		len(usage.Rules[0].Windows) != 2 || usage.Rules[0].Windows[1].Remaining != 5000 {
		t.Fatalf("accounts usage (no key yet, so only the account's rule): %+v %v", usage, err)
	}
	if _, err := run(t, context.Background(), "accounts", "update", "acme", "--quota", "per_day=-1", "--url", url); err == nil || !strings.Contains(err.Error(), "/limits/quotas/0/per_day:") {
		t.Fatalf("accounts update --quota per_day=-1: %v", err)
	}
	if _, err := run(t, context.Background(), "accounts", "update", "acme", "--quota", "per_hour=1", "--url", url); err == nil || !strings.Contains(err.Error(), "per_hour: not a field") {
		t.Fatalf("accounts update --quota per_hour=1: %v", err)
	}
	if got := admin("accounts", "update", "acme", "--clear-quotas"); strings.Contains(got, `"quotas"`) {
		t.Fatalf("accounts update --clear-quotas:\n%s", got)
	}
	var key edge.NewKey
	if err := json.Unmarshal([]byte(admin("keys", "create", "acme", "--name", "ci", "--expires-in", "24h")), &key); err != nil || key.Secret == "" {
		t.Fatalf("keys create: %+v %v", key, err)
	}
	if got := admin("keys", "list", "acme"); strings.Contains(got, key.Secret) || !strings.Contains(got, key.Prefix) {
		t.Fatalf("keys list:\n%s", got)
	}
	var conn edge.Connection
	if err := json.Unmarshal([]byte(admin("tools", "connect", "acme", "echo")), &conn); err != nil || !strings.HasPrefix(conn.SSEURL, "https://gw.example.com/mcp/tgl_") {
		t.Fatalf("tools connect: %+v %v", conn, err)
	}
	var rotated edge.Connection
	if err := json.Unmarshal([]byte(admin("links", "rotate", "acme", "echo")), &rotated); err != nil || rotated.SSEURL == conn.SSEURL {
		t.Fatalf("links rotate: %+v %v", rotated, err)
	}
	if got := admin("links", "show", "acme", "echo"); !strings.Contains(got, rotated.SSEURL) {
		t.Fatalf("links show:\n%s", got)
	}
	if got := admin("tools", "list", "acme"); !strings.Contains(got, rotated.MCPURL) {
		t.Fatalf("tools list:\n%s", got)
	}

	req, _ := http.NewRequest(http.MethodGet, url+"/get-tools", nil)
	req.Header.Set("SERVICE_API_KEY", key.Secret)
	testenv.WaitFor(t, "the key works on the edge", func() bool {
		resp, err := http.DefaultClient.Do(req)
		if err != nil {
			return false
		}
		resp.Body.Close()
		return resp.StatusCode == http.StatusOK
	})
	admin("keys", "revoke", key.ID)
	admin("tools", "disconnect", "acme", "echo")
	admin("accounts", "delete", "acme")

	_, err := run(t, context.Background(), "accounts", "create", "Not Valid", "--url", url)
	if err == nil || !strings.Contains(err.Error(), "invalid_request (400)") || !strings.Contains(err.Error(), "/id:") {
		t.Fatalf("a bad account id: %v", err)
	}
	_, err = run(t, context.Background(), "accounts", "list", "--url", url, "--admin-key", registry.NewKey())
	if err == nil || !strings.Contains(err.Error(), "unauthenticated (401)") {
		t.Fatalf("a wrong admin key: %v", err)
	}
}

func TestEdgeCommandRefusesBadConfig(t *testing.T) {
	for _, tc := range []struct {
		args []string
		want string
	}{
		{[]string{"edge"}, "edge: link-secret-file: required"},
		{[]string{"edge", "--link-secret-file", "x", "--base-url", "gw.example.com"}, "edge: base-url: must be an absolute http(s) URL"},
		{[]string{"edge", "--link-secret-file", "/nonexistent/secret"}, "edge: link-secret-file:"},
		{[]string{"edge", "--link-secret-file", "x", "--nats", "http://127.0.0.1:4222"}, "edge: nats:"},
		{[]string{"edge", "--link-secret-file", "x", "--update-registry"}, "edge: update-registry: needs --replicas"},
		{[]string{"edge", "--link-secret-file", "x", "--ask-concurrency", "0"}, "edge: ask-concurrency: must be at least 1"},
		{[]string{"edge", "--link-secret-file", "x", "--call-lost-after", "499ms"}, "gateway: call-lost-after: must be at least 500ms"},
		{[]string{"edge", "--link-secret-file", "x", "--call-lost-after", "-1s"}, "gateway: call-lost-after: must be at least 500ms"},
		{[]string{"edge", "--link-secret-file", "x", "--async-max-timeout", "4m"}, "gateway: async-max-timeout: must be at least max-timeout"},
		{[]string{"edge", "--link-secret-file", "x", "--async-max-timeout", "31m"}, "edge: async-max-timeout: must be at most 30m0s"},
		{[]string{"edge", "--link-secret-file", "x", "--calls-ttl", "-1h"}, "edge: calls-ttl: must not be negative"},
		{[]string{"edge", "--link-secret-file", "x", "--revoke-attempt", "-1ms"}, "edge: revoke-attempt: must not be negative"},
		{[]string{"edge", "--link-secret-file", "x", "--revocation-check-wait", "-1ms"}, "edge: revocation-check-wait: must not be negative"},
		{[]string{"edge", "--link-secret-file", "x", "--calls-ttl", "15m"}, "edge: calls-ttl: must be longer than async-max-timeout (15m0s)"},
		{[]string{"edge", "--link-secret-file", "x", "--async-max-timeout", "20m", "--calls-ttl", "16m"}, "edge: calls-ttl: must be longer than async-max-timeout (20m0s)"},
		{[]string{"edge", "--link-secret-file", "x", "--audit-max-age", "30s"}, "edge: audit: max-age: must be at least 1m0s"},
		{[]string{"edge", "--link-secret-file", "x", "--audit-max-bytes", "-1"}, "edge: audit: max-bytes: must be at least"},
		{[]string{"edge", "--link-secret-file", "x", "--oauth-flow-lifetime", "59s"}, "edge: oauth-flow-lifetime: must be at least 1m0s"},
		{[]string{"edge", "--link-secret-file", "x", "--oauth-refresh-before", "-1s"}, "edge: oauth-refresh-before: must not be negative"},
		{[]string{"edge", "--link-secret-file", "x", "--oauth-refresh-lease", "999ms"}, "edge: oauth-refresh-lease: must be at least 1s"},
		{[]string{"edge", "--link-secret-file", "x", "--max-payload-bytes", "0"}, "edge: max-payload-bytes: must be positive"},
		{[]string{"edge", "--link-secret-file", "x", "--oauth-token-ttl", "999ms"}, "edge: oauth-token-ttl: must be between 1s and 24h0m0s"},
		{[]string{"edge", "--link-secret-file", "x", "--oauth-token-ttl", "24h1s"}, "edge: oauth-token-ttl: must be between 1s and 24h0m0s"},
		{[]string{"edge", "--link-secret-file", "x", "--oauth-key-rotation", "59m59s"}, "edge: oauth-key-rotation: must be at least 1h0m0s"},
		{[]string{"edge", "--link-secret-file", "x", "--oauth-max-clients", "0"}, "edge: oauth-max-clients: must be at least 1"},
		{[]string{"edge", "--link-secret-file", "x", "--oauth-registrations-per-minute", "0"}, "edge: oauth-registrations-per-minute: must be at least 1"},
		{[]string{"edge", "--link-secret-file", "x", "--oauth-max-pending", "0"}, "edge: oauth-max-pending: must be at least 1"},
		{[]string{"edge", "--link-secret-file", "x", "--oauth-max-pending-per-source", "0"}, "edge: oauth-max-pending-per-source: must be at least 1"},
	} {
		if _, err := run(t, context.Background(), tc.args...); err == nil || !strings.Contains(err.Error(), tc.want) {
			t.Errorf("toolgate %s: %v, want %q", strings.Join(tc.args, " "), err, tc.want)
		}
	}
	t.Setenv("TOOLGATE_OAUTH_MAX_PENDING", "0")
	if _, err := run(t, context.Background(), "edge", "--link-secret-file", "x"); err == nil || !strings.Contains(err.Error(), "edge: oauth-max-pending: must be at least 1") {
		t.Errorf("TOOLGATE_OAUTH_MAX_PENDING=0: %v", err)
	}
	t.Setenv("TOOLGATE_OAUTH_MAX_PENDING_PER_SOURCE", "0")
	if _, err := run(t, context.Background(), "edge", "--link-secret-file", "x", "--oauth-max-pending", "5"); err == nil || !strings.Contains(err.Error(), "edge: oauth-max-pending-per-source: must be at least 1") {
		t.Errorf("TOOLGATE_OAUTH_MAX_PENDING_PER_SOURCE=0: %v", err)
	}
	t.Setenv("TOOLGATE_MAX_BODY_BYTES", "lots")
	if _, err := run(t, context.Background(), "edge"); err == nil || !strings.Contains(err.Error(), "TOOLGATE_MAX_BODY_BYTES") {
		t.Errorf("a bad variable: %v", err)
	}
}

// TestEdgeKeepsTheRegistryAsItIs: an edge asking for other replicas than the
// registry's buckets have refuses to start, naming the bucket, and changes nothing; one
// that leaves --replicas unset joins them as they are.
func TestEdgeKeepsTheRegistryAsItIs(t *testing.T) {
	srv := testenv.Server(t)
	testenv.Store(t, testenv.Conn(t, srv.ClientURL()), 1)
	secret := filepath.Join(t.TempDir(), "link-secret")
	if err := os.WriteFile(secret, []byte(registry.NewLinkSecret()), 0o600); err != nil {
		t.Fatal(err)
	}
	_, err := run(t, context.Background(), "edge", "--nats", srv.ClientURL(), "--listen", "127.0.0.1:0",
		"--link-secret-file", secret, "--replicas", "3")
	if err == nil || !strings.Contains(err.Error(), "bucket tg-tools has replicas 1, this process asks for 3") {
		t.Fatalf("an edge asking for 3 replicas of an R1 registry: %v", err)
	}
	startEdge(t, srv.ClientURL()) // fails the test unless it comes up
}
