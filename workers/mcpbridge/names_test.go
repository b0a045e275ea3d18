package mcpbridge

import (
	"crypto/sha256"
	"encoding/hex"
	"strings"
	"testing"
)

func TestMethodNames(t *testing.T) {
	long := strings.Repeat("a", 130)
	tests := []struct {
		name  string
		tools []string
		want  map[string]string
	}{
		{"valid names are kept", []string{"echo", "get-thing", "A_1"}, map[string]string{"echo": "echo", "get-thing": "get-thing", "A_1": "A_1"}},
		{"other characters become underscores", []string{"github.search", "files/read", "größe"}, map[string]string{
			"github.search": "github_search", "files/read": "files_read", "größe": "gr__e"}},
		{"a clash with a valid name adds a hash to the mapped one", []string{"a.b", "a_b"}, map[string]string{"a.b": "a_b_" + hash("a.b"), "a_b": "a_b"}},
		{"two mapped names that clash both get a hash", []string{"a.b", "a/b"}, map[string]string{"a.b": "a_b_" + hash("a.b"), "a/b": "a_b_" + hash("a/b")}},
		{"a name too long is cut and hashed", []string{long + ".x"}, map[string]string{long + ".x": long[:119] + "_" + hash(long+".x")}},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			got := methodNames(tt.tools)
			for tool, want := range tt.want {
				if got[tool] != want {
					t.Errorf("%q -> %q, want %q", tool, got[tool], want)
				}
				if len(got[tool]) > maxMethodName {
					t.Errorf("%q -> %d characters", tool, len(got[tool]))
				}
			}
		})
	}
	t.Run("the mapping does not depend on the order of the names", func(t *testing.T) {
		a := methodNames([]string{"x.y", "x_y", "x/y", "z"})
		b := methodNames([]string{"z", "x/y", "x_y", "x.y"})
		for k, v := range a {
			if b[k] != v {
				t.Errorf("%q -> %q one way, %q the other", k, v, b[k])
			}
		}
	})
}

// hash is the suffix that tells a mapped name from the names it clashes with.
func hash(name string) string {
	h := sha256.Sum256([]byte(name))
	return hex.EncodeToString(h[:4])
}
