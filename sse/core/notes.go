package core

import (
	"encoding/json"

	"github.com/modelcontextprotocol/go-sdk/mcp"
	"github.com/nats-io/nats.go"

	"github.com/toolgate/toolgate/bus/wire"
)

// logLevel is the least severe level of log notification the request's client
// wants, or "" for none. On 2026-07-28 it is what the request's _meta asks for, and
// nothing without. Before, it is what the session set with logging/setLevel, or info
// for a caller that follows the call's progress anyway.
func (s *Server) logLevel(r *Request, progress bool) string {
	switch {
	case r.Stateless:
		return r.Meta.LogLevel
	case r.Session != nil && r.Session.LogLevel != "":
		return r.Session.LogLevel
	case progress:
		return "info"
	}
	return ""
}

// relayNote turns a worker's notification into the client's notifications/progress
// or notifications/message.
func (s *Server) relayNote(r *Request, token any, level string, msg *nats.Msg) {
	n, err := wire.ReadNotification(msg.Data)
	if err != nil {
		s.log.Warn("dropping undecodable notification", "subject", msg.Subject, "err", err)
		return
	}
	switch n.Kind {
	case wire.KindProgress:
		if token == nil {
			return
		}
		r.Notify(EncodeNotification(notifyProgress, &mcp.ProgressNotificationParams{
			ProgressToken: token, Progress: n.Progress, Total: n.Total, Message: n.Message,
		}))
	case wire.KindLog:
		if level == "" || !logAtLeast(n.Level, level) {
			return
		}
		data := n.Data
		if len(data) == 0 {
			data, _ = json.Marshal(n.Message)
		}
		lvl := n.Level
		if lvl == "" {
			lvl = "info"
		}
		r.Notify(EncodeNotification(notifyMessage, &mcp.LoggingMessageParams{
			Level: mcp.LoggingLevel(lvl), Logger: n.Logger, Data: data,
		}))
	}
}
