// Package busauth is the bus's security: a deployment's decentralized NATS JWT
// authority (an operator, a system account and the toolgate account), the
// permissions of each role on the bus (edge, admin, the workers of one tool), the
// credentials files those roles connect with, the record of what was issued,
// revocation pushed to running servers, and the certificates for TLS on client and
// route ports.
package busauth
