package bus

import (
	"errors"
	"fmt"
)

// ErrNoResponders means no worker of the tool is subscribed: the tool is offline.
var ErrNoResponders = errors.New("bus: no worker answers")

// ErrTimeout means the caller's deadline passed before the tool answered.
var ErrTimeout = errors.New("bus: tool did not answer before the deadline")

// ErrPayloadTooLarge means the message would exceed the server's max_payload. It is
// refused before sending: NATS would otherwise reject or truncate it.
var ErrPayloadTooLarge = errors.New("bus: payload exceeds the server's max_payload")

// PayloadTooLargeError says how large the message was and what the limit is.
type PayloadTooLargeError struct {
	Size, Max int64
}

func (e *PayloadTooLargeError) Error() string {
	return fmt.Sprintf("bus: message of %d bytes exceeds max_payload %d", e.Size, e.Max)
}

// Unwrap makes errors.Is(err, ErrPayloadTooLarge) true.
func (e *PayloadTooLargeError) Unwrap() error { return ErrPayloadTooLarge }
