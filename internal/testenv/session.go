package testenv

import (
	"encoding/json"
	"testing"

	"github.com/nats-io/nats.go"

	"github.com/toolgate/toolgate/bus/wire"
)

// SessionEdge plays the edge side of server-initiated requests for one MCP session:
// it acknowledges what a worker sends on the session's out subject, as the session
// event log does, puts each message on Sent, and answers each request with
// answer(id) when that is not empty.
type SessionEdge struct {
	Sent chan map[string]any
}

// NewSessionEdge starts a SessionEdge for a session of tool on nc; answer may be nil.
func NewSessionEdge(t testing.TB, nc *nats.Conn, tool, session string, answer func(id string) string) *SessionEdge {
	t.Helper()
	se := &SessionEdge{Sent: make(chan map[string]any, 16)}
	sub, err := nc.Subscribe(wire.DefaultSubjects.SessionOut(tool, session), func(msg *nats.Msg) {
		var m map[string]any
		_ = json.Unmarshal(msg.Data, &m)
		se.Sent <- m
		if msg.Reply != "" {
			_ = msg.Respond([]byte(`{"stream":"tg-sessions","seq":1}`))
		}
		id, _ := m["id"].(string)
		if id == "" || answer == nil {
			return
		}
		if a := answer(id); a != "" {
			_ = nc.Publish(wire.DefaultSubjects.SessionReply(tool, session, id), []byte(a))
		}
	})
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { _ = sub.Unsubscribe() })
	return se
}
