package core

import (
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"slices"
	"strconv"
	"strings"
	"sync"
	"time"

	"github.com/modelcontextprotocol/go-sdk/mcp"
	"github.com/nats-io/nats.go"

	"github.com/toolgate/toolgate/bus"
	"github.com/toolgate/toolgate/bus/wire"
	"github.com/toolgate/toolgate/registry"
)

// At 2026-07-28 a server no longer sends its client requests (sampling, elicitation,
// roots): it answers the client's request with an input_required result listing what
// it needs, and the client calls again with the answers (multi round-trip requests).
// A tool's worker asks its client the same way at every revision (workers.Call.Request:
// a JSON-RPC request into the session's event log, the answer on the session's reply
// subject), so a stateless tools/call is given a session id of its own, a "round":
// its worker's requests are stored on the round's out subject, where the edge
// running the call finds them and hands them to the client as an input_required
// result, storing the call's request (with its account) beside them; the call runs on,
// and the edge running it stores its outcome in the log when it ends. The client's
// retry, on any edge, names the round in its requestState, and that edge passes the
// answers on to the worker and waits for the stored outcome or for more requests.

// roundPrefix begins every requestState this gateway makes.
const roundPrefix = "tgr1."

// headerAccount, on a round's request record, names the account that made the call:
// a retry of another account names no round of its.
const headerAccount = "Tg-Account"

// round is where a stateless call stands: its session, the POST whose subject keeps
// the request and the tool's answer, and the sequences (on the round's out subject) of
// the worker requests the client was last handed.
type round struct {
	session, post string
	from, to      uint64
}

func (r round) state() string {
	return fmt.Sprintf("%s%s.%s.%d.%d", roundPrefix, r.session, r.post, r.from, r.to)
}

func parseRound(s string) (round, bool) {
	parts := strings.Split(strings.TrimPrefix(s, roundPrefix), ".")
	if !strings.HasPrefix(s, roundPrefix) || len(parts) != 4 || !wire.ValidToken(parts[0]) || !wire.ValidToken(parts[1]) {
		return round{}, false
	}
	from, err1 := strconv.ParseUint(parts[2], 10, 64)
	to, err2 := strconv.ParseUint(parts[3], 10, 64)
	if err1 != nil || err2 != nil || from > to {
		return round{}, false
	}
	return round{session: parts[0], post: parts[1], from: from, to: to}, true
}

// inputRequired is the result that hands the client a worker's requests.
type inputRequired struct {
	ResultType    string                     `json:"resultType"`
	InputRequests map[string]json.RawMessage `json:"inputRequests"`
	RequestState  string                     `json:"requestState"`
}

// workerRequest is a worker's request as stored on a round's out subject.
type workerRequest struct {
	seq    uint64
	id     string
	method string
	params json.RawMessage
}

func readWorkerRequest(rec registry.Record) (workerRequest, bool) {
	var m struct {
		ID     string          `json:"id"`
		Method string          `json:"method"`
		Params json.RawMessage `json:"params"`
	}
	if json.Unmarshal(rec.Data, &m) != nil || m.ID == "" || m.Method == "" || !wire.ValidToken(m.ID) {
		return workerRequest{}, false // a cancellation, or nothing the client can answer
	}
	return workerRequest{seq: rec.Seq, id: m.ID, method: m.Method, params: m.Params}, true
}

// openRound gives a new stateless call its round: a session id for its worker's
// requests, and a follower of the round's out subject, where they arrive. Nothing is
// stored until the worker asks (storeRound): a call that asks nothing costs the
// event log nothing.
func (s *Server) openRound(r *Request) (*round, *registry.Follower, error) {
	rd := &round{session: registry.NewID(""), post: registry.NewID("")}
	f, err := s.events.Follow(s.subj.SessionOut(r.Tool, rd.session))
	if err != nil {
		return nil, nil, err
	}
	return rd, f, nil
}

// storeRound stores a round's call, with the account that made it, for the edge
// that serves the client's retry.
func (s *Server) storeRound(r *Request, rd *round) error {
	ctx, cancel := s.detached()
	defer cancel()
	subject := s.events.PostSubject(r.Tool, rd.session, rd.post)
	if _, err := s.events.Append(ctx, subject, r.RPC.Params, nats.Header{headerEvent: {eventRequest}, headerAccount: {r.Principal.Account}}, ""); err != nil {
		return fmt.Errorf("sse: storing a call's round: %w", err)
	}
	return nil
}

// Records of a round's answer, on the reply subject of its POST: the result, or the
// JSON-RPC error, of the call.
const (
	eventAnswer = "answer"
	eventError  = "error"
)

