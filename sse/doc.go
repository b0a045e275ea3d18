// Package sse serves MCP over HTTP for every tool's link: the legacy HTTP+SSE
// transport (2024-11-05, package legacy), Streamable HTTP with sessions (2025-03-26
// to 2025-11-25, package streamable) and the stateless revision 2026-07-28 on the
// same endpoint (package stateless). What they share is package core: sessions,
// calls through the gateway, the JSON-RPC methods, streams kept in the event log.
// Sessions live in the registry, stream events in the registry's event log and
// messages for a session's client travel over the bus, so any edge can serve any
// request of any session and a client that reconnects to another edge resumes where
// it left off.
package sse
