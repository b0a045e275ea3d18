// Package audit keeps the audit trail: one record of every call an edge answers and
// of every change an administrator makes, in one replicated JetStream stream that
// every edge writes and any edge reads. A record says who called what, by which
// door, how it ended and how long it took; of the arguments it keeps only their
// sha256, never the arguments or the result. Records are written without holding up
// the call they describe (Trail.Write); what could not be written is counted.
package audit