// storeAnswer stores the outcome of a round's call, which the edge serving the
// client's last retry waits for.
func (s *Server) storeAnswer(r *Request, rd *round, m *registry.Method, reply *wire.Reply, callErr error) {
	res, err := toolAnswer(r.Tool, m, reply, callErr)
	data, event := []byte(nil), eventAnswer
	if err != nil {
		data, _ = json.Marshal(RPCError(err))
		event = eventError
	} else if data, err = json.Marshal(res); err != nil {
		data, _ = json.Marshal(RPCError(err))
		event = eventError
	}
	ctx, cancel := s.detached()
	defer cancel()
	subject := s.events.ReplySubject(s.events.PostSubject(r.Tool, rd.session, rd.post))
	hdr := nats.Header{headerEvent: {event}}
	if instance := replyInstance(reply); wire.ValidToken(instance) {
		hdr.Set(wire.HeaderInstance, instance) // the one holding a task the answer made
	}
	if _, err := s.events.Append(ctx, subject, data, hdr, ""); err != nil {
		s.log.Warn("storing a round's answer", "tool", r.Tool, "err", err)
	}
}

// handoff decides, between a stateless call ending and its client being asked for
// input, which came first: once the client was handed the round, the call's outcome
// is stored for its retry.
type handoff struct {
	mu               sync.Mutex
	finished, handed bool
}

// hand reports whether the call is still running, and if so hands it over.
func (h *handoff) hand() bool {
	h.mu.Lock()
	defer h.mu.Unlock()
	h.handed = !h.finished
	return h.handed
}

// finish marks the call ended and reports whether it was handed over.
func (h *handoff) finish() bool {
	h.mu.Lock()
	defer h.mu.Unlock()
	h.finished = true
	return h.handed
}

// resumeRound serves the retry of a call that asked for input: it hands the client's
// answers to the worker and waits for the tool's answer or its next requests.
func (s *Server) resumeRound(ctx context.Context, r *Request, params *mcp.CallToolParamsRaw, m *registry.Method) (any, error) {
	rd, ok := parseRound(params.RequestState)
	if !ok {
		return nil, InvalidParams("tools/call: requestState was not made by this server")
	}
	subject := s.events.PostSubject(r.Tool, rd.session, rd.post)
	deadline, err := s.roundDeadline(ctx, r, params.Name, subject, m)
	if err != nil {
		return nil, err
	}
	requests, err := s.events.Follow(s.subj.SessionOut(r.Tool, rd.session))
	if err != nil {
		return nil, err
	}
	defer requests.Stop()
	// The requests the client was handed last: each is answered now, or asked again.
	var unanswered []workerRequest
	if rd.to > 0 {
		if unanswered, err = s.passAnswers(ctx, r, rd, requests, params.InputResponses); err != nil {
			return nil, err
		}
	}
	ctx, cancel := context.WithDeadline(ctx, deadline)
	defer cancel()
	done := make(chan roundOutcome, 1)
	go func() {
		reply, err := s.awaitReply(ctx, s.events.ReplySubject(subject), deadline)
		done <- roundOutcome{reply, err}
	}()
	asked := make(chan []workerRequest, 1)
	go func() { asked <- s.awaitRequests(ctx, requests, unanswered, true) }()
	select {
	case out := <-done:
		return s.roundAnswer(ctx, r, m, out)
	case reqs := <-asked:
		if len(reqs) == 0 {
			return toolAnswer(r.Tool, m, nil, errRoundTimeout(ctx))
		}
		return s.askInput(rd, reqs), nil
	}
}

// roundDeadline checks that the call a round's POST subject keeps is one of r's
// account, of the tool method name, still kept, and returns its deadline.
func (s *Server) roundDeadline(ctx context.Context, r *Request, name, subject string, m *registry.Method) (time.Time, error) {
	first, err := s.events.Get(ctx, subject, 1)
	if err != nil || first.Header.Get(headerAccount) != r.Principal.Account || first.Header.Get(headerEvent) != eventRequest {
		// Unknown, expired, or another account's: the same answer for each.
		return time.Time{}, InvalidParams("tools/call: requestState names no call of this link that is still running")
	}
	var orig mcp.CallToolParamsRaw
	if json.Unmarshal(first.Data, &orig) != nil || orig.Name != name {
		return time.Time{}, InvalidParams("tools/call: requestState belongs to a call of another tool than %q", name)
	}
	return first.Time.Add(s.gw.Timeout(m, 0)), nil
}

