package dashboard

import (
	"context"
	"encoding/json"
	"errors"
	"math"
	"net/http"
	"strconv"

	"github.com/toolgate/toolgate/bus"
	"github.com/toolgate/toolgate/gateway"
	"github.com/toolgate/toolgate/registry"
)

// envelope is the gateway's error body, as the HTTP API sends it; the try-it form
// shows a failed call in the same shape, so what a user sees here is what their
// program will get.
type envelope struct {
	Error envelopeError `json:"error"`
}

type envelopeError struct {
	Code      string `json:"code"`
	Message   string `json:"message"`
	RequestID string `json:"request_id,omitempty"`
	Details   []any  `json:"details,omitempty"`
}

// callError maps an error of gateway.Do to the status and envelope the HTTP API
// answers with, and a Retry-After in seconds where one applies (0: none).
func callError(err error, requestID string) (status int, e envelope, retryAfter int) {
	set := func(s int, code, msg string) {
		status = s
		e = envelope{Error: envelopeError{Code: code, Message: msg, RequestID: requestID}}
	}
	var (
		verr    *registry.ValidationError
		rate    *gateway.RateLimitedError
		toolErr *bus.ToolError
	)
	switch {
	case errors.Is(err, registry.ErrUnauthenticated):
		set(http.StatusUnauthorized, "unauthenticated", "the API key is missing, unknown, revoked or expired")
	case errors.Is(err, registry.ErrForbidden):
		set(http.StatusForbidden, "forbidden", "the API key's scopes do not include this tool")
	case errors.Is(err, registry.ErrToolNotFound):
		set(http.StatusNotFound, "tool_not_found", "no such tool on this account")
	case errors.Is(err, registry.ErrMethodNotFound):
		set(http.StatusNotFound, "method_not_found", "the tool has no such method")
	case errors.Is(err, gateway.ErrInvalidJSON):
		set(http.StatusBadRequest, "invalid_json", "the parameters must be a JSON object")
	case errors.As(err, &verr):
		set(http.StatusBadRequest, "invalid_params", "the parameters do not match the method's input schema")
		for _, v := range verr.Violations {
			e.Error.Details = append(e.Error.Details, v)
		}
	case errors.Is(err, bus.ErrPayloadTooLarge):
		set(http.StatusRequestEntityTooLarge, "payload_too_large", "the parameters are larger than the gateway accepts")
	case errors.As(err, &rate):
		set(http.StatusTooManyRequests, "rate_limited", "too many calls; try again shortly")
		retryAfter = int(math.Ceil(rate.RetryAfter.Seconds()))
	case errors.As(err, &toolErr):
		// The tool may ask for a status of its own; a failure it reports is the
		// tool's, so anything else is a bad gateway.
		status = http.StatusBadGateway
		if toolErr.Status >= 400 && toolErr.Status <= 599 {
			status = toolErr.Status
		}
		e = envelope{Error: envelopeError{Code: "tool_error", Message: "the tool failed", RequestID: requestID}}
		detail := map[string]any{"code": toolErr.Code, "message": toolErr.Message}
		if len(toolErr.Data) > 0 && json.Valid(toolErr.Data) {
			detail["data"] = json.RawMessage(toolErr.Data)
		}
		e.Error.Details = []any{detail}
	case errors.Is(err, bus.ErrNoResponders):
		set(http.StatusServiceUnavailable, "tool_unavailable", "no worker of the tool is running")
		retryAfter = 1
	case errors.Is(err, bus.ErrTimeout), errors.Is(err, context.DeadlineExceeded):
		set(http.StatusGatewayTimeout, "tool_timeout", "the tool did not answer in time")
	default:
		set(http.StatusInternalServerError, "internal", "the gateway failed to make the call")
	}
	return status, e, retryAfter
}

// statusLine is "200 OK".
func statusLine(code int) string {
	return strconv.Itoa(code) + " " + http.StatusText(code)
}
