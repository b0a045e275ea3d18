// Package bus owns toolgate's use of NATS: connecting with reconnects, the embedded
// server (single node or cluster), the subject and header names every role agrees on,
// and the request helper that turns a tool call into a request-reply message and its
// failures into typed errors.
package bus
