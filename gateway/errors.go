package gateway

import (
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"net/http"
	"strings"
	"time"

	"github.com/toolgate/toolgate/bus"
	"github.com/toolgate/toolgate/bus/wire"
	"github.com/toolgate/toolgate/registry"
)

// This file is the one table of failures. Every error a caller can meet, whichever
// door it came in by, is classified here once (Classify) into a Kind: the code a
// program branches on, the HTTP status, the JSON-RPC code, whether a tools/call shows
// it to the model as an isError result, and the sentence a person reads. The edge
// renders a Failure as the HTTP envelope, the MCP transports as a JSON-RPC error or an
// isError result, the dashboard as the envelope the caller's program would get.

// Kind is one class of failure.
type Kind struct {
	// Code is the envelope's code: stable, for programs to branch on.
	Code string
	// Status is the HTTP status of the REST routes and the direct tool API.
	Status int
	// RPC is the JSON-RPC error code an MCP request that fails so is answered with.
	RPC int64
	// InResult: a tools/call that fails so is answered with an isError result, which a
	// model can read and act on, rather than with a JSON-RPC error.
	InResult bool
	// Protocol: a violation of the transport's protocol itself, answered with Status
	// on every MCP transport too (where other JSON-RPC errors are answered with 200
	// before 2026-07-28).
	Protocol bool
	// Text is the sentence a person reads, unless the failure says more of itself.
	Text string
	// RetryAfter is how long a caller should wait before trying again (0: no advice).
	RetryAfter time.Duration
}

// JSON-RPC error codes: JSON-RPC's own, MCP's, and the gateway's (-32000 to -32019 are
// implementation-defined; the go-sdk gives -32000 to -32005 meanings of its own on the
// client side, so the gateway's codes keep clear of the ones that would mislead).
const (
	RPCParseError         int64 = -32700
	RPCInvalidRequest     int64 = -32600
	RPCMethodNotFound     int64 = -32601
	RPCInvalidParams      int64 = -32602
	RPCInternalError      int64 = -32603
	RPCHeaderMismatch     int64 = -32020 // MCP: a header disagrees with the body
	RPCMissingCapability  int64 = -32021 // MCP: the client did not declare a capability
	RPCUnsupportedVersion int64 = -32022 // MCP: an unknown protocol version
	RPCSessionLimit       int64 = -32000
	RPCCancelled          int64 = -32001
	RPCRateLimited        int64 = -32029
	RPCQuotaExceeded      int64 = -32030
	RPCApprovalDenied     int64 = -32031
	RPCApprovalExpired    int64 = -32032
	RPCNone               int64 = 0 // refused at the HTTP layer, before any JSON-RPC
)

// StatusClientClosedRequest is recorded (and nominally answered) when the caller went
// away before the tool answered; nobody reads the answer.
const StatusClientClosedRequest = 499

// UnavailableRetryAfter is the Retry-After of a tool that no worker serves: workers
// come back on their own time, so a short wait before trying again is all the
// gateway can say.
const UnavailableRetryAfter = time.Second

// The envelope's codes: stable, for programs to branch on.
const (
	CodeInvalidJSON          = "invalid_json"
	CodeInvalidParams        = "invalid_params"
	CodeInvalidRequest       = "invalid_request"
	CodeParseError           = "parse_error"
	CodeHeaderMismatch       = "header_mismatch"
	CodeUnsupportedVersion   = "unsupported_protocol_version"
	CodeMissingCapability    = "missing_capability"
	CodeRequestTimeout       = "request_timeout"
	CodeUnauthenticated      = "unauthenticated"
	CodeForbidden            = "forbidden"
	CodeToolNotFound         = "tool_not_found"
	CodeMethodNotFound       = "method_not_found"
	CodeRPCMethodNotFound    = "rpc_method_not_found"
	CodeNotFound             = "not_found"
	CodeSessionNotFound      = "session_not_found"
	CodeMethodNotAllowed     = "method_not_allowed"
	CodeConflict             = "conflict"
	CodePayloadTooLarge      = "payload_too_large"
	CodeUnsupportedMediaType = "unsupported_media_type"
	CodeRateLimited          = "rate_limited"
	CodeQuotaExceeded        = "quota_exceeded"
	CodeSessionLimit         = "session_limit"
	CodeCanceled             = "canceled"
	CodeInternal             = "internal"
	CodeToolError            = "tool_error"
	CodeToolUnavailable      = "tool_unavailable"
	CodeToolTimeout          = "tool_timeout"
	CodeRegistryUnavailable  = "registry_unavailable"
	CodeCallNotFound         = "call_not_found"
	CodeApprovalDenied       = "approval_denied"
	CodeApprovalExpired      = "approval_expired"
	CodeSignInRequired       = "sign_in_required"
	CodeInvalidToken         = "invalid_token"
	CodeInsufficientScope    = "insufficient_scope"
)

