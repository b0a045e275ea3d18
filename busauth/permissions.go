package busauth

import (
	"time"

	"github.com/nats-io/jwt/v2"

	"github.com/toolgate/toolgate/bus/wire"
)

// edgeBuckets are the buckets of the registry, of the dashboard's sign-ins and of the
// calls that outlive their request: what an edge reads and writes. They are named here
// rather than imported from registry, edge/dashboard and calls, which sit above the
// bus's security; a test holds the lists together.
var edgeBuckets = []string{
	wire.BucketTools, "tg-accounts", "tg-keys", "tg-connections", "tg-links",
	wire.BucketPresence, wire.BucketSessions, "tg-rates", "tg-quotas", "tg-dashboard-sessions", "tg-calls", "tg-approvals",
	"tg-credentials", "tg-oauth", "tg-oauth-keys", "tg-oauth-requests", "tg-oauth-grants",
	"tg-oauth-clients",
}

func prefix(s wire.Subjects) string {
	if s.Prefix == "" {
		return wire.DefaultPrefix
	}
	return s.Prefix
}

// ReplyWindow is how long a worker may take to answer a call it received: the
// server lets a user answer a request only once (allow_responses) and only this
// long after it arrived. It bounds the edge's longest deadline (--max-timeout, 5
// minutes unless set, and --async-max-timeout, 15 minutes unless set, which an edge
// refuses past it), so no reply the caller still waits for is refused.
const ReplyWindow = 30 * time.Minute

// WorkerPermissions are what the workers of the given tools may do on the bus, and
// nothing else: take their tools' calls in the tools' queue groups (and those sent to
// one instance of the tool: a session's requests, see wire.Subjects.Instance), follow their
// cancels and session replies, answer (once per request received, within
// ReplyWindow), report progress, ask the edges for what they must store or read
// (their tool records, presence keys, state and session messages: wire's Ask
// subjects, each naming the tool), use their tools' inboxes, and answer nats micro
// discovery. With several tools the user may do this for each of them.
//
// No JetStream subject at all, nor any subject a stream stores: JetStream publishes
// its answers (a read, a push consumer's messages, a write's acknowledgement) on the
// reply subject the requester names, which no permission checks, so a user that may
// reach it could have the server write another account's records or call another
// tool in its name (see busauth/forgery_test.go). The edges answer asks only on the
// tool's own inbox.
func WorkerPermissions(s wire.Subjects, tools ...string) jwt.Permissions {
	p := jwt.Permissions{Resp: &jwt.ResponsePermission{MaxMsgs: 1, Expires: ReplyWindow}}
	p.Sub.Allow.Add("$SRV.PING", "$SRV.INFO", "$SRV.STATS")
	for _, t := range tools {
		queue := " " + s.QueueGroup(t)
		p.Sub.Allow.Add(
			s.CallAll(t)+queue,
			s.MCP(t)+queue,
			s.InstanceTool(t), // a session's requests, sent to the instance holding it
			s.CancelTool(t),
			s.SessionReplies(t),
			s.SessionEnds(t),
			wire.WorkerInbox(t)+">",
			"$SRV.*."+t, "$SRV.*."+t+".>",
		)
		p.Pub.Allow.Add(
			s.Progress(t, ">"),
			s.AskRecord(t), s.AskPresence(t, "*"), s.AskState(t, "*"), s.AskSession(t, "*"),
			s.AskPayload(t, "*"),
		)
	}
	return p
}

