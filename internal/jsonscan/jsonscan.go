// Package jsonscan reads the plain shapes of JSON that the gateway's hot paths see
// (a JSON-RPC envelope, a tool call's params, a server's response) by a scan of the
// bytes, without encoding/json's reflection. It reads only what it is sure of; its
// callers leave anything else to encoding/json, so that the reading is always
// encoding/json's, only cheaper when the message is plain.
package jsonscan

// PlainString reads a JSON string that needs no decoding (printable ASCII, no
// escapes), as every method name is, without a decoder; ok is false for anything
// else, which json.Unmarshal reads. raw is valid JSON already.
func PlainString(raw []byte) (s string, ok bool) {
	if len(raw) < 2 || raw[0] != '"' || raw[len(raw)-1] != '"' {
		return "", false
	}
	inner := raw[1 : len(raw)-1]
	for _, b := range inner {
		if b < 0x20 || b > 0x7e || b == '"' || b == '\\' {
			return "", false
		}
	}
	return string(inner), true
}

// Members calls fn with the key (quotes and all) and the value of each member of
// the JSON object obj, in order, until fn returns false. obj must be valid JSON; the
// result is false when it is not an object or fn returned false. Values are slices of
// obj, capped at their end.
func Members(obj []byte, fn func(key, value []byte) bool) bool {
	i := skipSpace(obj, 0)
	if obj[i] != '{' {
		return false
	}
	i = skipSpace(obj, i+1)
	if obj[i] == '}' {
		return true
	}
	for {
		end := skipString(obj, i)
		key := obj[i:end]
		i = skipSpace(obj, skipSpace(obj, end)+1) // past the colon
		end = skipValue(obj, i)
		if !fn(key, obj[i:end:end]) {
			return false
		}
		i = skipSpace(obj, end)
		if obj[i] == '}' {
			return true
		}
		i = skipSpace(obj, i+1) // past the comma
	}
}

func skipSpace(b []byte, i int) int {
	for i < len(b) && (b[i] == ' ' || b[i] == '\t' || b[i] == '\n' || b[i] == '\r') {
		i++
	}
	return i
}

// skipString returns the index just past the string starting at b[i].
func skipString(b []byte, i int) int {
	for i++; ; i++ {
		switch b[i] {
		case '\\':
			i++
		case '"':
			return i + 1
		}
	}
}

// skipValue returns the index just past the value starting at b[i].
func skipValue(b []byte, i int) int {
	switch b[i] {
	case '"':
		return skipString(b, i)
	case '{', '[':
		depth := 0
		for {
			switch b[i] {
			case '"':
				i = skipString(b, i)
				continue
			case '{', '[':
				depth++
			case '}', ']':
				if depth--; depth == 0 {
					return i + 1
				}
			}
			i++
		}
	}
	for i < len(b) {
		switch b[i] {
		case ',', '}', ']', ' ', '\t', '\n', '\r':
			return i
		}
		i++
	}
	return i
}