// The kinds of failure.
var (
	KindInvalidJSON = &Kind{Code: CodeInvalidJSON, Status: http.StatusBadRequest, RPC: RPCInvalidParams,
		Text: "the parameters must be a JSON object"}
	KindInvalidParams = &Kind{Code: CodeInvalidParams, Status: http.StatusBadRequest, RPC: RPCInvalidParams, InResult: true,
		Text: "the parameters do not match the method's input schema"}
	KindInvalidRPCParams = &Kind{Code: CodeInvalidParams, Status: http.StatusBadRequest, RPC: RPCInvalidParams,
		Text: "the request's params are not valid"}
	KindInvalidRequest = &Kind{Code: CodeInvalidRequest, Status: http.StatusBadRequest, RPC: RPCInvalidRequest, Protocol: true,
		Text: "the request is not valid"}
	KindParseError = &Kind{Code: CodeParseError, Status: http.StatusBadRequest, RPC: RPCParseError, Protocol: true,
		Text: "the message is not JSON"}
	KindHeaderMismatch = &Kind{Code: CodeHeaderMismatch, Status: http.StatusBadRequest, RPC: RPCHeaderMismatch, Protocol: true,
		Text: "a header disagrees with the message"}
	KindUnsupportedVersion = &Kind{Code: CodeUnsupportedVersion, Status: http.StatusBadRequest, RPC: RPCUnsupportedVersion, Protocol: true,
		Text: "the protocol version is not supported"}
	KindMissingCapability = &Kind{Code: CodeMissingCapability, Status: http.StatusBadRequest, RPC: RPCMissingCapability,
		Text: "the client did not declare a capability the request needs"}
	KindRequestTimeout = &Kind{Code: CodeRequestTimeout, Status: http.StatusRequestTimeout, RPC: RPCNone,
		Text: "the body did not arrive in time"}
	KindUnauthenticated = &Kind{Code: CodeUnauthenticated, Status: http.StatusUnauthorized, RPC: RPCNone,
		Text: "a valid API key is required"}
	KindForbidden = &Kind{Code: CodeForbidden, Status: http.StatusForbidden, RPC: RPCInvalidParams,
		Text: "this key may not use this tool"}
	KindToolNotFound = &Kind{Code: CodeToolNotFound, Status: http.StatusNotFound, RPC: RPCInvalidParams,
		Text: "no such tool on this account"}
	KindMethodNotFound = &Kind{Code: CodeMethodNotFound, Status: http.StatusNotFound, RPC: RPCInvalidParams,
		Text: "the tool has no such method"}
	KindRPCMethodNotFound = &Kind{Code: CodeRPCMethodNotFound, Status: http.StatusNotFound, RPC: RPCMethodNotFound,
		Text: "Method not found"}
	KindSessionNotFound = &Kind{Code: CodeSessionNotFound, Status: http.StatusNotFound, RPC: RPCInvalidRequest,
		Text: "session not found: it ended or expired; initialize a new one"}
	KindNotFound = &Kind{Code: CodeNotFound, Status: http.StatusNotFound, RPC: RPCInvalidRequest,
		Text: "no such record"}
	KindMethodNotAllowed = &Kind{Code: CodeMethodNotAllowed, Status: http.StatusMethodNotAllowed, RPC: RPCNone,
		Text: "method not allowed on this route"}
	KindConflict = &Kind{Code: CodeConflict, Status: http.StatusConflict, RPC: RPCInvalidRequest,
		Text: "the record exists already"}
	KindPayloadTooLarge = &Kind{Code: CodePayloadTooLarge, Status: http.StatusRequestEntityTooLarge, RPC: RPCInvalidParams, InResult: true,
		Text: "the request or its reply is larger than the gateway accepts"}
	KindUnsupportedMediaType = &Kind{Code: CodeUnsupportedMediaType, Status: http.StatusUnsupportedMediaType, RPC: RPCNone,
		Text: "the body must be JSON: send Content-Type: application/json"}
	KindRateLimited = &Kind{Code: CodeRateLimited, Status: http.StatusTooManyRequests, RPC: RPCRateLimited, InResult: true,
		Text: "too many calls: slow down"}
	// Over one of the account's quotas (registry.Quota): the calls of a window, or
	// at once. Retry-After is when the window resets.
	KindQuotaExceeded = &Kind{Code: CodeQuotaExceeded, Status: http.StatusTooManyRequests, RPC: RPCQuotaExceeded, InResult: true,
		Text: "over a quota of the account"}
	KindSessionLimit = &Kind{Code: CodeSessionLimit, Status: http.StatusTooManyRequests, RPC: RPCSessionLimit, Protocol: true,
		Text: "the account holds as many MCP sessions as it may"}
	KindCanceled = &Kind{Code: CodeCanceled, Status: StatusClientClosedRequest, RPC: RPCCancelled,
		Text: "the caller went away"}
	KindInternal = &Kind{Code: CodeInternal, Status: http.StatusInternalServerError, RPC: RPCInternalError,
		Text: "internal error"}
	KindToolError = &Kind{Code: CodeToolError, Status: http.StatusBadGateway, RPC: RPCInternalError, InResult: true,
		Text: "the tool failed"}
	KindToolUnavailable = &Kind{Code: CodeToolUnavailable, Status: http.StatusServiceUnavailable, RPC: RPCInternalError, InResult: true,
		Text: "the tool is offline: no worker of it is running", RetryAfter: UnavailableRetryAfter}
	KindCallLost = &Kind{Code: CodeToolUnavailable, Status: http.StatusServiceUnavailable, RPC: RPCInternalError, InResult: true,
		Text: "the worker running the call stopped, or the call was lost on its way; it was cancelled", RetryAfter: UnavailableRetryAfter}
	KindToolTimeout = &Kind{Code: CodeToolTimeout, Status: http.StatusGatewayTimeout, RPC: RPCInternalError, InResult: true,
		Text: "the tool did not answer in time"}
	// KindRegistryUnavailable: the registry's buckets did not answer in time (see
	// registry.ErrUnavailable), as while a NATS node's loss has them elect new leaders.
	KindRegistryUnavailable = &Kind{Code: CodeRegistryUnavailable, Status: http.StatusServiceUnavailable, RPC: RPCInternalError, InResult: true,
		Text: "the registry did not answer in time; try again", RetryAfter: UnavailableRetryAfter}
	// A call that outlives its request (package calls): one that does not exist, has
	// expired, or was made by another key, alike.
	KindCallNotFound = &Kind{Code: CodeCallNotFound, Status: http.StatusNotFound, RPC: RPCInvalidParams,
		Text: "no such call: it does not exist, it expired, or another key made it"}
	// A call the account's rules hold for a person's approval (package approvals):
	// the person denied it, or nobody decided before its approval expired.
	KindApprovalDenied = &Kind{Code: CodeApprovalDenied, Status: http.StatusForbidden, RPC: RPCApprovalDenied, InResult: true,
		Text: "the call was denied approval"}
	KindApprovalExpired = &Kind{Code: CodeApprovalExpired, Status: http.StatusGone, RPC: RPCApprovalExpired, InResult: true,
		Text: "nobody approved the call before its approval expired"}
	// A link of an account that requires sign-in, reached without a token or key: the
	// answer's WWW-Authenticate names the link's protected resource metadata.
	KindSignInRequired = &Kind{Code: CodeSignInRequired, Status: http.StatusUnauthorized, RPC: RPCNone,
		Text: "this link requires sign-in: send an access token for it, or an API key"}
	// An access token this resource does not accept: not the deployment's, for another
	// resource, expired or revoked.
	KindInvalidToken = &Kind{Code: CodeInvalidToken, Status: http.StatusUnauthorized, RPC: RPCNone,
		Text: "the access token is not valid for this resource: sign in again"}
	// An access token whose scope does not hold what the request needs; the answer's
	// WWW-Authenticate names the scope.
	KindInsufficientScope = &Kind{Code: CodeInsufficientScope, Status: http.StatusForbidden, RPC: RPCNone,
		Text: "the access token's scope does not allow this request"}
)

