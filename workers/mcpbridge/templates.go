package mcpbridge

import (
	"crypto/sha256"
	"encoding/hex"
	"fmt"
	"maps"
	"net/http"
	"os"
	"regexp"
	"slices"
	"strings"

	"github.com/toolgate/toolgate/workers"
)

// A template is a value of Env or Header that names fields of the calling account's
// connection, {field}: each names a secret field of the tool's connection, and the
// upstream session of each account is given the value with the account's own.

var (
	templateField = regexp.MustCompile(`\{([A-Za-z_][A-Za-z0-9_]{0,63})\}`)
	envName       = regexp.MustCompile(`^[A-Za-z_][A-Za-z0-9_]*$`)
)

// templateFields are the fields s names, in order, each once.
func templateFields(s string, into []string) []string {
	for _, m := range templateField.FindAllStringSubmatch(s, -1) {
		if !slices.Contains(into, m[1]) {
			into = append(into, m[1])
		}
	}
	return into
}

// expand is s with each {field} replaced by its value.
func expand(s string, values map[string]string) string {
	return templateField.ReplaceAllStringFunc(s, func(m string) string { return values[m[1:len(m)-1]] })
}

// checkEnv checks the Env entries: NAME=value, each name once.
func checkEnv(env []string) error {
	seen := map[string]bool{}
	for _, e := range env {
		name, _, ok := strings.Cut(e, "=")
		if !ok || !envName.MatchString(name) {
			return fmt.Errorf("mcp: env: %q: want NAME=value, NAME letters, digits and _", e)
		}
		if seen[name] {
			return fmt.Errorf("mcp: env: %s: given twice", name)
		}
		seen[name] = true
	}
	return nil
}

// ConnectionFields are the fields of the tool's connection that the templates of
// Env and Header name: secrets, each described by where it goes.
func (c Config) ConnectionFields() []workers.Field {
	var names []string
	where := map[string][]string{}
	note := func(value, place string) {
		names = templateFields(value, names)
		for _, f := range templateFields(value, nil) {
			where[f] = append(where[f], place)
		}
	}
	for _, e := range c.Env {
		name, value, _ := strings.Cut(e, "=")
		note(value, "$"+name)
	}
	for _, name := range slices.Sorted(maps.Keys(c.Header)) {
		for _, v := range c.Header[name] {
			note(v, "the "+name+" header")
		}
	}
	fields := make([]workers.Field, len(names))
	for i, n := range names {
		fields[i] = workers.Field{Name: n, Secret: true, Description: "the account's value for " + strings.Join(slices.Compact(where[n]), " and ") + " of the server"}
	}
	return fields
}

// templated reports whether the server acts per account: a template names a field.
func (c Config) templated() bool { return len(c.ConnectionFields()) > 0 }

// upstreamEnv is the environment of a stdio server's process: the worker's own, less
// every variable Env sets, and then Env's entries, with values when given. A
// process without an account's values (a shared session's) gets none of Env's
// templated variables, so that it never acts as anyone.
func (c Config) upstreamEnv(values map[string]string) []string {
	var out []string
	for _, e := range os.Environ() {
		name, _, _ := strings.Cut(e, "=")
		if !slices.ContainsFunc(c.Env, func(x string) bool { return strings.HasPrefix(x, name+"=") }) {
			out = append(out, e)
		}
	}
	for _, e := range c.Env {
		_, value, _ := strings.Cut(e, "=")
		if values == nil && len(templateFields(value, nil)) > 0 {
			continue
		}
		out = append(out, expand(e, values))
	}
	return out
}

// upstreamHeader is the header sent to a remote server: Header's, with values when
// given; without them, a templated header is left out.
func (c Config) upstreamHeader(values map[string]string) http.Header {
	h := http.Header{}
	for name, vs := range c.Header {
		for _, v := range vs {
			if values == nil && len(templateFields(v, nil)) > 0 {
				continue
			}
			h.Add(name, expand(v, values))
		}
	}
	return h
}

// accountKey names the upstream session of account with values: a change of the
// values is another session (the old one is left to go idle).
func accountKey(account string, values map[string]string) string {
	h := sha256.New()
	for _, k := range slices.Sorted(maps.Keys(values)) {
		h.Write([]byte(k + "\x00" + values[k] + "\x00"))
	}
	return account + "\x00" + hex.EncodeToString(h.Sum(nil)[:16])
}
