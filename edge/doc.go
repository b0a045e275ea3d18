// Package edge is toolgate's HTTP front door, on gin: it authenticates callers (API
// keys, SSE link tokens, the admin key), lists the tools an account may use, runs tool
// calls through the gateway and answers them as the tool did, serves the direct tool
// API with its OpenAPI document and the admin API, and maps every internal error to
// one JSON envelope. MCP transports are served by an MCP implementation it is given.
package edge
