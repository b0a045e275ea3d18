// Package chaos tests toolgate as it is deployed, against the faults an operator
// meets: separate processes of the one binary (a 3-node NATS cluster, two edges, two
// demo workers) on 127.0.0.1, bounded load through both edges, and a NATS node, an
// edge and a worker killed under it. Its test asserts that no call hangs, none is lost,
// and calls fail for at most two seconds per fault, and prints the figures (go test -v,
// or make chaos).
package chaos
