package core

import (
	"testing"

	"github.com/modelcontextprotocol/go-sdk/jsonrpc"
	"github.com/modelcontextprotocol/go-sdk/mcp"

	"github.com/toolgate/toolgate/gateway"
)

// TestTheTablesCodesAreMCPs: the JSON-RPC codes of gateway's table that JSON-RPC and
// MCP define are theirs, as the go-sdk names them.
func TestTheTablesCodesAreMCPs(t *testing.T) {
	for _, c := range []struct {
		name       string
		table, sdk int64
	}{
		{"header mismatch", gateway.RPCHeaderMismatch, mcp.CodeHeaderMismatch},
		{"unsupported protocol version", gateway.RPCUnsupportedVersion, mcp.CodeUnsupportedProtocolVersion},
		{"missing capability", gateway.RPCMissingCapability, mcp.CodeMissingRequiredClientCapabilities},
		{"invalid params", gateway.RPCInvalidParams, jsonrpc.CodeInvalidParams},
		{"method not found", gateway.RPCMethodNotFound, jsonrpc.CodeMethodNotFound},
		{"invalid request", gateway.RPCInvalidRequest, jsonrpc.CodeInvalidRequest},
		{"parse error", gateway.RPCParseError, jsonrpc.CodeParseError},
		{"internal error", gateway.RPCInternalError, jsonrpc.CodeInternalError},
	} {
		if c.table != c.sdk {
			t.Errorf("%s: the table says %d, the go-sdk %d", c.name, c.table, c.sdk)
		}
	}
}
