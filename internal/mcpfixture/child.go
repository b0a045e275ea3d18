package mcpfixture

import (
	"context"
	"fmt"
	"os"

	"github.com/modelcontextprotocol/go-sdk/mcp"
)

// ChildEnv is the environment variable that makes RunIfChild serve: a test sets it on
// the command it starts as the fixture's stdio child.
const ChildEnv = "TOOLGATE_MCPFIXTURE"

// PlainEnv set to "1" makes the stdio fixture Plain: it declares nothing it keeps per
// session.
const PlainEnv = "TOOLGATE_MCPFIXTURE_PLAIN"

// RunIfChild serves the fixture on stdin and stdout and exits when ChildEnv is set to
// "stdio" ("stdio-no-tasks": a server that knows nothing of tasks, Options.NoTasks);
// otherwise it returns at once. A test binary calls it first thing in TestMain,
// and then starts itself (os.Args[0]) with ChildEnv=stdio as a stdio MCP server.
func RunIfChild() {
	switch os.Getenv(ChildEnv) {
	case "stdio":
		os.Exit(ServeStdio(false))
	case "stdio-no-tasks":
		os.Exit(ServeStdio(true))
	}
}

// ServeStdio serves the fixture on stdin and stdout until stdin closes, with the
// crash tool (and without tasks when noTasks), and tells stderr when it starts and when a call is cancelled. It returns
// the process's exit code.
func ServeStdio(noTasks bool) int {
	s := New(Options{
		NoTasks: noTasks,
		Plain:   os.Getenv(PlainEnv) == "1",
		Exit:    os.Exit,
		Cancelled: func(tool string) {
			fmt.Fprintf(os.Stderr, "mcpfixture: call of %s cancelled\n", tool)
		},
	})
	fmt.Fprintf(os.Stderr, "mcpfixture: serving on stdio, pid %d\n", os.Getpid())
	if err := s.Run(context.Background(), &mcp.StdioTransport{}); err != nil {
		fmt.Fprintln(os.Stderr, "mcpfixture:", err)
		return 1
	}
	return 0
}
