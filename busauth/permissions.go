package busauth

import (
	"time"

	"github.com/nats-io/jwt/v2"

	"github.com/toolgate/toolgate/bus"
)

// The buckets of the registry and of the dashboard's sign-ins, and the MCP event
// log's stream: what an edge reads and writes. They are named here rather than taken
// from the packages that own them so that this package, which tool teams' credentials
// are made with, depends on nothing but the bus.
var (
	edgeBuckets = []string{
		"tg-tools", "tg-accounts", "tg-keys", "tg-connections", "tg-links",
		"tg-presence", "tg-sessions", "tg-rates", "tg-dashboard-sessions",
	}
)

// eventLogStream is the MCP event log's stream name for a subject prefix (sse's
// eventStreamName).
func eventLogStream(s bus.Subjects) string { return prefix(s) + "-mcp-events" }

func prefix(s bus.Subjects) string {
	if s.Prefix == "" {
		return bus.DefaultPrefix
	}
	return s.Prefix
}

// ReplyWindow is how long a worker may take to answer a call it received: the
// server lets a user answer a request only once (allow_responses) and only this
// long after it arrived. It is longer than the edge's longest deadline
// (--max-timeout, 5 minutes unless set), so no reply the caller still waits for is
// refused.
const ReplyWindow = 10 * time.Minute

// WorkerPermissions are what the workers of the given tools may do on the bus, and
// nothing else: take their tools' calls in the tools' queue groups, follow their
// cancels and session replies, answer, report progress, write to their sessions'
// streams, write their own tool records and presence keys, use inboxes under
// _INBOX.tool.<tool>, and answer nats micro discovery. With several tools the user
// may do this for each of them.
func WorkerPermissions(s bus.Subjects, tools ...string) jwt.Permissions {
	p := jwt.Permissions{Resp: &jwt.ResponsePermission{MaxMsgs: 1, Expires: ReplyWindow}}
	p.Sub.Allow.Add("$SRV.PING", "$SRV.INFO", "$SRV.STATS")
	pre := prefix(s)
	for _, t := range tools {
		queue := " " + pre + "." + t
		p.Sub.Allow.Add(
			pre+".call."+t+".>"+queue,
			pre+".mcp."+t+queue,
			pre+".cancel."+t+".>",
			pre+".sess."+t+".*.reply.>",
			WorkerInboxPrefix(t)+".>",
			"$SRV.*."+t, "$SRV.*."+t+".>",
		)
		p.Pub.Allow.Add(
			pre+".progress."+t+".>",
			pre+".sess."+t+".*.out", pre+".sess."+t+".*.out.*",
			"$KV.tg-tools."+t,
			"$KV.tg-presence."+t+".*",
			"$JS.API.DIRECT.GET.KV_tg-tools.$KV.tg-tools."+t,
		)
	}
	return p
}

// WorkerInboxPrefix is the inbox prefix a worker of tool connects with
// (nats.CustomInboxPrefix): replies to its requests and JetStream publishes come to
// inboxes only its tool may read.
func WorkerInboxPrefix(tool string) string { return "_INBOX.tool." + tool }

// EdgePermissions are what an edge does: call tools (requests on the call and MCP
// subjects, never subscriptions to them), cancel calls and follow cancels and
// progress, carry MCP sessions' messages and follow the event log, and use the
// registry's buckets and the event log through JetStream: create them when they are
// missing and update them when told to (--update-registry), read, write and follow
// them. It may not delete or purge a stream, touch any other stream, or read a
// worker's inbox.
func EdgePermissions(s bus.Subjects) jwt.Permissions {
	pre := prefix(s)
	var p jwt.Permissions
	p.Pub.Allow.Add(
		pre+".call.>", pre+".mcp.>", pre+".cancel.>", pre+".sess.>",
		"$JS.API.INFO",
		"$JS.FC.>", // flow control answers of the consumers that watch buckets
	)
	for _, b := range edgeBuckets {
		st := "KV_" + b
		p.Pub.Allow.Add(
			"$KV."+b+".>",
			"$JS.API.STREAM.INFO."+st, "$JS.API.STREAM.CREATE."+st, "$JS.API.STREAM.UPDATE."+st,
			"$JS.API.DIRECT.GET."+st+".>",
			"$JS.API.CONSUMER.CREATE."+st+".>", "$JS.API.CONSUMER.DELETE."+st+".*", "$JS.API.CONSUMER.MSG.NEXT."+st+".*",
		)
	}
	log := eventLogStream(s)
	p.Pub.Allow.Add(
		"$JS.API.STREAM.INFO."+log, "$JS.API.STREAM.CREATE."+log, "$JS.API.STREAM.UPDATE."+log,
		"$JS.API.STREAM.MSG.GET."+log,
	)
	p.Sub.Allow.Add("_INBOX.>", pre+".cancel.>", pre+".progress.>", pre+".logged.>")
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