// Kinds lists every kind, for the documentation's table and its test.
var Kinds = []*Kind{
	KindInvalidJSON, KindInvalidParams, KindInvalidRPCParams, KindInvalidRequest, KindParseError, KindHeaderMismatch,
	KindUnsupportedVersion, KindMissingCapability, KindRequestTimeout, KindUnauthenticated,
	KindForbidden, KindToolNotFound, KindMethodNotFound, KindRPCMethodNotFound, KindSessionNotFound, KindNotFound,
	KindMethodNotAllowed, KindConflict, KindPayloadTooLarge, KindUnsupportedMediaType,
	KindRateLimited, KindQuotaExceeded, KindSessionLimit, KindCanceled, KindInternal, KindToolError,
	KindToolUnavailable, KindCallLost, KindToolTimeout, KindRegistryUnavailable, KindCallNotFound, KindConnectionRequired,
	KindApprovalDenied, KindApprovalExpired, KindAuditUnavailable,
	KindSignInRequired, KindInvalidToken, KindInsufficientScope,
}

// Error is a failure a part of the gateway finds itself (a route that does not exist,
// an MCP message that breaks the protocol): its kind, and what it says beyond the
// kind's sentence.
type Error struct {
	Kind *Kind
	// Message replaces the kind's sentence when set.
	Message string
	// Details are the envelope's details (and an MCP JSON-RPC error's data when Data
	// is nil).
	Details []any
	// Data is the JSON-RPC error's data.
	Data any
	// Status, when set, is the HTTP status an MCP transport answers with instead of
	// its own rule (an MCP method that 2026-07-28 answers with 404, say).
	Status int
	// Err is the error this one stands for, if any, for errors.Is and errors.As.
	Err error
}

