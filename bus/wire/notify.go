package wire

import (
	"encoding/json"
	"fmt"
)

// Notification kinds published on Progress(tool, callID).
const (
	KindProgress = "progress"
	KindLog      = "log"
)

// Notification is what a worker publishes on Progress(tool, callID) while a call runs,
// when the request carried HeaderProgress. The edge serving the call turns it into an
// MCP notifications/progress or notifications/message for the caller's session.
type Notification struct {
	Kind     string          `json:"kind"`
	Progress float64         `json:"progress,omitempty"`
	Total    float64         `json:"total,omitempty"`
	Message  string          `json:"message,omitempty"`
	Level    string          `json:"level,omitempty"`  // log: debug, info, notice, warning, error, ...
	Logger   string          `json:"logger,omitempty"` // log: the logger's name
	Data     json.RawMessage `json:"data,omitempty"`   // log: any JSON
}

// Encode is the notification's body.
func (n *Notification) Encode() ([]byte, error) {
	b, err := json.Marshal(n)
	if err != nil {
		return nil, fmt.Errorf("wire: %s notification: %w", n.Kind, err)
	}
	return b, nil
}

// ReadNotification decodes a notification's body.
func ReadNotification(data []byte) (Notification, error) {
	var n Notification
	if err := json.Unmarshal(data, &n); err != nil {
		return n, fmt.Errorf("wire: notification: %w", err)
	}
	return n, nil
}
