package bus

import (
	"errors"
	"fmt"
	"time"
)

// ErrNoResponders means no worker of the tool is subscribed: the tool is offline.
var ErrNoResponders = errors.New("bus: no worker answers")

// ErrTimeout means the caller's deadline passed before the tool answered.
var ErrTimeout = errors.New("bus: tool did not answer before the deadline")

// ErrPayloadTooLarge means the message would exceed the server's max_payload. It is
// refused before sending: NATS would otherwise reject or truncate it.
var ErrPayloadTooLarge = errors.New("bus: payload exceeds the server's max_payload")

// ToolError is a tool's own failure, carried in the nats micro error headers.
type ToolError struct {
	Code    string // the tool's error code (Nats-Service-Error-Code)
	Message string // the tool's description (Nats-Service-Error)
	Status  int    // the HTTP status the tool asked for (Tg-Status), 0 if none
	Data    []byte // any body the tool sent with the error
	// Elapsed is the round trip on the bus, as in Reply; set by Do.
	Elapsed time.Duration
}

func (e *ToolError) Error() string {
	return fmt.Sprintf("tool error %s: %s", e.Code, e.Message)
}

// PayloadTooLargeError says how large the message was and what the limit is.
type PayloadTooLargeError struct {
	Size, Max int64
}

func (e *PayloadTooLargeError) Error() string {
	return fmt.Sprintf("bus: message of %d bytes exceeds max_payload %d", e.Size, e.Max)
}

// Unwrap makes errors.Is(err, ErrPayloadTooLarge) true.
func (e *PayloadTooLargeError) Unwrap() error { return ErrPayloadTooLarge }
