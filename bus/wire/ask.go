package wire

import (
	"encoding/json"
	"errors"
	"fmt"
	"strconv"
	"strings"
	"time"

	"github.com/nats-io/nats.go"
)

// A worker has no JetStream reach: JetStream answers a request on whatever reply
// subject the requester names, without a permission check, so a user that may use
// JetStream at all can have the server publish anywhere in the account (another
// account's record, another tool's calls). What a worker must store or read, it asks
// an edge for instead, with a plain request on one of the subjects below, each naming
// its tool. Edges answer in one queue group (Subjects.AskQueue), check that what is
// asked is the tool's own, and reply only on a reply subject under the tool's inbox
// (WorkerInbox): so the edge never publishes on a subject the worker chooses.
//
// The reply of every ask is an AskReply (the answer's body, Tg-Revision when it
// names one) or an AskErrorReply (the error's code and message in the nats micro
// error headers).

// AskRecord is where a worker of tool asks an edge to store the tool's record; the
// body is the record as ToolRecordMsg encodes it. The edge leaves an unchanged
// record alone (UpdatedAt apart) and answers with the record's revision.
func (s Subjects) AskRecord(tool string) string { return s.join("reg", tool, "record") }

// AskPresence is where an instance of tool asks an edge to store its presence (a
// Presence body, its time to live in HeaderTTL) or, with HeaderOp "delete", to
// remove it.
func (s Subjects) AskPresence(tool, instance string) string {
	return s.join("reg", tool, "presence", instance)
}

// AskState is where a worker of tool asks an edge for one operation (a StateOp) on
// the tool's state bucket (StateBucket): the key in HeaderKey, the value as the
// body, a revision in HeaderRevision, a key's own time to live in HeaderTTL.
func (s Subjects) AskState(tool string, op StateOp) string { return s.join("state", tool, string(op)) }

// AskSession is where a worker of tool asks an edge to put a message for the client
// of one of its MCP sessions in the session event log: on the session's standalone
// stream (SessionOut). Sent as a request, it is answered once stored; published
// without a reply, it is stored all the same.
func (s Subjects) AskSession(tool, session string) string { return s.join("sessout", tool, session) }

// StreamAnswer is the reply subject the edge gives a call of tool it answers on a
// stream of an MCP session (the POST post): the tool's answer, sent there as any
// reply, is put by an edge in the event log beside the stream (StreamAnswerLogged),
// where the edge running the call, or one replaying the stream, finds it.
func (s Subjects) StreamAnswer(tool, session, post string) string {
	return s.join("answer", tool, session, post)
}

// StreamAnswerLogged is where the event log keeps the answer sent on
// StreamAnswer(tool, session, post): beside the POST's stream, not on it, since it is
// no message for the client. '~' never occurs in a post id, so no POST's stream is
// named so.
func (s Subjects) StreamAnswerLogged(tool, session, post string) string {
	return s.SessionPost(tool, session, post) + "~reply"
}

// Asks are the subjects edges answer asks on, every tool's.
func (s Subjects) Asks() []string {
	return []string{
		s.AskRecord("*"), s.AskPresence("*", "*"), s.AskState("*", "*"),
		s.AskSession("*", "*"), s.StreamAnswer("*", "*", "*"), s.AskPayload("*", "*"),
	}
}

// AskQueue is the queue group the edges answer asks in: one edge takes each.
func (s Subjects) AskQueue() string { return s.join("edges") }

// An Ask is one request of a worker, read from its subject by ParseAsk.
type Ask struct {
	Kind     AskKind
	Tool     string
	Instance string    // AskPresenceKind
	Op       StateOp   // AskStateKind
	Payload  PayloadOp // AskPayloadKind
	Session  string    // AskSessionKind, AskAnswerKind
	Post     string    // AskAnswerKind
}

// AskKind says what an ask is for.
type AskKind int

const (
	AskRecordKind AskKind = iota + 1
	AskPresenceKind
	AskStateKind
	AskSessionKind
	AskAnswerKind
	AskPayloadKind
)

