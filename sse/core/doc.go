// Package core is what sse's transports share: the Server behind them, which opens
// and follows MCP sessions (registry.SessionIndex), answers the JSON-RPC methods of
// every revision, runs calls through the gateway (tools/call, and the methods a link
// forwards to a tool's workers), hands a stateless call's worker requests to its
// client in rounds, and keeps every stream's events in the registry's event log so
// that any edge can resume them. Packages legacy, streamable and stateless serve
// the HTTP of each transport or revision on top of it.
package core
