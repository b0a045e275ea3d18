package testenv

import (
	"context"
	"encoding/json"
	"os"
	"os/exec"
	"path/filepath"
	"syscall"
	"testing"
	"time"
)

// NPMPackage installs an npm package at an exact version, once, into the repository's
// ignored .cache/npm/<name>@<version>, and returns that folder (the package is under
// its node_modules). Tests of several packages may ask at once: a lock file lets one
// install while the others wait. A test that has no npm, or cannot install within 3
// minutes (no registry), is skipped, saying why; so is every test under -short.
func NPMPackage(t testing.TB, name, version string) string {
	t.Helper()
	if testing.Short() {
		t.Skipf("skipping: installs %s@%s from npm", name, version)
	}
	npm, err := exec.LookPath("npm")
	if err != nil {
		t.Skipf("skipping: no npm on PATH to install %s@%s", name, version)
	}
	if _, err := exec.LookPath("node"); err != nil {
		t.Skipf("skipping: no node on PATH to run %s@%s", name, version)
	}
	dir := filepath.Join(repoRoot(t), ".cache", "npm", filepath.FromSlash(name)+"@"+version)
	if err := os.MkdirAll(dir, 0o755); err != nil {
		t.Fatal(err)
	}
	lock, err := os.OpenFile(filepath.Join(dir, ".lock"), os.O_CREATE|os.O_RDWR, 0o644)
	if err != nil {
		t.Fatal(err)
	}
	defer lock.Close()
	if err := syscall.Flock(int(lock.Fd()), syscall.LOCK_EX); err != nil {
		t.Fatal(err)
	}
	defer syscall.Flock(int(lock.Fd()), syscall.LOCK_UN)

	installed := func() bool {
		b, err := os.ReadFile(filepath.Join(dir, "node_modules", filepath.FromSlash(name), "package.json"))
		var pkg struct {
			Version string `json:"version"`
		}
		return err == nil && json.Unmarshal(b, &pkg) == nil && pkg.Version == version
	}
	if installed() {
		return dir
	}
	ctx, cancel := context.WithTimeout(context.Background(), 3*time.Minute)
	defer cancel()
	start := time.Now()
	out, err := exec.CommandContext(ctx, npm, "install", "--prefix", dir, "--no-audit", "--no-fund", "--silent", name+"@"+version).CombinedOutput()
	if err != nil || !installed() {
		t.Skipf("skipping: npm could not install %s@%s within 3 minutes: %v\n%s", name, version, err, out)
	}
	t.Logf("installed %s@%s in %v", name, version, time.Since(start).Round(time.Millisecond))
	return dir
}

// repoRoot is the folder of the module's go.mod, above the test's working folder.
func repoRoot(t testing.TB) string {
	t.Helper()
	dir, err := os.Getwd()
	if err != nil {
		t.Fatal(err)
	}
	for {
		if _, err := os.Stat(filepath.Join(dir, "go.mod")); err == nil {
			return dir
		}
		parent := filepath.Dir(dir)
		if parent == dir {
			t.Fatal("no go.mod above the test's folder")
		}
		dir = parent
	}
}
