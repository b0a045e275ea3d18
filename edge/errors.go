package edge

import (
	"context"
	"encoding/json"
	"errors"
	"net/http"
	"strconv"
	"strings"
	"time"

	"github.com/gin-gonic/gin"

	"github.com/toolgate/toolgate/bus"
	"github.com/toolgate/toolgate/bus/wire"
	"github.com/toolgate/toolgate/gateway"
	"github.com/toolgate/toolgate/registry"
)

// Envelope is the body of every error the edge answers itself.
type Envelope struct {
	Error EnvelopeError `json:"error"`
}

// EnvelopeError says what went wrong: a stable code to branch on, a message for
// people, the request id to quote, and per-code details.
type EnvelopeError struct {
	Code      string `json:"code"`
	Message   string `json:"message"`
	RequestID string `json:"request_id"`
	Details   []any  `json:"details,omitempty"`
}

// ToolErrorDetail is the detail of a tool_error: what the tool itself reported, with
// the JSON it sent along, if any.
type ToolErrorDetail struct {
	Code    string          `json:"code"`
	Message string          `json:"message"`
	Data    json.RawMessage `json:"data,omitempty"`
}

// Error codes of the envelope.
const (
	CodeInvalidJSON          = "invalid_json"
	CodeInvalidParams        = "invalid_params"
	CodeInvalidRequest       = "invalid_request"
	CodeRequestTimeout       = "request_timeout"
	CodeUnauthenticated      = "unauthenticated"
	CodeForbidden            = "forbidden"
	CodeToolNotFound         = "tool_not_found"
	CodeMethodNotFound       = "method_not_found"
	CodeNotFound             = "not_found"
	CodeMethodNotAllowed     = "method_not_allowed"
	CodeConflict             = "conflict"
	CodePayloadTooLarge      = "payload_too_large"
	CodeUnsupportedMediaType = "unsupported_media_type"
	CodeRateLimited          = "rate_limited"
	CodeCanceled             = "canceled"
	CodeInternal             = "internal"
	CodeToolError            = "tool_error"
	CodeToolUnavailable      = "tool_unavailable"
	CodeToolTimeout          = "tool_timeout"
)

// DetailJSONRPCError is the code of a tool_error's detail when the tool answered with
// a JSON-RPC error (a bridged MCP server's): its data is that error, {code, message,
// data?}.
const DetailJSONRPCError = "mcp_error"

// UnavailableRetryAfter is the Retry-After of a tool_unavailable answer: workers come
// back on their own time, so a short wait before trying again is all the edge can say.
const UnavailableRetryAfter = time.Second

// statusClientClosedRequest is recorded (and nominally answered) when the caller went
// away before the tool answered; nobody reads the answer.
const statusClientClosedRequest = 499

// httpError is a failure the edge finds itself, outside the registry, gateway and bus.
type httpError struct {
	status  int
	code    string
	message string
	details []any
}

func (e *httpError) Error() string { return e.code + ": " + e.message }

func newHTTPError(status int, code, message string, details ...any) *httpError {
	return &httpError{status: status, code: code, message: message, details: details}
}

var (
	errRouteNotFound    = newHTTPError(http.StatusNotFound, CodeNotFound, "no such route")
	errMethodNotAllowed = newHTTPError(http.StatusMethodNotAllowed, CodeMethodNotAllowed, "method not allowed on this route")
	errLinkNotFound     = newHTTPError(http.StatusNotFound, CodeNotFound, "no such link")
	errUnsupportedType  = newHTTPError(http.StatusUnsupportedMediaType, CodeUnsupportedMediaType,
		"the body must be JSON: send Content-Type: application/json")
	errPayloadTooLarge = newHTTPError(http.StatusRequestEntityTooLarge, CodePayloadTooLarge, "the body is larger than this edge accepts")
)

// answer is how one error is shown to the caller.
type answer struct {
	status     int
	code       string
	message    string
	details    []any
	retryAfter time.Duration
	internal   bool // the message is not shown; the error is logged instead
}

