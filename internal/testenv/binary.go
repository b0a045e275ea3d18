package testenv

import (
	"crypto/sha256"
	"encoding/hex"
	"fmt"
	"io"
	"os"
	"os/exec"
	"path/filepath"
	"runtime"
	"strings"
	"testing"
)

// Toolgate returns the path of the toolgate binary built from this source tree, for
// tests that run toolgate's roles as processes. It is built once per tree: under the
// module's bin/test/, named by a hash of the module's Go sources, go.mod and go.sum
// and the Go version, so that the packages of one `go test ./...` (and of runs at the
// same time) share one build, and a change to any source builds it again.
func Toolgate(t testing.TB) string {
	t.Helper()
	root, err := moduleRoot()
	if err != nil {
		t.Fatalf("testenv: %v", err)
	}
	sum, err := sourceHash(root)
	if err != nil {
		t.Fatalf("testenv: hashing the sources: %v", err)
	}
	name := "toolgate-" + sum
	if runtime.GOOS == "windows" {
		name += ".exe"
	}
	dir := filepath.Join(root, "bin", "test")
	bin := filepath.Join(dir, name)
	if _, err := os.Stat(bin); err == nil {
		return bin
	}
	if err := os.MkdirAll(dir, 0o755); err != nil {
		t.Fatalf("testenv: %v", err)
	}
	// Built under a name of its own and renamed: a run at the same time finds either
	// no binary or a whole one.
	tmp, err := os.MkdirTemp(dir, "build-")
	if err != nil {
		t.Fatalf("testenv: %v", err)
	}
	defer os.RemoveAll(tmp)
	cmd := exec.Command("go", "build", "-o", filepath.Join(tmp, name), "./cmd/toolgate")
	cmd.Dir = root
	if out, err := cmd.CombinedOutput(); err != nil {
		t.Fatalf("testenv: go build: %v\n%s", err, out)
	}
	if err := os.Rename(filepath.Join(tmp, name), bin); err != nil {
		t.Fatalf("testenv: %v", err)
	}
	return bin
}

// moduleRoot is the directory of the go.mod of the package under test.
func moduleRoot() (string, error) {
	out, err := exec.Command("go", "env", "GOMOD").Output()
	if err != nil {
		return "", err
	}
	return filepath.Dir(strings.TrimSpace(string(out))), nil
}

// sourceHash hashes what the build of ./cmd/toolgate in root reads of the module
// itself (its packages' Go and embedded files, as go list names them), go.mod,
// go.sum and the Go version; the modules it requires are named by go.sum.
func sourceHash(root string) (string, error) {
	cmd := exec.Command("go", "list", "-deps", "-f",
		`{{if .Module}}{{if .Module.Main}}{{.Dir}}|{{join .GoFiles ","}},{{join .CgoFiles ","}},{{join .EmbedFiles ","}}{{end}}{{end}}`, "./cmd/toolgate")
	cmd.Dir = root
	out, err := cmd.Output()
	if err != nil {
		return "", fmt.Errorf("go list: %w", err)
	}
	h := sha256.New()
	io.WriteString(h, runtime.Version()+"\n")
	files := []string{filepath.Join(root, "go.mod"), filepath.Join(root, "go.sum")}
	for _, line := range strings.Split(strings.TrimSpace(string(out)), "\n") {
		dir, names, _ := strings.Cut(line, "|")
		for _, n := range strings.Split(names, ",") {
			if n != "" {
				files = append(files, filepath.Join(dir, n))
			}
		}
	}
	for _, f := range files {
		b, err := os.ReadFile(f)
		if err != nil {
			return "", err
		}
		rel, _ := filepath.Rel(root, f)
		fmt.Fprintf(h, "%s %d\n", filepath.ToSlash(rel), len(b))
		h.Write(b)
	}
	return hex.EncodeToString(h.Sum(nil))[:16], nil
}
