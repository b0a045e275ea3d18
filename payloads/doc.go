// Package payloads is the edges' side of the claim check: the requests and replies
// too large for one NATS message (wire.PayloadThreshold), kept as parts in the
// JetStream object store wire.PayloadBucket while a call needs them. An edge writes a
// large body there as it arrives from its HTTP client, holding one of the object
// store's chunks at a time, and streams a large reply from there to its client, one
// part at a time; it answers the workers' asks for their own tool's parts (package
// asks), and removes a payload once the call it belongs to has used it. What is left
// (an edge that died mid-call) expires with the bucket's TTL.
package payloads
