package install

import (
	"bytes"
	"encoding/json"
	"errors"
	"fmt"
	"reflect"
	"regexp"
	"slices"
	"strings"

	"github.com/tailscale/hujson"
)

// The JSON clients keep their servers in one object at the top level of the file
// ("mcpServers", "servers", "context_servers"). Several of them (VS Code, Zed,
// Gemini CLI) read JSON with comments and trailing commas, so the file is edited as
// a HuJSON syntax tree: only the entry changes, every other byte stays as it was.

// MalformedError is returned for an existing configuration file that cannot be read
// in its format. The file is left as it was.
type MalformedError struct {
	Path   string // empty from the pure Add and Remove functions
	Format string // "JSON", "TOML", "YAML"
	Err    error
}

func (e *MalformedError) Error() string {
	if e.Path == "" {
		return fmt.Sprintf("not valid %s: %v", e.Format, e.Err)
	}
	return fmt.Sprintf("%s is not valid %s, so it was left as it is: %v", e.Path, e.Format, e.Err)
}

func (e *MalformedError) Unwrap() error { return e.Err }

func malformedJSON(err error) error { return &MalformedError{Format: "JSON", Err: err} }

// parseJSONC parses file as an object; an empty file is an empty object.
func parseJSONC(file []byte) (hujson.Value, *hujson.Object, error) {
	if len(bytes.TrimSpace(file)) == 0 {
		root := &hujson.Object{}
		return hujson.Value{Value: root, AfterExtra: hujson.Extra("\n")}, root, nil
	}
	v, err := hujson.Parse(file)
	if err != nil {
		return hujson.Value{}, nil, malformedJSON(err)
	}
	root, ok := v.Value.(*hujson.Object)
	if !ok {
		return hujson.Value{}, nil, malformedJSON(errors.New("the top level is not an object"))
	}
	return v, root, nil
}

// addJSON sets container.name to entry.
func addJSON(file []byte, container, name string, entry any) ([]byte, error) {
	v, root, err := parseJSONC(file)
	if err != nil {
		return nil, err
	}
	unit := indentUnit(root)
	servers, err := objectMember(root, container)
	if err != nil {
		return nil, err
	}
	if servers == nil {
		servers = &hujson.Object{AfterExtra: hujson.Extra("\n" + unit)}
		setMember(root, container, hujson.Value{Value: servers}, unit, 1)
	}
	if i := findMember(servers, name); i >= 0 {
		same, err := equalJSON(servers.Members[i].Value, entry)
		if err != nil {
			return nil, err
		}
		if same {
			return file, nil
		}
	}
	val, err := marshalAt(entry, unit, 2)
	if err != nil {
		return nil, err
	}
	setMember(servers, name, val, unit, 2)
	return v.Pack(), nil
}

// removeJSON deletes container.name.
func removeJSON(file []byte, container, name string) ([]byte, error) {
	if len(bytes.TrimSpace(file)) == 0 {
		return file, nil
	}
	v, root, err := parseJSONC(file)
	if err != nil {
		return nil, err
	}
	servers, err := objectMember(root, container)
	if err != nil || servers == nil {
		return file, err
	}
	i := findMember(servers, name)
	if i < 0 {
		return file, nil
	}
	removeMember(servers, i)
	return v.Pack(), nil
}

// objectMember returns the object under name, nil when there is none (or null).
func objectMember(obj *hujson.Object, name string) (*hujson.Object, error) {
	i := findMember(obj, name)
	if i < 0 {
		return nil, nil
	}
	switch val := obj.Members[i].Value.Value.(type) {
	case *hujson.Object:
		return val, nil
	case hujson.Literal:
		if val.Kind() == 'n' {
			return nil, nil
		}
	}
	return nil, malformedJSON(fmt.Errorf("%q is not an object", name))
}

func findMember(obj *hujson.Object, name string) int {
	for i, m := range obj.Members {
		if lit, ok := m.Name.Value.(hujson.Literal); ok && lit.String() == name {
			return i
		}
	}
	return -1
}

