// Package registry owns toolgate's state in JetStream KV: tools and their methods,
// accounts, API keys, connections, SSE links, worker presence and MCP sessions. It
// creates the buckets, writes the records (compare-and-set where writers race), makes
// and hashes secrets, follows buckets (Store.Follow, for the View and every other copy
// an edge keeps), and keeps an in-memory View that answers authentication, visibility
// (authz.go) and schema validation without a round trip to NATS.
package registry