// ParseAsk reads an ask's subject; ok is false for a subject that is no ask or
// whose tokens break the rules (a tool id, an instance name).
func (s Subjects) ParseAsk(subject string) (a Ask, ok bool) {
	rest, ok := strings.CutPrefix(subject, s.prefix()+".")
	if !ok {
		return Ask{}, false
	}
	tokens := strings.Split(rest, ".")
	if len(tokens) < 3 || CheckToolID(tokens[1]) != nil {
		return Ask{}, false
	}
	a.Tool = tokens[1]
	switch {
	case tokens[0] == "reg" && len(tokens) == 3 && tokens[2] == "record":
		a.Kind = AskRecordKind
	case tokens[0] == "reg" && len(tokens) == 4 && tokens[2] == "presence" && ValidToken(tokens[3]):
		a.Kind, a.Instance = AskPresenceKind, tokens[3]
	case tokens[0] == "state" && len(tokens) == 3 && StateOp(tokens[2]).valid():
		a.Kind, a.Op = AskStateKind, StateOp(tokens[2])
	case tokens[0] == "sessout" && len(tokens) == 3 && ValidToken(tokens[2]):
		a.Kind, a.Session = AskSessionKind, tokens[2]
	case tokens[0] == "obj" && len(tokens) == 3 && PayloadOp(tokens[2]).valid():
		a.Kind, a.Payload = AskPayloadKind, PayloadOp(tokens[2])
	case tokens[0] == "answer" && len(tokens) == 4 && ValidToken(tokens[2]) && ValidToken(tokens[3]):
		a.Kind, a.Session, a.Post = AskAnswerKind, tokens[2], tokens[3]
	default:
		return Ask{}, false
	}
	return a, true
}

// AskReplyAllowed reports whether an edge may answer an ask of tool on reply: only
// under the tool's own inbox, and never a subject with a wildcard.
func AskReplyAllowed(tool, reply string) bool {
	rest, ok := strings.CutPrefix(reply, WorkerInbox(tool))
	return ok && rest != "" && !strings.ContainsAny(reply, "*> \t\r\n")
}

// StateOp is one operation on a tool's state bucket.
type StateOp string

const (
	StateGet    StateOp = "get"    // the key's value and revision; not_found when it has none
	StatePut    StateOp = "put"    // store the value, with a TTL of its own if HeaderTTL says
	StateCreate StateOp = "create" // store the value unless the key has one (exists)
	StateUpdate StateOp = "update" // store the value if the key's revision is HeaderRevision (exists otherwise)
	StateDelete StateOp = "delete" // remove the key
	StateKeys   StateOp = "keys"   // the keys that have a value, as a JSON array of strings
	StateInfo   StateOp = "info"   // nothing: whether the tool has a state bucket (no_bucket)
)

// CheckStateKey checks a state key as the bucket takes it: letters, digits and
// - / _ = . , neither beginning nor ending with a dot, at most 1024 bytes.
func CheckStateKey(key string) error {
	if key == "" || len(key) > 1024 || key[0] == '.' || key[len(key)-1] == '.' {
		return fmt.Errorf("wire: state key %q: 1 to 1024 bytes, neither beginning nor ending with '.'", key)
	}
	for _, r := range key {
		if r != '-' && r != '/' && r != '_' && r != '=' && r != '.' && !('a' <= r && r <= 'z') && !('A' <= r && r <= 'Z') && !('0' <= r && r <= '9') {
			return fmt.Errorf("wire: state key %q: only letters, digits and - / _ = .", key)
		}
	}
	return nil
}

func (op StateOp) valid() bool {
	switch op {
	case StateGet, StatePut, StateCreate, StateUpdate, StateDelete, StateKeys, StateInfo:
		return true
	}
	return false
}

// Headers of asks and their replies.
const (
	HeaderKey      = "Tg-Key"      // the state key an ask names
	HeaderRevision = "Tg-Revision" // a revision: of the key an update expects, of what a reply names
	HeaderTTL      = "Tg-TTL"      // a time to live, in whole seconds
	HeaderOp       = "Tg-Op"       // "delete" on a presence ask that removes it
)

// AskTimeout bounds the JetStream work an edge does for one ask: past it the edge
// answers AskFailed. A worker waits a little longer than this for an answer before it
// asks again, so that an edge's own answer comes first.
const AskTimeout = 10 * time.Second

// Error codes of asks.
const (
	AskNotFound   = "not_found"   // the key has no value
	AskExists     = "exists"      // create: the key has a value; update: its revision is another
	AskNoBucket   = "no_bucket"   // the tool has no state bucket (an admin makes it), or the registry is missing
	AskBadRequest = "bad_request" // the ask breaks the rules (a key, a record of another tool, a bad body)
	AskTooLarge   = "too_large"   // the bucket is full, or the value past what it takes
	AskFailed     = "failed"      // the edge could not do it (JetStream unavailable): try again
)

// AskError is an ask's error reply. errors.Is matches it with another AskError of the
// same code, such as ErrAskNotFound.
type AskError struct {
	Code    string
	Message string
}

func (e *AskError) Error() string { return "wire: ask: " + e.Code + ": " + e.Message }

// Is matches an AskError of the same code.
func (e *AskError) Is(target error) bool {
	var t *AskError
	return errors.As(target, &t) && t.Code == e.Code
}

