package install

import (
	"bytes"
	"errors"
	"fmt"
	"reflect"
	"regexp"
	"slices"
	"strings"

	"github.com/pelletier/go-toml/v2"
	"github.com/pelletier/go-toml/v2/unstable"
)

// The TOML client (Codex) keeps each server in its own table, [table.name]. No Go
// TOML library writes a document back with its comments, so the file is edited as
// text: the parser finds where the entry's tables start and end, those lines are
// replaced, and every other byte stays as it was.

// tomlField is one key of an entry; values are strings.
type tomlField struct{ Key, Value string }

func malformedTOML(err error) error {
	var derr *toml.DecodeError
	if errors.As(err, &derr) {
		row, col := derr.Position()
		err = fmt.Errorf("line %d, column %d: %s", row, col, derr.Error())
	}
	return &MalformedError{Format: "TOML", Err: err}
}

// tomlExpr is one top-level expression of a TOML document.
type tomlExpr struct {
	kind  unstable.Kind
	key   []string
	start int // offset of the start of the expression's first line
}

func scanTOML(file []byte) ([]tomlExpr, map[string]any, error) {
	var doc map[string]any
	if err := toml.Unmarshal(file, &doc); err != nil {
		return nil, nil, malformedTOML(err)
	}
	p := unstable.Parser{KeepComments: true}
	p.Reset(file)
	var exprs []tomlExpr
	for p.NextExpression() {
		e := p.Expression()
		x := tomlExpr{kind: e.Kind, start: -1}
		switch e.Kind {
		case unstable.Table, unstable.ArrayTable, unstable.KeyValue:
			for it := e.Key(); it.Next(); {
				n := it.Node()
				if x.start < 0 {
					x.start = int(n.Raw.Offset)
				}
				x.key = append(x.key, string(n.Data))
			}
		default:
			x.start = int(e.Raw.Offset)
		}
		x.start = bytes.LastIndexByte(file[:x.start], '\n') + 1
		exprs = append(exprs, x)
	}
	if err := p.Error(); err != nil {
		return nil, nil, malformedTOML(err)
	}
	return exprs, doc, nil
}

// span is a byte range [start, end) of the document.
type span struct{ start, end int }

// entrySpans finds the tables that make up table.name: its own and its sub-tables.
// A table runs from its header to its last key; comments after that belong to what
// follows.
func entrySpans(file []byte, exprs []tomlExpr, prefix []string) []span {
	var spans []span
	for i, x := range exprs {
		if (x.kind != unstable.Table && x.kind != unstable.ArrayTable) || !hasPrefix(x.key, prefix) {
			continue
		}
		last := i
		for j := i + 1; j < len(exprs); j++ {
			k := exprs[j].kind
			if k == unstable.Table || k == unstable.ArrayTable {
				break
			}
			if k == unstable.KeyValue {
				last = j
			}
		}
		end := len(file)
		if last+1 < len(exprs) {
			end = exprs[last+1].start
		}
		spans = append(spans, span{x.start, end})
	}
	return spans
}

func hasPrefix(key, prefix []string) bool {
	return len(key) >= len(prefix) && slices.Equal(key[:len(prefix)], prefix)
}

// tomlEntry returns table.name from a decoded document, nil when absent.
func tomlEntry(doc map[string]any, table, name string) any {
	servers, _ := doc[table].(map[string]any)
	return servers[name]
}

