package core

import (
	"bytes"
	"context"
	"crypto/subtle"
	"encoding/json"
	"fmt"
	"strings"

	"github.com/nats-io/nats.go"
	"github.com/nats-io/nats.go/jetstream"

	"github.com/toolgate/toolgate/bus/wire"
	"github.com/toolgate/toolgate/registry"
)

// A tool may ask for input itself: a bridged server of 2026-07-28 answers a call
// with an input_required result of its own, whose input requests (under the server's
// keys) the client answers and whose requestState it echoes on its retry. The
// client gets that result as the server made it, but for its requestState: the
// server's is stored in the event log with the account and method of the call, and
// the client is given a state that names the record ("tgs1."). The client's retry,
// on any edge, is checked against the record (same account, same tool and method)
// and reaches a worker with the server's own state (wire.HeaderRequestState) and the
// client's answers (wire.HeaderInputResponses): the server, which keeps nothing
// between rounds, goes on from its state. A state of another account, a made-up or
// changed one, names no record of the caller's and is refused (-32602).

// toolStatePrefix begins every requestState that names a tool's own.
const toolStatePrefix = "tgs1."

// eventToolState is the record of a tool's own requestState.
const eventToolState = "tool-state"

// toolState is what such a record holds.
type toolState struct {
	Name  string `json:"name"`
	State string `json:"state"`
}

// sealInputRequired hands the client a tool's own input_required result, with its
// requestState, if any, stored and replaced by one naming the record. Any other
// result is left as it is.
func (s *Server) sealInputRequired(r *Request, name string, res any) (any, error) {
	fields, ok := resultOfType(res, "input_required")
	if !ok {
		return res, nil
	}
	var state string
	if json.Unmarshal(fields["requestState"], &state) != nil || state == "" {
		return res, nil // nothing of the server's to keep: the retry carries only answers
	}
	rec, err := json.Marshal(toolState{Name: name, State: state})
	if err != nil {
		return nil, err
	}
	ref, err := s.storeRef(r, toolStatePrefix, eventToolState, rec, nil)
	if err != nil {
		return nil, fmt.Errorf("sse: storing a tool's requestState: %w", err)
	}
	fields["requestState"], _ = json.Marshal(ref)
	return fields, nil
}

// resultOfType is a tool's result as it sent it, by field, when its resultType is
// rt; false for any other result, and for one the edge made.
func resultOfType(res any, rt string) (map[string]json.RawMessage, bool) {
	raw, ok := res.(json.RawMessage)
	if !ok || !bytes.Contains(raw, []byte(`"`+rt+`"`)) {
		return nil, false
	}
	var fields map[string]json.RawMessage
	if json.Unmarshal(raw, &fields) != nil || string(fields["resultType"]) != `"`+rt+`"` {
		return nil, false
	}
	return fields, true
}

// storeRef stores data in the event log as a record of kind event (headerEvent) made
// by r's account, with hdr, on a subject of r's tool of its own, and returns the
// reference that names it: prefix and the subject's two ids. The record is stored
// (acknowledged) when it returns.
func (s *Server) storeRef(r *Request, prefix, event string, data []byte, hdr nats.Header) (string, error) {
	if hdr == nil {
		hdr = nats.Header{}
	}
	hdr.Set(headerEvent, event)
	hdr.Set(headerAccount, r.Principal.Account)
	session, post := registry.NewID(""), registry.NewID("")
	ctx, cancel := s.detached()
	defer cancel()
	if _, err := s.events.Append(ctx, s.events.PostSubject(r.Tool, session, post), data, hdr, ""); err != nil {
		return "", err
	}
	return prefix + session + "." + post, nil
}

// openRef is the record a reference storeRef made names, when it is of kind event,
// of r's tool and of r's account; nil for a reference that is unknown, expired,
// another account's or tool's, or made up: the same for each.
func (s *Server) openRef(ctx context.Context, r *Request, prefix, event, ref string) *jetstream.RawStreamMsg {
	session, post, ok := strings.Cut(strings.TrimPrefix(ref, prefix), ".")
	if !strings.HasPrefix(ref, prefix) || !ok || !wire.ValidToken(session) || !wire.ValidToken(post) {
		return nil
	}
	msg, err := s.events.Get(ctx, s.events.PostSubject(r.Tool, session, post), 1)
	if err != nil || msg.Header.Get(headerEvent) != event || subtle.ConstantTimeCompare([]byte(msg.Header.Get(headerAccount)), []byte(r.Principal.Account)) != 1 {
		return nil
	}
	return msg
}

// openToolState is the tool's own requestState a retry's state names, once checked to
// be the caller's, of the same tool and method.
func (s *Server) openToolState(ctx context.Context, r *Request, name, state string) (string, error) {
	msg := s.openRef(ctx, r, toolStatePrefix, eventToolState, state)
	if msg == nil {
		return "", InvalidParams("%s: requestState names no input request of this link's", r.RPC.Method)
	}
	var rec toolState
	if json.Unmarshal(msg.Data, &rec) != nil || rec.Name != name {
		return "", InvalidParams("%s: requestState belongs to a request of another tool, prompt or resource than %q", r.RPC.Method, name)
	}
	return rec.State, nil
}

// inputHeaders are the headers that carry a 2026-07-28 call's revision, and, on a
// retry, the tool's own requestState and the client's answers, to the worker.
func inputHeaders(r *Request, toolState string) (nats.Header, error) {
	h := nats.Header{wire.HeaderProtocolVersion: {r.Meta.ProtocolVersion}}
	if toolState != "" {
		h.Set(wire.HeaderRequestState, toolState)
	}
	var retry struct {
		InputResponses json.RawMessage `json:"inputResponses"`
	}
	if json.Unmarshal(r.RPC.Params, &retry) == nil && len(retry.InputResponses) > 0 {
		var b bytes.Buffer
		if err := json.Compact(&b, retry.InputResponses); err != nil || b.Bytes()[0] != '{' {
			return nil, InvalidParams("tools/call: inputResponses must be an object")
		}
		h.Set(wire.HeaderInputResponses, b.String())
	}
	return h, nil
}

// inputRequiredMethods are the requests, besides tools/call, a tool's server may
// answer with input_required, which a link forwards to its workers.
var inputRequiredMethods = map[string]bool{"prompts/get": true, "resources/read": true}

// forwardedInput is a forwarded 2026-07-28 request that may take input as it goes to
// the worker: with the tool's own requestState in place of the seal the client
// echoed, and its revision in a header. name is the prompt or resource it names.
func (s *Server) forwardedInput(ctx context.Context, r *Request, name string) ([]byte, nats.Header, error) {
	header := nats.Header{wire.HeaderProtocolVersion: {r.Meta.ProtocolVersion}}
	var params map[string]json.RawMessage
	if json.Unmarshal(r.RPC.Params, &params) != nil {
		return r.RPC.Params, header, nil // the gateway refuses it as no object
	}
	raw, ok := params["requestState"]
	if !ok {
		return r.RPC.Params, header, nil
	}
	var sealed string
	if json.Unmarshal(raw, &sealed) != nil {
		return nil, nil, InvalidParams("%s: requestState must be a string", r.RPC.Method)
	}
	state, err := s.openToolState(ctx, r, name, sealed)
	if err != nil {
		return nil, nil, err
	}
	params["requestState"], _ = json.Marshal(state)
	body, err := json.Marshal(params)
	return body, header, err
}
