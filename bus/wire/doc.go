// Package wire is the contract between toolgate's edges and the workers of its tools:
// every subject, header and message body that crosses NATS between them. Both sides
// import it and nothing else encodes or decodes what they send each other: the
// request a call travels as, the reply a worker answers with (a tool's error and a
// JSON-RPC error alike, as data), progress notifications, server-to-client session
// requests, and the tool and presence records a worker writes to the registry.
//
// It imports neither the NATS server nor the registry, so the worker SDK stays small.
// The golden tests pin the exact messages: a change to the contract is a visible
// change to testdata/.
package wire
