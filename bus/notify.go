package bus

import "encoding/json"

// Notification kinds published on Progress(requestID).
const (
	KindProgress = "progress"
	KindLog      = "log"
)

// Notification is what a worker publishes on Progress(requestID) while a call runs,
// when the request carried Tg-Progress. The edge serving the call turns it into an
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