// The ask errors to match with errors.Is.
var (
	ErrAskNotFound = &AskError{Code: AskNotFound}
	ErrAskExists   = &AskError{Code: AskExists}
	ErrAskNoBucket = &AskError{Code: AskNoBucket}
)

// AskReply is the answer to an ask, on reply: body and, when not 0, a revision.
func AskReply(reply string, revision uint64, body []byte) *nats.Msg {
	msg := nats.NewMsg(reply)
	if revision != 0 {
		msg.Header.Set(HeaderRevision, strconv.FormatUint(revision, 10))
	}
	msg.Data = body
	return msg
}

// AskErrorReply is an ask's error, on reply.
func AskErrorReply(reply, code, message string) *nats.Msg {
	msg := nats.NewMsg(reply)
	msg.Header.Set(HeaderErrorCode, code)
	msg.Header.Set(HeaderError, message)
	return msg
}

// ReadAskReply decodes an ask's answer: its body and revision, or its *AskError. A
// request nobody answered (no edge serves asks yet) is ErrNotStored.
func ReadAskReply(msg *nats.Msg) (body []byte, revision uint64, err error) {
	if len(msg.Data) == 0 && msg.Header.Get(headerNATSStatus) == "503" {
		return nil, 0, ErrNotStored
	}
	if code := msg.Header.Get(HeaderErrorCode); code != "" {
		return nil, 0, &AskError{Code: code, Message: msg.Header.Get(HeaderError)}
	}
	if r := msg.Header.Get(HeaderRevision); r != "" {
		if revision, err = strconv.ParseUint(r, 10, 64); err != nil {
			return nil, 0, fmt.Errorf("wire: ask reply: revision %q", r)
		}
	}
	return msg.Data, revision, nil
}

// AskPresenceMsg is the ask that stores p, to expire ttl after (whole seconds, at
// least one).
func (s Subjects) AskPresenceMsg(p *Presence, ttl time.Duration) (*nats.Msg, error) {
	b, err := json.Marshal(p)
	if err != nil {
		return nil, fmt.Errorf("wire: presence %s.%s: %w", p.Tool, p.Instance, err)
	}
	msg := nats.NewMsg(s.AskPresence(p.Tool, p.Instance))
	msg.Header.Set(HeaderTTL, strconv.FormatInt(TTLSeconds(ttl), 10))
	msg.Data = b
	return msg, nil
}

// AskPresenceDeleteMsg is the ask that removes an instance's presence at once.
func (s Subjects) AskPresenceDeleteMsg(tool, instance string) *nats.Msg {
	msg := nats.NewMsg(s.AskPresence(tool, instance))
	msg.Header.Set(HeaderOp, "delete")
	return msg
}

// AskRecordMsg is the ask that stores t.
func (s Subjects) AskRecordMsg(t *Tool) (*nats.Msg, error) {
	msg, err := ToolRecordMsg(t)
	if err != nil {
		return nil, err
	}
	msg.Subject = s.AskRecord(t.ID)
	return msg, nil
}

// AskStateMsg is the ask of op on key of tool's state: value as the body; revision
// for an update; ttl, when positive, the key's own time to live.
func (s Subjects) AskStateMsg(tool string, op StateOp, key string, value []byte, revision uint64, ttl time.Duration) *nats.Msg {
	msg := nats.NewMsg(s.AskState(tool, op))
	if key != "" {
		msg.Header.Set(HeaderKey, key)
	}
	if revision != 0 {
		msg.Header.Set(HeaderRevision, strconv.FormatUint(revision, 10))
	}
	if ttl > 0 {
		msg.Header.Set(HeaderTTL, strconv.FormatInt(TTLSeconds(ttl), 10))
	}
	msg.Data = value
	return msg
}

// TTLSeconds is a time to live as the server counts it: whole seconds, rounded up,
// at least one.
func TTLSeconds(ttl time.Duration) int64 { return max(1, int64((ttl+time.Second-1)/time.Second)) }

// ReadTTL reads HeaderTTL: 0 when absent.
func ReadTTL(h nats.Header) (time.Duration, error) {
	v := h.Get(HeaderTTL)
	if v == "" {
		return 0, nil
	}
	n, err := strconv.ParseInt(v, 10, 64)
	if err != nil || n < 1 {
		return 0, fmt.Errorf("wire: %s %q: whole seconds, at least one", HeaderTTL, v)
	}
	return time.Duration(n) * time.Second, nil
}

// CallReplyAcceptable reports whether a worker should take a call whose reply
// subject is reply: edges always give one, an inbox or a StreamAnswer subject, never
// a subject of the server's own APIs ($JS., $KV., $SYS., ...). A worker that took a
// call answered into JetStream would make JetStream act for whoever sent it.
func CallReplyAcceptable(reply string) bool { return reply != "" && reply[0] != '$' }