// setMember replaces the value of an existing member, keeping the comments around
// it, or appends a new member indented like its siblings at depth.
func setMember(obj *hujson.Object, name string, val hujson.Value, unit string, depth int) {
	if i := findMember(obj, name); i >= 0 {
		obj.Members[i].Value.Value = val.Value
		return
	}
	trailingComma := len(obj.Members) > 0 && obj.Members[len(obj.Members)-1].Value.AfterExtra != nil
	val.BeforeExtra = hujson.Extra(" ")
	m := hujson.ObjectMember{
		Name:  hujson.Value{BeforeExtra: hujson.Extra("\n" + strings.Repeat(unit, depth)), Value: hujson.String(name)},
		Value: val,
	}
	if trailingComma {
		m.Value.AfterExtra = hujson.Extra{}
	}
	obj.Members = append(obj.Members, m)
	if !bytes.Contains(obj.AfterExtra, []byte("\n")) {
		closing := "\n" + strings.Repeat(unit, depth-1)
		obj.AfterExtra = append(bytes.TrimRight(obj.AfterExtra, " \t"), closing...)
	}
}

// removeMember deletes member i, keeping comments written above it and the
// object's trailing-comma style (a trailing comma breaks strict JSON readers).
func removeMember(obj *hujson.Object, i int) {
	removed := obj.Members[i]
	wasLast := i == len(obj.Members)-1
	obj.Members = slices.Delete(obj.Members, i, i+1)
	if head := detachedComments(removed.Name.BeforeExtra); head != nil {
		if i < len(obj.Members) {
			obj.Members[i].Name.BeforeExtra = append(head, obj.Members[i].Name.BeforeExtra...)
		} else {
			obj.AfterExtra = append(head, obj.AfterExtra...)
		}
	}
	if wasLast && len(obj.Members) > 0 {
		last := &obj.Members[len(obj.Members)-1].Value
		switch {
		case removed.Value.AfterExtra == nil && last.AfterExtra != nil:
			obj.AfterExtra = append(last.AfterExtra, obj.AfterExtra...)
			last.AfterExtra = nil
		case removed.Value.AfterExtra != nil && last.AfterExtra == nil:
			last.AfterExtra = hujson.Extra{}
		}
	}
	if len(obj.Members) == 0 && !hasComment(obj.AfterExtra) {
		obj.AfterExtra = nil
	}
}

func hasComment(b []byte) bool {
	return bytes.Contains(b, []byte("//")) || bytes.Contains(b, []byte("/*"))
}

// blankLine matches a line break followed by an empty line.
var blankLine = regexp.MustCompile(`\n[ \t]*\r?\n`)

// detachedComments returns the comments in a removed member's leading extra that
// are not about it: those above its last blank line. A comment right above a
// member goes with it; one set off by a blank line heads what follows.
func detachedComments(before []byte) hujson.Extra {
	locs := blankLine.FindAllIndex(before, -1)
	if len(locs) == 0 {
		return nil
	}
	head := before[:locs[len(locs)-1][0]]
	if !hasComment(head) {
		return nil
	}
	return slices.Clone(head)
}

// indentUnit guesses one level of the file's indentation from its first member.
func indentUnit(root *hujson.Object) string {
	for _, m := range root.Members {
		ws := m.Name.BeforeExtra
		if i := bytes.LastIndexByte(ws, '\n'); i >= 0 {
			ind := ws[i+1:]
			if len(ind) > 0 && len(bytes.Trim(ind, " \t")) == 0 {
				return string(ind)
			}
		}
	}
	return "  "
}

// marshalAt renders v as a value whose own lines sit at depth.
func marshalAt(v any, unit string, depth int) (hujson.Value, error) {
	var buf bytes.Buffer
	enc := json.NewEncoder(&buf)
	enc.SetEscapeHTML(false)
	enc.SetIndent(strings.Repeat(unit, depth), unit)
	if err := enc.Encode(v); err != nil {
		return hujson.Value{}, err
	}
	return hujson.Parse(bytes.TrimRight(buf.Bytes(), "\n"))
}

// equalJSON reports whether the existing value means the same as want, whatever
// its layout and comments.
func equalJSON(have hujson.Value, want any) (bool, error) {
	std, err := hujson.Standardize(have.Pack())
	if err != nil {
		return false, malformedJSON(err)
	}
	var a, b any
	if err := json.Unmarshal(std, &a); err != nil {
		return false, malformedJSON(err)
	}
	raw, err := json.Marshal(want)
	if err != nil {
		return false, err
	}
	if err := json.Unmarshal(raw, &b); err != nil {
		return false, err
	}
	return reflect.DeepEqual(a, b), nil
}