// EdgePermissions are what an edge does: call tools (requests on the call and MCP
// subjects, never subscriptions to them), cancel calls and follow cancels and
// progress, carry MCP sessions' messages and follow the event log, and use the
// registry's buckets and the event log through JetStream: create them when they are
// missing and update them when told to (--update-registry), read, write and follow
// them; write the audit trail and read it; answer workers' asks (package asks),
// which takes the tools' state buckets too, and reply to them on the tools' inboxes.
// It may not make, change, delete or purge any stream but its own, or read a
// worker's inbox.
func EdgePermissions(s wire.Subjects) jwt.Permissions {
	pre := prefix(s)
	var p jwt.Permissions
	p.Pub.Allow.Add(
		pre+".call.>", pre+".mcp.>", pre+".inst.>", s.CancelAll(), pre+".sess.>", s.Revoked(),
		"$JS.API.INFO",
		"$JS.FC.>", // flow control answers of the consumers that watch buckets
	)
	for _, b := range edgeBuckets {
		st := "KV_" + b
		p.Pub.Allow.Add(
			"$KV."+b+".>",
			"$JS.API.STREAM.INFO."+st, "$JS.API.STREAM.CREATE."+st, "$JS.API.STREAM.UPDATE."+st,
			"$JS.API.DIRECT.GET."+st+".>",
			"$JS.API.STREAM.MSG.GET."+st, // reads from the stream's leader (registry.Store)
			"$JS.API.CONSUMER.CREATE."+st+".>", "$JS.API.CONSUMER.DELETE."+st+".*", "$JS.API.CONSUMER.MSG.NEXT."+st+".*",
		)
	}
	// The OAuth authorization requests: one ended is removed whole, leaving no purge
	// marker, so that counting the requests in progress counts only those.
	p.Pub.Allow.Add("$JS.API.STREAM.PURGE.KV_tg-oauth-requests")
	// The tools' state buckets, for the asks of their workers (package asks): a
	// subject permission cannot say "the streams named KV_tg-state-*", so these name
	// every stream, for reading (from the stream's leader too), writing keys and
	// listing them, never for making, changing, purging or deleting one.
	p.Pub.Allow.Add(
		"$KV.*.>", "$JS.API.STREAM.INFO.*", "$JS.API.DIRECT.GET.*.>", "$JS.API.STREAM.MSG.GET.*",
		"$JS.API.CONSUMER.CREATE.*.>", "$JS.API.CONSUMER.DELETE.*.*",
		"_INBOX.tool.>", // the answers to asks, each on the asking tool's inbox
	)
	// The payloads bucket (the claim check): made by the first edge, its objects
	// written, read and removed (a removal purges the object's parts).
	objects := "OBJ_" + wire.PayloadBucket
	p.Pub.Allow.Add(
		"$O."+wire.PayloadBucket+".>",
		"$JS.API.STREAM.CREATE."+objects, "$JS.API.STREAM.PURGE."+objects,
	)
	// The large answers of calls that outlive their request: the same, and its TTL
	// changed with the calls bucket's (--update-registry).
	answers := "OBJ_" + wire.AnswerBucket
	p.Pub.Allow.Add(
		"$O."+wire.AnswerBucket+".>",
		"$JS.API.STREAM.CREATE."+answers, "$JS.API.STREAM.UPDATE."+answers, "$JS.API.STREAM.PURGE."+answers,
	)
	log := s.EventLogStream()
	p.Pub.Allow.Add(
		"$JS.API.STREAM.INFO."+log, "$JS.API.STREAM.CREATE."+log, "$JS.API.STREAM.UPDATE."+log,
		"$JS.API.STREAM.MSG.GET."+log,
	)
	// The audit trail: every edge writes it, and reads it for the admin API through
	// a consumer of its own.
	trail := s.AuditStream()
	p.Pub.Allow.Add(
		s.AuditAll(),
		"$JS.API.STREAM.INFO."+trail, "$JS.API.STREAM.CREATE."+trail, "$JS.API.STREAM.UPDATE."+trail,
		"$JS.API.CONSUMER.CREATE."+trail+".>", "$JS.API.CONSUMER.DELETE."+trail+".*", "$JS.API.CONSUMER.MSG.NEXT."+trail+".*",
	)
	p.Sub.Allow.Add("_INBOX.>", s.CancelAll(), s.Revoked(), pre+".progress.>", s.LoggedRoot()+">",
		// A call answered with a stream has its tool answer beside the stream, in the
		// event log (tg.sess.<tool>.<session>.out.<post>~reply), for the edge running it.
		s.SessionPost("*", "*", "*"))
	p.Sub.Allow.Add(s.Asks()...) // what workers ask of the edges, and their stream answers
	p.Sub.Deny.Add("_INBOX.tool.>")
	return p
}

// AdminPermissions are the admin and bootstrap role's: everything in the toolgate
// account (an empty list allows every subject). It creates the buckets and streams
// and writes accounts and keys, as `toolgate dev` on a shared server does.
func AdminPermissions() jwt.Permissions { return jwt.Permissions{} }

// SystemPermissions are what the system account's user, which the credentials
// commands connect as, may do: send account JWTs to the servers and read their
// answers.
func SystemPermissions() jwt.Permissions {
	var p jwt.Permissions
	p.Pub.Allow.Add(claimsUpdateSubject)
	p.Sub.Allow.Add("_INBOX.>")
	return p
}

// claimsUpdateSubject is where a server of the NATS-based (full) resolver takes a
// new account JWT from a system account user, and answers with whether it stored it.
const claimsUpdateSubject = "$SYS.REQ.CLAIMS.UPDATE"
