package wire

import (
	"encoding/json"
	"errors"
	"fmt"
	"strconv"

	"github.com/nats-io/nats.go"
)

// A worker sends the client of an MCP session a request (sampling, elicitation,
// roots) as a JSON-RPC request on SessionOut(tool, session), published as a request so
// that the session event log's acknowledgement (a JetStream PubAck) says it is
// stored. The edge holding the client's stream writes it; whichever edge receives the
// client's JSON-RPC response publishes it, as the client sent it, on
// SessionReply(tool, session, id).

// SessionRequest is the body of a request with id for a session's client.
func SessionRequest(id, method string, params any) ([]byte, error) {
	return sessionMessage(&id, method, params)
}

// SessionNotification is the body of a notification for a session's client.
func SessionNotification(method string, params any) ([]byte, error) {
	return sessionMessage(nil, method, params)
}

// sessionMessage is a request (with id) or a notification (without) for a client.
func sessionMessage(id *string, method string, params any) ([]byte, error) {
	p, err := json.Marshal(params)
	if err != nil {
		return nil, fmt.Errorf("wire: session message %s: params: %w", method, err)
	}
	b, err := json.Marshal(struct {
		JSONRPC string          `json:"jsonrpc"`
		ID      *string         `json:"id,omitempty"`
		Method  string          `json:"method"`
		Params  json.RawMessage `json:"params,omitempty"`
	}{"2.0", id, method, p})
	if err != nil {
		return nil, fmt.Errorf("wire: session message %s: %w", method, err)
	}
	return b, nil
}

// SessionCancel is the notification that tells a session's client the request id is
// no longer awaited, so it can stop asking its user.
func SessionCancel(id, reason string) []byte {
	b, _ := json.Marshal(map[string]any{ // strings only: cannot fail
		"jsonrpc": "2.0",
		"method":  "notifications/cancelled",
		"params":  map[string]any{"requestId": id, "reason": reason},
	})
	return b
}

// ReadSessionAnswer decodes a client's JSON-RPC response to a session request: its
// result, or its error as a *RPCError.
func ReadSessionAnswer(data []byte) (json.RawMessage, error) {
	var answer struct {
		Result json.RawMessage `json:"result"`
		Error  *RPCError       `json:"error"`
	}
	if err := json.Unmarshal(data, &answer); err != nil {
		return nil, fmt.Errorf("wire: session answer: %w", err)
	}
	if answer.Error != nil {
		return nil, answer.Error
	}
	return answer.Result, nil
}

// Capability is the client capability a session request of method needs, or "" for
// a method every client answers.
func Capability(method string) string {
	switch method {
	case "sampling/createMessage":
		return "sampling"
	case "elicitation/create":
		return "elicitation"
	case "roots/list":
		return "roots"
	}
	return ""
}

// ErrNotStored means no stream stores the subject a message was published on: the
// bucket or the session event log it is meant for does not exist on this NATS system.
var ErrNotStored = errors.New("wire: nothing stores this subject")

// ReadAck decodes JetStream's acknowledgement of a message published to a stream (a
// registry record, a session request) and returns the sequence it was stored at.
func ReadAck(msg *nats.Msg) (uint64, error) {
	if len(msg.Data) == 0 && msg.Header.Get(headerNATSStatus) == "503" {
		return 0, ErrNotStored
	}
	var ack struct {
		Seq   uint64 `json:"seq"`
		Error *struct {
			Code        int    `json:"code"`
			ErrCode     int    `json:"err_code"`
			Description string `json:"description"`
		} `json:"error"`
	}
	if err := json.Unmarshal(msg.Data, &ack); err != nil {
		return 0, fmt.Errorf("wire: acknowledgement: %w", err)
	}
	if ack.Error != nil {
		return 0, fmt.Errorf("wire: not stored: %s (%s)", ack.Error.Description, strconv.Itoa(ack.Error.ErrCode))
	}
	return ack.Seq, nil
}