// classify maps every error the edge meets (its own, the registry's, the gateway's and
// the bus's) to a status and an envelope code. It is the one place that does.
func classify(err error) answer {
	var (
		he  *httpError
		ve  *registry.ValidationError
		rl  *gateway.RateLimitedError
		te  *wire.ToolError
		re  *wire.RPCError
		mbe *http.MaxBytesError
	)
	switch {
	case errors.As(err, &he):
		return answer{status: he.status, code: he.code, message: he.message, details: he.details}
	case errors.Is(err, gateway.ErrInvalidJSON):
		return answer{status: http.StatusBadRequest, code: CodeInvalidJSON, message: "the body must be a JSON object"}
	case errors.As(err, &ve):
		details := make([]any, len(ve.Violations))
		for i, v := range ve.Violations {
			details[i] = v
		}
		return answer{status: http.StatusBadRequest, code: CodeInvalidParams,
			message: "the parameters do not match the method's input schema", details: details}
	case errors.Is(err, registry.ErrUnauthenticated):
		return answer{status: http.StatusUnauthorized, code: CodeUnauthenticated, message: "a valid API key is required"}
	case errors.Is(err, registry.ErrForbidden):
		return answer{status: http.StatusForbidden, code: CodeForbidden, message: "this key may not use this tool"}
	case errors.Is(err, registry.ErrToolNotFound):
		// One message whether the tool does not exist or is not on the account.
		return answer{status: http.StatusNotFound, code: CodeToolNotFound, message: "no such tool on this account"}
	case errors.Is(err, registry.ErrMethodNotFound):
		return answer{status: http.StatusNotFound, code: CodeMethodNotFound, message: "the tool has no such method"}
	case errors.Is(err, registry.ErrNotFound):
		return answer{status: http.StatusNotFound, code: CodeNotFound, message: "no such record"}
	case errors.Is(err, registry.ErrExists):
		return answer{status: http.StatusConflict, code: CodeConflict, message: "the record exists already"}
	case errors.Is(err, registry.ErrInvalid):
		return answer{status: http.StatusBadRequest, code: CodeInvalidRequest,
			message: strings.TrimPrefix(err.Error(), registry.ErrInvalid.Error()+": ")}
	case errors.As(err, &mbe), errors.Is(err, bus.ErrPayloadTooLarge):
		return answer{status: errPayloadTooLarge.status, code: errPayloadTooLarge.code, message: errPayloadTooLarge.message}
	case errors.As(err, &rl):
		return answer{status: http.StatusTooManyRequests, code: CodeRateLimited,
			message: "too many calls: slow down", retryAfter: rl.RetryAfter}
	case errors.As(err, &te):
		status := http.StatusBadGateway
		if te.Status >= 400 && te.Status <= 599 {
			status = te.Status // the tool asked for it with Tg-Status
		}
		d := ToolErrorDetail{Code: te.Code, Message: te.Message}
		if len(te.Data) > 0 && json.Valid(te.Data) {
			d.Data = te.Data
		}
		return answer{status: status, code: CodeToolError, message: "the tool failed", details: []any{d}}
	case errors.As(err, &re):
		// A JSON-RPC error, which an MCP client gets as it is (a bridged server's):
		// to an HTTP caller the tool's error, its parameters refused or its server's
		// error, with the JSON-RPC error whole as the data.
		if re.Code == wire.RPCInvalidParams {
			return answer{status: http.StatusBadRequest, code: CodeToolError, message: "the tool failed",
				details: []any{ToolErrorDetail{Code: CodeInvalidParams, Message: re.Message}}}
		}
		data, _ := json.Marshal(re)
		return answer{status: http.StatusBadGateway, code: CodeToolError, message: "the tool failed",
			details: []any{ToolErrorDetail{Code: DetailJSONRPCError, Message: re.Message, Data: data}}}
	case errors.Is(err, bus.ErrNoResponders):
		return answer{status: http.StatusServiceUnavailable, code: CodeToolUnavailable,
			message: "no worker of the tool is running", retryAfter: UnavailableRetryAfter}
	case errors.Is(err, bus.ErrCallLost):
		return answer{status: http.StatusServiceUnavailable, code: CodeToolUnavailable,
			message: "the worker running the call stopped, or the call was lost on its way; it was cancelled", retryAfter: UnavailableRetryAfter}
	case errors.Is(err, bus.ErrTimeout), errors.Is(err, context.DeadlineExceeded):
		return answer{status: http.StatusGatewayTimeout, code: CodeToolTimeout, message: "the tool did not answer in time"}
	case errors.Is(err, context.Canceled):
		return answer{status: statusClientClosedRequest, code: CodeCanceled, message: "the caller went away"}
	}
	return answer{status: http.StatusInternalServerError, code: CodeInternal, message: "internal error", internal: true}
}

// ErrorAnswer is how the edge answers err: the status, the envelope, and how long to
// ask the caller to wait before retrying (0: no Retry-After). Other HTTP surfaces of
// the gateway (the dashboard's try-it form) show failed calls with it, so that a user
// sees there what their program will get.
func ErrorAnswer(err error, requestID string) (status int, env Envelope, retryAfter time.Duration) {
	a := classify(err)
	return a.status, Envelope{Error: EnvelopeError{Code: a.code, Message: a.message, RequestID: requestID, Details: a.details}}, a.retryAfter
}

// RetryAfterSeconds is the Retry-After header's value for a wait of d: whole seconds,
// rounded up (a caller that waits what it is told must find the bucket refilled), at
// least 1.
func RetryAfterSeconds(d time.Duration) int {
	s := int((d + time.Second - 1) / time.Second)
	return max(s, 1)
}

// fail answers c with err's envelope and stops the handler chain.
func (e *Edge) fail(c *gin.Context, err error) {
	a := classify(err)
	c.Set(ctxErrorCode, a.code)
	if a.internal {
		e.log.ErrorContext(c.Request.Context(), "edge: internal error", "request_id", requestID(c), "route", c.FullPath(), "err", err)
	}
	if a.retryAfter > 0 {
		c.Header("Retry-After", strconv.Itoa(RetryAfterSeconds(a.retryAfter)))
	}
	if a.status == http.StatusUnauthorized {
		c.Header("WWW-Authenticate", `Bearer realm="toolgate"`)
	}
	c.AbortWithStatusJSON(a.status, Envelope{Error: EnvelopeError{
		Code: a.code, Message: a.message, RequestID: requestID(c), Details: a.details,
	}})
}
