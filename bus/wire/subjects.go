package wire

import "strings"

// DefaultPrefix is the first token of every toolgate subject.
const DefaultPrefix = "tg"

// Subjects names every subject under one prefix, so a deployment can run several
// gateways on one NATS system. Every subject a worker of a tool uses carries the
// tool's id, so that the NATS server can hold each tool's workers to their own.
type Subjects struct {
	Prefix string
}

// DefaultSubjects uses DefaultPrefix.
var DefaultSubjects = Subjects{Prefix: DefaultPrefix}

func (s Subjects) prefix() string {
	if s.Prefix == "" {
		return DefaultPrefix
	}
	return s.Prefix
}

// join makes prefix.token1.token2...; it is on every call's path, so in one allocation.
func (s Subjects) join(tokens ...string) string {
	p := s.prefix()
	n := len(p)
	for _, t := range tokens {
		n += 1 + len(t)
	}
	var b strings.Builder
	b.Grow(n)
	b.WriteString(p)
	for _, t := range tokens {
		b.WriteByte('.')
		b.WriteString(t)
	}
	return b.String()
}

// Call is the subject a tool's method is called on: edge to the tool's workers, in
// the tool's queue group.
func (s Subjects) Call(tool, method string) string { return s.join("call", tool, method) }

// CallAll matches every method of a tool.
func (s Subjects) CallAll(tool string) string { return s.join("call", tool, ">") }

// QueueGroup is the queue group the instances of one tool share.
func (s Subjects) QueueGroup(tool string) string { return s.join(tool) }

// MCP carries the MCP methods other than tools (resources, prompts, completion) to a
// tool's workers: the request's data is the JSON-RPC params, HeaderMethod names the
// method, and the reply is the JSON-RPC result or error (see RPCResultReply).
func (s Subjects) MCP(tool string) string { return s.join("mcp", tool) }

// Instance is the root of the subjects of one worker instance of tool: a request sent
// to it rather than to the tool's queue group, Instance(tool, instance)+".call.<method>"
// or +".mcp", reaches that instance alone. The edges send an MCP session's requests
// there once an instance answered it, for a tool whose workers keep state per session
// (Capabilities.SessionState).
func (s Subjects) Instance(tool, instance string) string { return s.join("inst", tool, instance) }

// InstanceAll matches every request sent to one instance of tool: what it subscribes to.
func (s Subjects) InstanceAll(tool, instance string) string {
	return s.join("inst", tool, instance, ">")
}

// InstanceTool matches the requests sent to any instance of tool: what its workers
// may subscribe to.
func (s Subjects) InstanceTool(tool string) string { return s.join("inst", tool, ">") }

// Cancel tells the workers of tool, and every edge, to stop the call callID: its
// caller left or its deadline passed.
func (s Subjects) Cancel(tool, callID string) string { return s.join("cancel", tool, callID) }

// CancelTool matches the cancels of one tool's calls: what its workers follow.
func (s Subjects) CancelTool(tool string) string { return s.join("cancel", tool, ">") }

// CancelAll matches every cancel: what edges follow, to stop an MCP call another edge
// was asked to cancel.
func (s Subjects) CancelAll() string { return s.join("cancel", ">") }

// Revoked is where an edge announces a revocation it has stored (a key revoked, a
// link rotated, an account, a connection or its credentials removed), which every
// edge follows and applies at once. It carries a kind and an id (a key's or link's
// sha256, never a secret), not stored.
func (s Subjects) Revoked() string { return s.join("revoked") }

// ParseCancel reads the tool and call id out of a cancel subject.
func (s Subjects) ParseCancel(subject string) (tool, callID string, ok bool) {
	rest, ok := strings.CutPrefix(subject, s.prefix()+".cancel.")
	if !ok {
		return "", "", false
	}
	tool, callID, ok = strings.Cut(rest, ".")
	if !ok || tool == "" || callID == "" || strings.Contains(callID, ".") {
		return "", "", false
	}
	return tool, callID, true
}

// Progress carries the progress and log notifications of the call callID of tool,
// from the worker running it to the edge serving it.
func (s Subjects) Progress(tool, callID string) string { return s.join("progress", tool, callID) }

// SessionOut carries messages for the client of an MCP session of tool, on its
// standalone stream, into the session event log.
func (s Subjects) SessionOut(tool, session string) string {
	return s.join("sess", tool, session, "out")
}

// SessionPost carries the messages of the stream of one POST of an MCP session.
func (s Subjects) SessionPost(tool, session, post string) string {
	return s.join("sess", tool, session, "out", post)
}

// SessionReply carries a client's answer to the request id a worker sent it, back to
// the worker.
func (s Subjects) SessionReply(tool, session, id string) string {
	return s.join("sess", tool, session, "reply", id)
}

// SessionEnd tells a tool's workers that an MCP session of tool ended (its client
// deleted it, or it expired): what they hold for it, they may let go. Every edge
// publishes it, so a worker may hear it more than once.
func (s Subjects) SessionEnd(tool, session string) string {
	return s.join("sess", tool, session, "end")
}

