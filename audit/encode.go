package audit

import (
	"encoding/json"
	"strconv"
	"time"
	"unicode/utf8"
)

// encode is r's JSON text, byte for byte what encoding/json makes of it. Every call's
// record is encoded on the call's path, and encoding/json's reflection over the
// record's two dozen fields was a tenth of what an edge spent in its REST handler; a
// record that keeps the call's data, or a time encoding/json would refuse, is still
// left to encoding/json, which compacts and checks the data.
func (r *Record) encode() ([]byte, error) {
	if _, offset := r.Time.Zone(); r.Arguments != nil || r.Result != nil ||
		r.Time.Year() < 0 || r.Time.Year() > 9999 || offset <= -24*60*60 || offset >= 24*60*60 {
		// A copy: r itself, handed to encoding/json, would escape, and every caller's
		// record would be moved to the heap for the few that take this way.
		c := *r
		return json.Marshal(&c)
	}
	b := append(make([]byte, 0, 512), '{')
	if r.ID != "" {
		b = append(appendString(append(b, `"id":`...), r.ID), ',')
	}
	b = append(b, `"time":"`...)
	b = r.Time.AppendFormat(b, time.RFC3339Nano)
	b = append(b, '"')
	b = appendMember(b, "kind", r.Kind)
	b = appendOmitEmpty(b, "account", r.Account)
	b = appendOmitEmpty(b, "key", r.Key)
	if r.Link {
		b = append(b, `,"link":true`...)
	}
	b = appendOmitEmpty(b, "user", r.User)
	b = appendOmitEmpty(b, "client", r.Client)
	b = appendOmitEmpty(b, "by", r.By)
	b = appendOmitEmpty(b, "tool", r.Tool)
	b = appendMember(b, "method", r.Method)
	b = appendOmitEmpty(b, "transport", r.Transport)
	b = appendOmitEmpty(b, "args_sha256", r.ArgsSHA256)
	if r.ArgumentsCut {
		b = append(b, `,"arguments_cut":true`...)
	}
	if r.ResultCut {
		b = append(b, `,"result_cut":true`...)
	}
	if len(r.Secret) > 0 {
		b = append(b, `,"secret":[`...)
		for i, s := range r.Secret {
			if i > 0 {
				b = append(b, ',')
			}
			b = appendString(b, s)
		}
		b = append(b, ']')
	}
	b = strconv.AppendInt(append(b, `,"request_bytes":`...), int64(r.RequestBytes), 10)
	b = strconv.AppendInt(append(b, `,"response_bytes":`...), int64(r.ResponseBytes), 10)
	b = appendMember(b, "outcome", r.Outcome)
	if r.Status != 0 {
		b = strconv.AppendInt(append(b, `,"status":`...), int64(r.Status), 10)
	}
	b = strconv.AppendInt(append(b, `,"latency_us":`...), r.LatencyUS, 10)
	b = appendMember(b, "edge", r.Edge)
	b = appendOmitEmpty(b, "worker", r.Worker)
	b = appendOmitEmpty(b, "request_id", r.RequestID)
	b = appendOmitEmpty(b, "trace_id", r.TraceID)
	if r.Seq != 0 {
		b = strconv.AppendUint(append(b, `,"seq":`...), r.Seq, 10)
	}
	return append(b, '}'), nil
}

// appendMember appends a string member after the ones before it.
func appendMember(b []byte, name, v string) []byte {
	b = append(b, ',', '"')
	b = append(b, name...)
	b = append(b, '"', ':')
	return appendString(b, v)
}

// appendOmitEmpty appends a string member tagged omitempty: none when v is empty.
func appendOmitEmpty(b []byte, name, v string) []byte {
	if v == "" {
		return b
	}
	return appendMember(b, name, v)
}

const hexDigits = "0123456789abcdef"

// appendString appends s as encoding/json quotes it: with HTML's <, > and & escaped,
// invalid UTF-8 as U+FFFD, and U+2028 and U+2029 escaped for JavaScript.
func appendString(b []byte, s string) []byte {
	b = append(b, '"')
	start := 0
	for i := 0; i < len(s); {
		if c := s[i]; c < utf8.RuneSelf {
			if c >= 0x20 && c != '"' && c != '\\' && c != '<' && c != '>' && c != '&' {
				i++
				continue
			}
			b = append(b, s[start:i]...)
			switch c {
			case '\\', '"':
				b = append(b, '\\', c)
			case '\b':
				b = append(b, '\\', 'b')
			case '\f':
				b = append(b, '\\', 'f')
			case '\n':
				b = append(b, '\\', 'n')
			case '\r':
				b = append(b, '\\', 'r')
			case '\t':
				b = append(b, '\\', 't')
			default:
				b = append(b, '\\', 'u', '0', '0', hexDigits[c>>4], hexDigits[c&0xF])
			}
			i++
			start = i
			continue
		}
		r, size := utf8.DecodeRuneInString(s[i:])
		if r == utf8.RuneError && size == 1 {
			b = append(b, s[start:i]...)
			b = append(b, `\ufffd`...)
			i += size
			start = i
			continue
		}
		if r == '\u2028' || r == '\u2029' {
			b = append(b, s[start:i]...)
			b = append(b, '\\', 'u', '2', '0', '2', hexDigits[r&0xF])
			i += size
			start = i
			continue
		}
		i += size
	}
	b = append(b, s[start:]...)
	return append(b, '"')
}
