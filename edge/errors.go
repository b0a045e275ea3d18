package edge

import (
	"net/http"
	"strconv"
	"time"

	"github.com/gin-gonic/gin"

	"github.com/toolgate/toolgate/gateway"
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
type ToolErrorDetail = gateway.ToolErrorDetail

// Error codes of the envelope: gateway's table (gateway/errors.go) names them.
const (
	CodeInvalidJSON          = gateway.CodeInvalidJSON
	CodeInvalidParams        = gateway.CodeInvalidParams
	CodeInvalidRequest       = gateway.CodeInvalidRequest
	CodeRequestTimeout       = gateway.CodeRequestTimeout
	CodeUnauthenticated      = gateway.CodeUnauthenticated
	CodeForbidden            = gateway.CodeForbidden
	CodeToolNotFound         = gateway.CodeToolNotFound
	CodeMethodNotFound       = gateway.CodeMethodNotFound
	CodeNotFound             = gateway.CodeNotFound
	CodeMethodNotAllowed     = gateway.CodeMethodNotAllowed
	CodeConflict             = gateway.CodeConflict
	CodePayloadTooLarge      = gateway.CodePayloadTooLarge
	CodeUnsupportedMediaType = gateway.CodeUnsupportedMediaType
	CodeRateLimited          = gateway.CodeRateLimited
	CodeQuotaExceeded        = gateway.CodeQuotaExceeded
	CodeCanceled             = gateway.CodeCanceled
	CodeInternal             = gateway.CodeInternal
	CodeToolError            = gateway.CodeToolError
	CodeToolUnavailable      = gateway.CodeToolUnavailable
	CodeToolTimeout          = gateway.CodeToolTimeout
	CodeRegistryUnavailable  = gateway.CodeRegistryUnavailable
)

// DetailJSONRPCError is the code of a tool_error's detail when the tool answered with
// a JSON-RPC error (a bridged MCP server's): its data is that error, {code, message,
// data?}.
const DetailJSONRPCError = gateway.DetailJSONRPCError

// UnavailableRetryAfter is the Retry-After of a tool_unavailable answer.
const UnavailableRetryAfter = gateway.UnavailableRetryAfter

// newHTTPError is a failure the edge finds itself, outside the registry, gateway and
// bus: one of the table's kinds, saying message (the kind's sentence when empty).
func newHTTPError(k *gateway.Kind, message string, details ...any) *gateway.Error {
	return &gateway.Error{Kind: k, Message: message, Details: details}
}

var (
	errRouteNotFound    = newHTTPError(gateway.KindNotFound, "no such route")
	errMethodNotAllowed = newHTTPError(gateway.KindMethodNotAllowed, "")
	errLinkNotFound     = newHTTPError(gateway.KindNotFound, "no such link")
	errUnsupportedType  = newHTTPError(gateway.KindUnsupportedMediaType, "")
	errPayloadTooLarge  = newHTTPError(gateway.KindPayloadTooLarge, "")
)

// ErrorAnswer is how the edge answers err: the status, the envelope, and how long to
// ask the caller to wait before retrying (0: no Retry-After). Other HTTP surfaces of
// the gateway (the dashboard's try-it form) show failed calls with it, so that a user
// sees there what their program will get.
func ErrorAnswer(err error, requestID string) (status int, env Envelope, retryAfter time.Duration) {
	f := gateway.Classify(err)
	return f.HTTP, envelope(f, requestID), f.RetryAfter
}

func envelope(f gateway.Failure, requestID string) Envelope {
	return Envelope{Error: EnvelopeError{Code: f.Code, Message: f.Message, RequestID: requestID, Details: f.Details}}
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
	f := gateway.Classify(err)
	c.Set(ctxErrorCode, f.Code)
	if f.Internal {
		e.log.ErrorContext(c.Request.Context(), "edge: internal error", "request_id", requestID(c), "route", c.FullPath(), "err", err)
	}
	if f.RetryAfter > 0 {
		c.Header("Retry-After", strconv.Itoa(RetryAfterSeconds(f.RetryAfter)))
	}
	if f.HTTP == http.StatusUnauthorized && c.Writer.Header().Get("WWW-Authenticate") == "" {
		c.Header("WWW-Authenticate", `Bearer realm="toolgate"`)
	}
	c.AbortWithStatusJSON(f.HTTP, envelope(f, requestID(c)))
}