func (e *Error) Unwrap() error { return e.Err }

func (e *Error) Error() string {
	if e.Message != "" {
		return e.Message
	}
	return e.Kind.Text
}

// Fail is an Error of kind k saying message (fmt's format), or the kind's sentence
// when format is empty.
func Fail(k *Kind, format string, args ...any) *Error {
	e := &Error{Kind: k}
	if format != "" {
		e.Message = fmt.Sprintf(format, args...)
	}
	return e
}

// Failure is an error as the caller is shown it.
type Failure struct {
	*Kind
	// Message is the sentence for this failure: the kind's, or what the failure said
	// of itself.
	Message string
	// Cause is what the failure says beyond the sentence (the tool's own error, the
	// violations of the schema), for the transports that show it; empty when none.
	Cause string
	// Details are the envelope's details.
	Details []any
	// Data is the JSON-RPC error's data, if any.
	Data any
	// HTTP is the status of the REST routes and the direct tool API: the kind's, or
	// the one the tool asked for.
	HTTP int
	// MCPStatus, when set, overrides the MCP transports' own status rule (Error.Status).
	MCPStatus int
	// RPC and RPCMessage are the JSON-RPC error's code and message: the kind's code and
	// the sentence with its cause, or those of a tool's own JSON-RPC error.
	RPC        int64
	RPCMessage string
	// RetryAfter is the wait to advise (0: none).
	RetryAfter time.Duration
	// Internal: the message is not shown to a caller of the HTTP API; the error is
	// logged instead.
	Internal bool
}

// ResultText is the text of the isError result a tools/call of method that failed so
// is answered with: the method, then what the JSON-RPC error would have said.
func (f Failure) ResultText(method string) string { return method + ": " + f.RPCMessage }

// ToolErrorDetail is the detail of a tool_error: what the tool itself reported, with
// the JSON it sent along, if any.
type ToolErrorDetail struct {
	Code    string          `json:"code"`
	Message string          `json:"message"`
	Data    json.RawMessage `json:"data,omitempty"`
}

// DetailJSONRPCError is the code of a tool_error's detail when the tool answered with
// a JSON-RPC error (a bridged MCP server's): its data is that error, {code, message,
// data?}.
const DetailJSONRPCError = "mcp_error"

// SessionLimitError says an account holds as many MCP sessions as it may.
type SessionLimitError struct {
	Account string
	Limit   int
}

func (e *SessionLimitError) Error() string {
	return fmt.Sprintf("account %s has %d MCP sessions open, the most it may hold: end one (DELETE, or close its SSE stream) or wait for idle ones to expire", e.Account, e.Limit)
}

