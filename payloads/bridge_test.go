package payloads_test

import (
	"context"
	"crypto/rand"
	"crypto/sha256"
	"encoding/base64"
	"encoding/json"
	"net"
	"net/http"
	"testing"
	"time"

	mcpgo "github.com/mark3labs/mcp-go/client"
	mcpgotransport "github.com/mark3labs/mcp-go/client/transport"
	mcpgotypes "github.com/mark3labs/mcp-go/mcp"
	"github.com/modelcontextprotocol/go-sdk/mcp"

	"github.com/toolgate/toolgate/internal/testenv"
)

// TestBridgedImageOfTenMiB: an MCP server whose tools return a 10 MiB image and a 10 MiB
// embedded resource, bridged by `toolgate worker mcp`, reaches an MCP client (the
// go-sdk) on the tool's link intact: past one NATS message, through the payloads
// bucket, without the bridge knowing.
func TestBridgedImageOfTenMiB(t *testing.T) {
	large(t, "10 MiB through the bridge")
	img := make([]byte, 10<<20)
	if _, err := rand.Read(img); err != nil {
		t.Fatal(err)
	}
	server := mcp.NewServer(&mcp.Implementation{Name: "pictures", Version: "1"}, nil)
	mcp.AddTool(server, &mcp.Tool{Name: "picture", Description: "a large picture"},
		func(context.Context, *mcp.CallToolRequest, struct{}) (*mcp.CallToolResult, any, error) {
			return &mcp.CallToolResult{Content: []mcp.Content{&mcp.ImageContent{Data: img, MIMEType: "image/png"}}}, nil, nil
		})
	mcp.AddTool(server, &mcp.Tool{Name: "document", Description: "a large embedded resource"},
		func(context.Context, *mcp.CallToolRequest, struct{}) (*mcp.CallToolResult, any, error) {
			return &mcp.CallToolResult{Content: []mcp.Content{&mcp.EmbeddedResource{
				Resource: &mcp.ResourceContents{URI: "file:///scan.pdf", MIMEType: "application/pdf", Blob: img}}}}, nil, nil
		})
	ln, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		t.Fatal(err)
	}
	remote := &http.Server{Handler: mcp.NewStreamableHTTPHandler(func(*http.Request) *mcp.Server { return server }, nil)}
	go func() { _ = remote.Serve(ln) }()
	t.Cleanup(func() { _ = remote.Close() })

	s := startStack(t)
	s.runWorker("bridge", "worker", "mcp", "--tool", "pictures", "--url", "http://"+ln.Addr().String()+"/")
	c := newClient(t, s)
	var links struct {
		MCPURL string `json:"mcp_url"`
	}
	if err := json.Unmarshal(s.adminCall(http.MethodPost, "/connections", `{"account":"acme","tool":"pictures"}`), &links); err != nil {
		t.Fatal(err)
	}
	// Over REST first, until the bridge is online: the CallToolResult, 10 MiB in base64.
	testenv.WaitFor(t, "the bridged tool answers over REST", func() bool {
		status, _, n := c.rest(t, "/tool-call/pictures/picture", []byte(`{}`))
		return status == http.StatusOK && n > 10<<20
	})

	ctx, cancel := context.WithTimeout(context.Background(), 2*time.Minute)
	defer cancel()
	cs, err := mcp.NewClient(&mcp.Implementation{Name: "payloads-test", Version: "1"}, nil).
		Connect(ctx, &mcp.StreamableClientTransport{Endpoint: links.MCPURL}, nil)
	if err != nil {
		t.Fatal(err)
	}
	defer cs.Close()
	res, err := cs.CallTool(ctx, &mcp.CallToolParams{Name: "picture", Arguments: map[string]any{}})
	if err != nil {
		t.Fatal(err)
	}
	if res.IsError || len(res.Content) != 1 {
		t.Fatalf("picture: error %v, %d contents", res.IsError, len(res.Content))
	}
	got, ok := res.Content[0].(*mcp.ImageContent)
	if !ok || got.MIMEType != "image/png" || sha256.Sum256(got.Data) != sha256.Sum256(img) {
		t.Fatalf("the image came back changed: %T", res.Content[0])
	}
	res, err = cs.CallTool(ctx, &mcp.CallToolParams{Name: "document", Arguments: map[string]any{}})
	if err != nil || res.IsError || len(res.Content) != 1 {
		t.Fatalf("document: %v", err)
	}
	doc, ok := res.Content[0].(*mcp.EmbeddedResource)
	if !ok || doc.Resource == nil || doc.Resource.URI != "file:///scan.pdf" || sha256.Sum256(doc.Resource.Blob) != sha256.Sum256(img) {
		t.Fatalf("the embedded resource came back changed: %T", res.Content[0])
	}

	// In a session (mcp-go at 2025-11-25), where the server's own result is copied
	// into the response as it is read from the bucket, not decoded.
	c.mcp = links.MCPURL
	tr, err := mcpgotransport.NewStreamableHTTP(c.mcp)
	if err != nil {
		t.Fatal(err)
	}
	cl := mcpgo.NewClient(tr, mcpgo.WithProtocolVersion("2025-11-25"))
	if err := cl.Start(ctx); err != nil {
		t.Fatal(err)
	}
	defer cl.Close()
	if _, err := cl.Initialize(ctx, mcpgotypes.InitializeRequest{Params: mcpgotypes.InitializeParams{
		ProtocolVersion: "2025-11-25", ClientInfo: mcpgotypes.Implementation{Name: "payloads-test", Version: "1"},
	}}); err != nil {
		t.Fatal(err)
	}
	got2, err := cl.CallTool(ctx, mcpgotypes.CallToolRequest{Params: mcpgotypes.CallToolParams{Name: "picture", Arguments: map[string]any{}}})
	if err != nil || got2.IsError || len(got2.Content) != 1 {
		t.Fatalf("picture in a session: %v", err)
	}
	pic, ok := got2.Content[0].(mcpgotypes.ImageContent)
	data, derr := base64.StdEncoding.DecodeString(pic.Data)
	if !ok || derr != nil || pic.MIMEType != "image/png" || sha256.Sum256(data) != sha256.Sum256(img) {
		t.Fatalf("the image came back changed in a session: %T %v", got2.Content[0], derr)
	}
}
