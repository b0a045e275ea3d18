// Package sse serves MCP over HTTP for every tool's link: the legacy HTTP+SSE
// transport (2024-11-05), Streamable HTTP with sessions (2025-03-26 to 2025-11-25) and
// the stateless revision 2026-07-28 on the same endpoint. Sessions live in the
// registry, stream events in a JetStream event log and messages for a session's
// client travel over the bus, so any edge can serve any request of any session and a
// client that reconnects to another edge resumes where it left off.
package sse
