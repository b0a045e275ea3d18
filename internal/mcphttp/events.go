package mcphttp

import (
	"bufio"
	"bytes"
	"io"
	"iter"
	"slices"
	"strconv"
	"time"
)

// maxEventSize bounds one line of an event stream, as the SDK bounds one event.
const maxEventSize = 16 << 20

// event is one Server-Sent Event.
type event struct {
	name  string
	id    string
	data  []byte
	retry time.Duration // the reconnection delay the server asked for with it; 0 for none
}

// events reads Server-Sent Events from r until it ends. A stream that breaks off
// in the middle of an event drops that event, as the format says.
func events(r io.Reader) iter.Seq2[event, error] {
	return func(yield func(event, error) bool) {
		sc := bufio.NewScanner(r)
		sc.Buffer(make([]byte, 0, 64<<10), maxEventSize)
		var ev event
		var data [][]byte
		pending := false
		for sc.Scan() {
			line := sc.Bytes()
			if len(line) == 0 {
				if pending {
					ev.data = bytes.Join(data, []byte("\n"))
					if !yield(ev, nil) {
						return
					}
				}
				ev, data, pending = event{}, nil, false
				continue
			}
			if line[0] == ':' {
				continue // a comment, such as a keep-alive
			}
			field, value, _ := bytes.Cut(line, []byte(":"))
			value = bytes.TrimPrefix(value, []byte(" "))
			switch string(field) {
			case "event":
				ev.name, pending = string(value), true
			case "data":
				data, pending = append(data, slices.Clone(value)), true
			case "id":
				ev.id, pending = string(value), true
			case "retry":
				if ms, err := strconv.Atoi(string(value)); err == nil && ms >= 0 {
					ev.retry, pending = time.Duration(ms)*time.Millisecond, true
				}
			}
		}
		if err := sc.Err(); err != nil {
			yield(event{}, err)
		}
	}
}