// Classify is how err is shown to a caller. It is the one place that maps the
// gateway's, the registry's and the bus's errors to a kind.
func Classify(err error) Failure {
	f, ok := classifyOwn(err)
	if !ok {
		f, ok = classifyConnection(err)
	}
	if !ok {
		f, ok = classifyTool(err)
	}
	if !ok {
		f, ok = classifyBus(err)
	}
	if !ok {
		f = of(KindInternal)
		f.Cause, f.Internal = err.Error(), true
	}
	if f.RPCMessage == "" {
		f.RPCMessage = f.Message
		if f.Cause != "" {
			f.RPCMessage += ": " + f.Cause
		}
	}
	return f
}

func of(k *Kind) Failure {
	return Failure{Kind: k, Message: k.Text, HTTP: k.Status, RPC: k.RPC, RetryAfter: k.RetryAfter}
}

// causeOf is what err says beyond sentinel, when it wraps it with more.
func causeOf(err, sentinel error) string {
	if err == sentinel {
		return ""
	}
	return strings.TrimPrefix(err.Error(), sentinel.Error()+": ")
}

func withCause(k *Kind, err, sentinel error) Failure {
	f := of(k)
	f.Cause = causeOf(err, sentinel)
	return f
}

func ofText(k *Kind, message string) Failure {
	f := of(k)
	f.Message = message
	return f
}

// classifyOwn: the failures the gateway and the registry find before a call goes out.
func classifyOwn(err error) (Failure, bool) {
	var (
		ge    *Error
		ve    *registry.ValidationError
		rl    *RateLimitedError
		qe    *QuotaExceededError
		limit *SessionLimitError
		mbe   *http.MaxBytesError
	)
	switch {
	case errors.As(err, &ge) && ge.Err != nil:
		// A failure met elsewhere, to be answered with its own status on MCP.
		f := Classify(ge.Err)
		f.MCPStatus = ge.Status
		return f, true
	case errors.As(err, &ge):
		f := ofText(ge.Kind, ge.Error())
		f.Details, f.Data, f.MCPStatus = ge.Details, ge.Data, ge.Status
		return f, true
	case errors.Is(err, ErrInvalidJSON):
		return of(KindInvalidJSON), true
	case errors.As(err, &ve):
		f := of(KindInvalidParams)
		f.Cause = ve.Error()
		for _, v := range ve.Violations {
			f.Details = append(f.Details, v)
		}
		return f, true
	case errors.Is(err, registry.ErrUnauthenticated):
		return of(KindUnauthenticated), true
	case errors.Is(err, registry.ErrForbidden):
		return withCause(KindForbidden, err, registry.ErrForbidden), true
	case errors.Is(err, registry.ErrToolNotFound):
		// One sentence whether the tool does not exist or is not on the account.
		return withCause(KindToolNotFound, err, registry.ErrToolNotFound), true
	case errors.Is(err, registry.ErrMethodNotFound):
		return withCause(KindMethodNotFound, err, registry.ErrMethodNotFound), true
	case errors.Is(err, registry.ErrNotFound):
		return of(KindNotFound), true
	case errors.Is(err, registry.ErrExists):
		return of(KindConflict), true
	case errors.Is(err, registry.ErrTooManyUsers): // a bound, not a bad record: the account is full
		return ofText(KindConflict, err.Error()), true
	case errors.Is(err, registry.ErrInvalid):
		return ofText(KindInvalidRequest, strings.TrimPrefix(err.Error(), registry.ErrInvalid.Error()+": ")), true
	case errors.Is(err, registry.ErrUnavailable):
		return withCause(KindRegistryUnavailable, err, registry.ErrUnavailable), true
	case errors.As(err, &mbe), errors.Is(err, bus.ErrPayloadTooLarge):
		f := of(KindPayloadTooLarge)
		var tooLarge *bus.PayloadTooLargeError
		if errors.As(err, &tooLarge) {
			f.Cause = fmt.Sprintf("%d bytes, the bus takes at most %d", tooLarge.Size, tooLarge.Max)
		}
		return f, true
	case errors.As(err, &rl):
		f := of(KindRateLimited)
		f.RetryAfter = rl.RetryAfter
		f.Cause = fmt.Sprintf("retry after %v", rl.RetryAfter.Round(time.Millisecond))
		f.Data = map[string]int64{"retryAfterMs": max(1, rl.RetryAfter.Milliseconds())}
		return f, true
	case errors.As(err, &qe):
		return quotaFailure(qe), true
	case errors.As(err, &limit):
		return ofText(KindSessionLimit, limit.Error()), true
	}
	return Failure{}, false
}