// SessionEnds matches the ends of every session of tool: what its workers follow.
func (s Subjects) SessionEnds(tool string) string { return s.join("sess", tool, "*", "end") }

// ParseSessionEnd reads the tool and session out of a SessionEnd subject.
func (s Subjects) ParseSessionEnd(subject string) (tool, session string, ok bool) {
	rest, ok := strings.CutPrefix(subject, s.SessionRoot())
	if !ok {
		return "", "", false
	}
	rest, ok = strings.CutSuffix(rest, ".end")
	if !ok {
		return "", "", false
	}
	tool, session, ok = strings.Cut(rest, ".")
	return tool, session, ok && tool != "" && session != "" && !strings.Contains(session, ".")
}

// SessionReplies matches the answers to every session request of tool's workers.
func (s Subjects) SessionReplies(tool string) string { return s.join("sess", tool, "*", "reply", ">") }

// EventLogStream names the JetStream stream that is the MCP session event log:
// "<prefix>-mcp-events", the prefix's dots and wildcards made dashes (a stream's name
// has none).
func (s Subjects) EventLogStream() string {
	return strings.NewReplacer(".", "-", "*", "-", ">", "-").Replace(s.prefix()) + "-mcp-events"
}

// EventLog lists the subjects the session event log stores: the standalone streams
// and the POST streams of every session of every tool.
func (s Subjects) EventLog() []string {
	return []string{s.join("sess", "*", "*", "out"), s.join("sess", "*", "*", "out", "*")}
}

// SessionRoot is what every session subject starts with; Logged replaces it.
func (s Subjects) SessionRoot() string { return s.join("sess") + "." }

// LoggedRoot is where the event log republishes what it stored: a record stored on
// tg.sess.<tool>.<session>.out[.<post>] is republished on
// tg.logged.sess.<tool>.<session>.out[.<post>], for the edge holding the stream.
func (s Subjects) LoggedRoot() string { return s.join("logged", "sess") + "." }

// Logged is the subject the event log republishes a record of subject on.
func (s Subjects) Logged(subject string) string {
	return s.LoggedRoot() + strings.TrimPrefix(subject, s.SessionRoot())
}

// Audit is where an edge writes one record of the audit trail: its kind (a call, an
// admin change), the account, the tool, the method and the outcome, each a token
// (AuditToken), so that a reader filters on them by subject.
func (s Subjects) Audit(kind, account, tool, method, outcome string) string {
	return s.join("audit", AuditToken(kind), AuditToken(account), AuditToken(tool), AuditToken(method), AuditToken(outcome))
}

// AuditAll matches every record of the audit trail: the subjects its stream keeps.
func (s Subjects) AuditAll() string { return s.join("audit", ">") }

// AuditStream names the stream that keeps the audit trail.
func (s Subjects) AuditStream() string {
	return strings.NewReplacer(".", "-", "*", "-", ">", "-").Replace(s.prefix()) + "-audit"
}

// AuditToken is s as one token of an audit subject: s itself when it is a token
// (ValidToken), else with every other character as '_' ("resources/read" is
// "resources_read"), and "_" for nothing. Two values may share a token; a reader
// filtering by subject checks the records themselves too.
func AuditToken(s string) string {
	if ValidToken(s) {
		return s
	}
	if s == "" {
		return "_"
	}
	b := []byte(s[:min(len(s), 128)])
	for i, c := range b {
		if !tokenByte(c) {
			b[i] = '_'
		}
	}
	return string(b)
}

// The registry buckets whose records a worker asks an edge to write. Their names are the deployment's, not the
// subject prefix's.
const (
	BucketTools    = "tg-tools"
	BucketPresence = "tg-presence"
)

// BucketSessions is the registry bucket of MCP sessions, which every edge follows
// (registry.SessionIndex) and the edges' bus permissions name.
const BucketSessions = "tg-sessions"

// ToolRecord is the subject of tool's record in the tools bucket.
func ToolRecord(tool string) string { return "$KV." + BucketTools + "." + tool }

// PresenceRecord is the subject of a worker instance's presence in the presence
// bucket.
func PresenceRecord(tool, instance string) string {
	return "$KV." + BucketPresence + "." + tool + "." + instance
}

// StateBucketPrefix begins the name of every tool's state bucket.
const StateBucketPrefix = "tg-state-"

// StateBucket is the KV bucket the workers of tool keep their own state in (the
// demo email tool's outbox, for one): an admin makes it, and the tool's workers may
// use it and no other bucket but their records. Tool ids hold no dot, so no tool's
// bucket is another's, nor one of the registry's.
func StateBucket(tool string) string { return StateBucketPrefix + tool }

// WorkerInbox is the root of the subjects a worker of tool waits for answers on (the
// edges' answers to its asks): its own, so that a worker never needs the whole of
// _INBOX, and the only place an edge answers an ask of the tool.
func WorkerInbox(tool string) string { return "_INBOX.tool." + tool + "." }