// passAnswers hands the worker the client's answers to the requests a round handed
// it, read from requests, and returns those the client left unanswered; requests
// then follows what comes after them.
func (s *Server) passAnswers(ctx context.Context, r *Request, rd round, requests *registry.Follower, answers mcp.InputResponseMap) ([]workerRequest, error) {
	requests.Next = rd.from
	var handed []workerRequest
	if _, err := requests.Stored(ctx, func(rec registry.Record) bool {
		if rec.Seq > rd.to {
			return true
		}
		if wr, ok := readWorkerRequest(rec); ok {
			handed = append(handed, wr)
		}
		return false
	}); err != nil {
		return nil, err
	}
	requests.Next = rd.to + 1
	if len(handed) == 0 {
		return nil, InvalidParams("tools/call: requestState names no request of this call")
	}
	var unanswered []workerRequest
	for _, wr := range handed {
		answer, ok := answers[wr.id]
		if !ok {
			unanswered = append(unanswered, wr)
			continue
		}
		raw, err := json.Marshal(answer)
		if err != nil {
			return nil, InvalidParams("tools/call: inputResponses[%q]: %v", wr.id, err)
		}
		body, _ := json.Marshal(struct {
			JSONRPC string          `json:"jsonrpc"`
			ID      string          `json:"id"`
			Result  json.RawMessage `json:"result"`
		}{"2.0", wr.id, raw})
		if err := s.nc.Publish(s.subj.SessionReply(r.Tool, rd.session, wr.id), body); err != nil {
			return nil, fmt.Errorf("sse: passing an input response on: %w", err)
		}
	}
	return unanswered, nil
}

// roundOutcome is the answer of a round's call as stored, nil when the call's
// deadline passed first.
type roundOutcome struct {
	reply *nats.Msg
	err   error
}

// roundAnswer is the tools/call result a retry gets from the stored answer of its
// round's call.
func (s *Server) roundAnswer(ctx context.Context, r *Request, m *registry.Method, out roundOutcome) (any, error) {
	if out.err != nil && ctx.Err() == nil {
		return nil, out.err
	}
	if out.reply == nil {
		return toolAnswer(r.Tool, m, nil, errRoundTimeout(ctx))
	}
	if out.reply.Header.Get(headerEvent) == eventError {
		var e wire.RPCError
		if err := json.Unmarshal(out.reply.Data, &e); err != nil {
			return nil, fmt.Errorf("sse: reading a round's answer: %w", err)
		}
		return nil, workerRPCError(&e, true)
	}
	r.answeredBy = out.reply.Header.Get(wire.HeaderInstance)
	return json.RawMessage(out.reply.Data), nil
}

// awaitRequests waits for the worker's next requests on a round's out subject and
// returns them with those still unanswered, as soon as there is one; none once ctx
// ends. stored says whether some may be stored already: not for a call that was
// followed before it was sent, whose requests all come live (the follower reads the
// store should the live feed skip one).
func (s *Server) awaitRequests(ctx context.Context, f *registry.Follower, unanswered []workerRequest, stored bool) []workerRequest {
	reqs := slices.Clone(unanswered)
	collect := func(rec registry.Record) bool {
		if wr, ok := readWorkerRequest(rec); ok {
			reqs = append(reqs, wr)
		}
		return false // read on: several may be stored
	}
	if stored {
		if _, err := f.Stored(ctx, collect); err != nil {
			return reqs
		}
	}
	for len(reqs) == 0 {
		select {
		case m := <-f.Live():
			if _, err := f.Take(ctx, m, collect); err != nil {
				return reqs
			}
		case <-ctx.Done():
			return nil
		}
	}
	return reqs
}

// askInput is the input_required result that hands the client reqs.
func (s *Server) askInput(rd round, reqs []workerRequest) *inputRequired {
	res := &inputRequired{ResultType: "input_required", InputRequests: map[string]json.RawMessage{}}
	rd.from, rd.to = reqs[0].seq, reqs[0].seq
	for _, wr := range reqs {
		rd.from, rd.to = min(rd.from, wr.seq), max(rd.to, wr.seq)
		res.InputRequests[wr.id], _ = json.Marshal(struct {
			Method string          `json:"method"`
			Params json.RawMessage `json:"params,omitempty"`
		}{wr.method, wr.params})
	}
	res.RequestState = rd.state()
	return res
}

func errRoundTimeout(ctx context.Context) error {
	if errors.Is(ctx.Err(), context.Canceled) {
		return ctx.Err()
	}
	return bus.ErrTimeout
}

// mayBeAsked reports whether a client that declared capabilities may be asked
// anything by a worker: sampling, elicitation or its roots.
func mayBeAsked(capabilities []string) bool {
	for _, c := range capabilities {
		if c == "sampling" || c == "elicitation" || c == "roots" {
			return true
		}
	}
	return false
}

// metaCapabilities are the names of the capabilities a 2026-07-28 request's _meta
// declares.
func metaCapabilities(raw json.RawMessage) []string {
	var caps map[string]json.RawMessage
	if json.Unmarshal(raw, &caps) != nil {
		return nil
	}
	names := make([]string, 0, len(caps))
	for k := range caps {
		names = append(names, k)
	}
	slices.Sort(names)
	return names
}