// addTOML writes [table.name] with fields, in place of the entry's old tables.
func addTOML(file []byte, table, name string, fields []tomlField) ([]byte, error) {
	exprs, doc, err := scanTOML(file)
	if err != nil {
		return nil, err
	}
	want := make(map[string]any, len(fields))
	for _, f := range fields {
		want[f.Key] = f.Value
	}
	have := tomlEntry(doc, table, name)
	if reflect.DeepEqual(have, want) {
		return file, nil
	}
	spans := entrySpans(file, exprs, []string{table, name})
	if have != nil && len(spans) == 0 {
		return nil, fmt.Errorf("%s.%s is not written as its own [%s.%s] table; change it by hand", table, name, table, name)
	}

	var rendered bytes.Buffer
	fmt.Fprintf(&rendered, "[%s.%s]\n", tomlKey(table), tomlKey(name))
	for _, f := range fields {
		fmt.Fprintf(&rendered, "%s = %s\n", tomlKey(f.Key), tomlString(f.Value))
	}

	var out []byte
	if len(spans) == 0 {
		out = slices.Clip(file)
		if len(bytes.TrimSpace(out)) > 0 {
			if !bytes.HasSuffix(out, []byte("\n")) {
				out = append(out, '\n')
			}
			if !bytes.HasSuffix(out, []byte("\n\n")) {
				out = append(out, '\n')
			}
		}
		out = append(out, rendered.Bytes()...)
	} else {
		out = cutSpans(file, spans[1:])
		first := spans[0]
		old := out[first.start:first.end]
		// Keep the blank lines that separated the old table from what follows.
		body := bytes.TrimRight(old, " \t\r\n")
		tail := old[len(body):]
		if !bytes.HasPrefix(tail, []byte("\n")) {
			tail = bytes.TrimPrefix(tail, []byte("\r"))
		}
		tail = bytes.TrimPrefix(tail, []byte("\n"))
		var b []byte
		b = append(b, out[:first.start]...)
		b = append(b, rendered.Bytes()...)
		b = append(b, tail...)
		b = append(b, out[first.end:]...)
		out = b
	}
	return out, checkTOML(out, table, name, want)
}

// removeTOML deletes the tables of table.name.
func removeTOML(file []byte, table, name string) ([]byte, error) {
	exprs, doc, err := scanTOML(file)
	if err != nil {
		return nil, err
	}
	have := tomlEntry(doc, table, name)
	if have == nil {
		return file, nil
	}
	spans := entrySpans(file, exprs, []string{table, name})
	if len(spans) == 0 {
		return nil, fmt.Errorf("%s.%s is not written as its own [%s.%s] table; remove it by hand", table, name, table, name)
	}
	out := cutSpans(file, spans)
	if trimmed := bytes.TrimRight(out, "\r\n"); len(trimmed) < len(out) {
		out = append(trimmed, '\n')
	}
	return out, checkTOML(out, table, name, nil)
}

// cutSpans returns file without spans, which are in document order.
func cutSpans(file []byte, spans []span) []byte {
	out := slices.Clone(file)
	for i := len(spans) - 1; i >= 0; i-- {
		out = slices.Delete(out, spans[i].start, spans[i].end)
	}
	return out
}

// checkTOML guards the text edit: the result must parse and hold exactly want
// (nil: nothing) at table.name.
func checkTOML(out []byte, table, name string, want map[string]any) error {
	var doc map[string]any
	if err := toml.Unmarshal(out, &doc); err != nil {
		return fmt.Errorf("editing [%s.%s] would break the file: %w", table, name, err)
	}
	have := tomlEntry(doc, table, name)
	if want == nil && have == nil || want != nil && reflect.DeepEqual(have, want) {
		return nil
	}
	return fmt.Errorf("editing [%s.%s] did not give the expected entry", table, name)
}

var bareKey = regexp.MustCompile(`^[A-Za-z0-9_-]+$`)

func tomlKey(k string) string {
	if bareKey.MatchString(k) {
		return k
	}
	return tomlString(k)
}

// tomlString quotes s as a TOML basic string.
func tomlString(s string) string {
	var b strings.Builder
	b.WriteByte('"')
	for _, r := range s {
		switch r {
		case '"':
			b.WriteString(`\"`)
		case '\\':
			b.WriteString(`\\`)
		case '\b':
			b.WriteString(`\b`)
		case '\t':
			b.WriteString(`\t`)
		case '\n':
			b.WriteString(`\n`)
		case '\f':
			b.WriteString(`\f`)
		case '\r':
			b.WriteString(`\r`)
		default:
			if r < 0x20 || r == 0x7f {
				fmt.Fprintf(&b, `\u%04X`, r)
			} else {
				b.WriteRune(r)
			}
		}
	}
	b.WriteByte('"')
	return b.String()
}
