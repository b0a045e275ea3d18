// Command mcpfixture runs the MCP fixture server: on stdin and stdout by default, or
// over Streamable HTTP with -http, so that it can be bridged or run through the MCP
// conformance suite.
package main

import (
	"flag"
	"fmt"
	"net/http"
	"os"

	"github.com/modelcontextprotocol/go-sdk/mcp"

	"github.com/toolgate/toolgate/internal/mcpfixture"
)

func main() {
	addr := flag.String("http", "", "serve Streamable HTTP at /mcp on this address (host:port) instead of stdio")
	noTasks := flag.Bool("no-tasks", false, "know nothing of tasks: no tasks extension, no tasks methods; every tool answers its call as it comes")
	flag.Parse()
	if *addr == "" {
		os.Exit(mcpfixture.ServeStdio(*noTasks))
	}
	s := mcpfixture.New(mcpfixture.Options{NoTasks: *noTasks})
	mux := http.NewServeMux()
	// An event store lets a client resume a stream the server closed (test_reconnection).
	mux.Handle("/mcp", mcp.NewStreamableHTTPHandler(func(*http.Request) *mcp.Server { return s },
		&mcp.StreamableHTTPOptions{EventStore: mcp.NewMemoryEventStore(nil)}))
	fmt.Fprintf(os.Stderr, "mcpfixture: serving http://%s/mcp\n", *addr)
	if err := http.ListenAndServe(*addr, mux); err != nil {
		fmt.Fprintln(os.Stderr, "mcpfixture:", err)
		os.Exit(1)
	}
}
