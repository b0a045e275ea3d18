package wire

import (
	"fmt"
	"strconv"
	"strings"

	"github.com/nats-io/nats.go"
)

// A request or reply too large for one NATS message travels as a claim check: its
// bytes are stored in the payloads bucket (PayloadBucket, a JetStream object store)
// as parts of at most PayloadPartSize bytes, each an object named PayloadPartName,
// and the message carries an empty body and HeaderPayload naming them. The edge
// reads and writes the bucket itself; a worker, which has no JetStream reach, asks an
// edge for each part (AskPayload), and only ever for its own tool's parts: the
// edge puts the subject's tool in front of every name.

// PayloadBucket is the object store that holds the payloads past a message's size.
const PayloadBucket = "tg-payloads"

// AnswerBucket is the object store that holds the answers of calls that outlive their
// request past a message's size (package calls), as long as their records.
const AnswerBucket = "tg-call-answers"

// HeaderPayload marks a message whose body is in PayloadBucket: "<id> <size> <parts>",
// the payload's id (a token), its size in bytes and the number of its parts.
const HeaderPayload = "Tg-Payload"

// HeaderPayloadLimit is, on a request, the largest reply the caller takes (the
// deployment's limit or the account's, whichever is lower): a worker answers a
// larger one with payload_too_large instead of storing it.
const HeaderPayloadLimit = "Tg-Payload-Limit"

// DefaultPayloadLimit is the largest request or reply a deployment takes unless
// configured otherwise (the edge's --max-payload-bytes), and what a worker takes for
// the limit of a request that names none.
const DefaultPayloadLimit = 64 << 20

// PayloadRoom is what a message keeps free of the server's max_payload for its
// headers: a body larger than max_payload less this travels as a payload.
const PayloadRoom = 16 << 10

// maxPart bounds a part whatever the server's max_payload: the edge holds one part of
// a payload at a time as it streams it.
const maxPart = 1 << 20

// PayloadThreshold is the largest body that travels in the message itself on a
// connection whose server takes maxPayload bytes.
// The room kept for headers is PayloadRoom, or a quarter of a smaller server's
// max_payload.
func PayloadThreshold(maxPayload int64) int64 { return maxPayload - min(PayloadRoom, maxPayload/4) }

// PayloadPartSize is the size of a payload's parts on a connection whose server takes
// maxPayload bytes: what one ask or its answer carries with room for its headers.
func PayloadPartSize(maxPayload int64) int { return int(min(PayloadThreshold(maxPayload), maxPart)) }

// Payload names a payload stored in PayloadBucket.
type Payload struct {
	ID    string
	Size  int64
	Parts int
	// SHA256 is the hex sha256 of the payload's bytes, known to the writer that stored
	// them (payloads.Store.Write); HeaderPayload does not carry it.
	SHA256 string
}

// String is the payload as HeaderPayload carries it.
func (p Payload) String() string {
	return p.ID + " " + strconv.FormatInt(p.Size, 10) + " " + strconv.Itoa(p.Parts)
}

// PayloadOf reads HeaderPayload of h: ok is false when h has none, err says why one
// breaks the contract.
func PayloadOf(h nats.Header) (p Payload, ok bool, err error) {
	v := h.Get(HeaderPayload)
	if v == "" {
		return Payload{}, false, nil
	}
	f := strings.Fields(v)
	if len(f) != 3 || !ValidToken(f[0]) {
		return Payload{}, true, fmt.Errorf("wire: %s %q: not <id> <size> <parts>", HeaderPayload, v)
	}
	size, err1 := strconv.ParseInt(f[1], 10, 64)
	parts, err2 := strconv.Atoi(f[2])
	if err1 != nil || err2 != nil || size < 0 || parts < 0 || (size > 0) != (parts > 0) || int64(parts) > size {
		return Payload{}, true, fmt.Errorf("wire: %s %q: not <id> <size> <parts>", HeaderPayload, v)
	}
	return Payload{ID: f[0], Size: size, Parts: parts}, true, nil
}

// PayloadPartName is the object that holds part n of tool's payload id.
func PayloadPartName(tool, id string, n int) string {
	return tool + "/" + id + "/" + strconv.Itoa(n)
}

// PayloadLimitOf reads HeaderPayloadLimit of h: DefaultPayloadLimit when it has none
// or one that is no positive number.
func PayloadLimitOf(h nats.Header) int64 {
	if n, err := strconv.ParseInt(h.Get(HeaderPayloadLimit), 10, 64); err == nil && n > 0 {
		return n
	}
	return DefaultPayloadLimit
}

// PayloadOp is what a worker asks of the payloads bucket.
type PayloadOp string

const (
	PayloadPut PayloadOp = "put" // store the body as the part HeaderKey names ("<id>/<n>")
	PayloadGet PayloadOp = "get" // answer with the part HeaderKey names
)

// AskPayload is where a worker of tool asks an edge for one part of one of its tool's
// payloads: HeaderKey names it as "<id>/<n>".
func (s Subjects) AskPayload(tool string, op PayloadOp) string {
	return s.join("obj", tool, string(op))
}

// AskPayloadMsg is the ask for op on part n of tool's payload id, with the part as
// the body of a put.
func (s Subjects) AskPayloadMsg(tool string, op PayloadOp, id string, n int, part []byte) *nats.Msg {
	msg := nats.NewMsg(s.AskPayload(tool, op))
	msg.Header.Set(HeaderKey, id+"/"+strconv.Itoa(n))
	msg.Data = part
	return msg
}

// ParsePayloadKey reads an ask's HeaderKey: a payload's id and a part's number.
func ParsePayloadKey(key string) (id string, n int, err error) {
	id, num, ok := strings.Cut(key, "/")
	n, err = strconv.Atoi(num)
	if !ok || !ValidToken(id) || err != nil || n < 0 || strconv.Itoa(n) != num {
		return "", 0, fmt.Errorf("wire: payload key %q: not <id>/<part>", key)
	}
	return id, n, nil
}

func (op PayloadOp) valid() bool { return op == PayloadPut || op == PayloadGet }
