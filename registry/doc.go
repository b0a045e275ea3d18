// Package registry owns toolgate's state in JetStream KV: tools and their methods,
// accounts, API keys, connections, SSE links, worker presence and MCP sessions. It
// creates the buckets, writes the records (compare-and-set where writers race), makes
// and hashes secrets, and keeps a watch-driven in-memory View that answers
// authentication, visibility and schema validation without a round trip to NATS.
package registry