// classifyTool: what the tool itself answered with.
func classifyTool(err error) (Failure, bool) {
	var (
		te *wire.ToolError
		re *wire.RPCError
	)
	switch {
	case errors.As(err, &te) && te.Code == wire.CodePayloadTooLarge:
		// The SDK's refusal of a reply past the caller's limit (wire.HeaderPayloadLimit).
		return ofText(KindPayloadTooLarge, te.Message), true
	case errors.As(err, &te) && te.Code == wire.CodeMethodNotFound:
		// The worker has no such method (any more, or for the calling account): the
		// caller gets what it gets when the edge finds none.
		return ofText(KindMethodNotFound, te.Message), true
	case errors.As(err, &te) && te.Code == wire.CodeSchemaViolation:
		// The SDK's check of a request past one message against the input schema,
		// which the edge makes of a smaller one: answered the same.
		var vs []registry.Violation
		if json.Unmarshal(te.Data, &vs) == nil && len(vs) > 0 {
			return classifyOwn(&registry.ValidationError{Violations: vs})
		}
		return of(KindInvalidParams), true
	case errors.As(err, &te):
		f := of(KindToolError)
		if te.Status >= 400 && te.Status <= 599 {
			f.HTTP = te.Status // the tool asked for it with Tg-Status
		}
		d := ToolErrorDetail{Code: te.Code, Message: te.Message}
		if len(te.Data) > 0 && json.Valid(te.Data) {
			d.Data = te.Data
		}
		f.Details = []any{d}
		f.Cause = te.Code + ": " + te.Message
		if data := strings.TrimSpace(string(te.Data)); data != "" {
			f.Cause += "\n" + data
		}
		return f, true
	case errors.As(err, &re):
		// A JSON-RPC error, which an MCP client gets as it is (a bridged server's): to
		// an HTTP caller the tool's error, its parameters refused or its server's error,
		// with the JSON-RPC error whole as the data.
		f := of(KindToolError)
		f.RPC, f.RPCMessage, f.Cause = re.Code, re.Message, re.Message
		if len(re.Data) > 0 && json.Valid(re.Data) {
			f.Data = json.RawMessage(re.Data)
		}
		if re.Code == wire.RPCInvalidParams {
			f.HTTP = http.StatusBadRequest
			f.Details = []any{ToolErrorDetail{Code: KindInvalidParams.Code, Message: re.Message}}
			return f, true
		}
		data, _ := json.Marshal(re)
		f.Details = []any{ToolErrorDetail{Code: DetailJSONRPCError, Message: re.Message, Data: data}}
		return f, true
	}
	return Failure{}, false
}

// classifyBus: the call went out and did not come back as it should.
func classifyBus(err error) (Failure, bool) {
	switch {
	case errors.Is(err, bus.ErrNoResponders):
		return of(KindToolUnavailable), true
	case errors.Is(err, bus.ErrCallLost):
		return of(KindCallLost), true
	case errors.Is(err, bus.ErrTimeout), errors.Is(err, context.DeadlineExceeded):
		return of(KindToolTimeout), true
	case errors.Is(err, context.Canceled):
		f := of(KindCanceled)
		f.Cause = err.Error()
		return f, true
	}
	return Failure{}, false
}

// quotaFailure is a call over a quota: its detail names the rule and when its window
// resets.
func quotaFailure(qe *QuotaExceededError) Failure {
	f := of(KindQuotaExceeded)
	f.RetryAfter = qe.RetryAfter
	f.Cause = qe.Error()
	d := QuotaDetail{Rule: qe.Index, Quota: qe.Rule, Window: qe.Window, Limit: qe.Limit,
		RetryAfterMs: max(1, qe.RetryAfter.Milliseconds())}
	if !qe.ResetsAt.IsZero() {
		at := qe.ResetsAt.UTC()
		d.ResetsAt = &at
	}
	f.Details, f.Data = []any{d}, d
	return f
}
