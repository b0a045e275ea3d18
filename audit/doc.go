// Package audit keeps the audit trail: one record of every call an edge answers and
// of every change an administrator makes, in one replicated JetStream stream that
// every edge writes and any edge reads. A record says who called what, by which
// door, how it ended and how long it took; of the arguments it keeps their sha256,
// and the arguments and the result themselves only where the account asks, without
// the fields the method's schemas mark secret (Redact). A call is answered once its
// record is stored (Trail.Write); what could not be written is counted.
package audit
