package registry

import (
	"errors"
	"fmt"
	"strings"

	"github.com/toolgate/toolgate/bus/wire"
)

// Errors a caller of the View or Store can meet; edge and sse map them to HTTP and
// JSON-RPC in one place each.
var (
	// ErrUnauthenticated: the key or link is missing, unknown, revoked or expired.
	ErrUnauthenticated = errors.New("unauthenticated")
	// ErrForbidden: the key is valid but its scopes exclude the tool.
	ErrForbidden = errors.New("forbidden")
	// ErrToolNotFound: no such tool, or it is not available to the account. The two are
	// one error so that a caller cannot learn which tools other accounts have.
	ErrToolNotFound = errors.New("tool not found")
	// ErrMethodNotFound: the tool has no such method.
	ErrMethodNotFound = errors.New("method not found")
	// ErrNotFound: an administrative record (account, key, connection) does not exist.
	ErrNotFound = errors.New("not found")
	// ErrExists: the record to create exists already.
	ErrExists = errors.New("already exists")
	// ErrInvalid: a record to write breaks a rule; the error's text says which.
	ErrInvalid = errors.New("invalid")
	// ErrUnavailable: a bucket did not answer in time, in a way waiting mends (its
	// stream electing a leader after a NATS node's loss, the connection down): a
	// change tried for Options.WriteWait, or a read, gave up. The error wraps what
	// the last attempt met.
	ErrUnavailable = errors.New("the registry did not answer in time")
)

// unavailable marks err as ErrUnavailable when waiting would have mended it.
func unavailable(err error) error {
	if err == nil || errors.Is(err, ErrUnavailable) || !retryable(err) {
		return err
	}
	return fmt.Errorf("%w: %w", ErrUnavailable, err)
}

// Violation is one way a parameter object fails its method's input schema.
type Violation = wire.Violation

// ValidationError lists every violation of an input schema.
type ValidationError struct {
	Violations []Violation
}

func (e *ValidationError) Error() string {
	parts := make([]string, len(e.Violations))
	for i, v := range e.Violations {
		p := v.Pointer
		if p == "" {
			p = "/"
		}
		parts[i] = p + ": " + v.Message
	}
	return "invalid parameters: " + strings.Join(parts, "; ")
}

func invalidf(format string, args ...any) error {
	return fmt.Errorf("%w: %s", ErrInvalid, fmt.Sprintf(format, args...))
}
