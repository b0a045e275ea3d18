// Package bus owns the edge's use of NATS: connecting with reconnects, the embedded
// server (single node or cluster), and the request helper that sends a tool call to
// its workers and turns its failures into typed errors. What the messages say is the
// contract of bus/wire, which the worker SDK shares.
package bus
