package workers_test

import (
	"os/exec"
	"path/filepath"
	"runtime"
	"slices"
	"strings"
	"testing"
)

// TestImportGraph keeps the SDK small: a tool team that imports it links neither the
// NATS server, nor the registry, nor any of the gateway's own packages, only the wire
// contract it shares with the edges.
func TestImportGraph(t *testing.T) {
	goTool, err := exec.LookPath("go")
	if err != nil {
		goTool = filepath.Join(runtime.GOROOT(), "bin", "go")
	}
	out, err := exec.Command(goTool, "list", "-deps", ".").Output()
	if err != nil {
		t.Fatalf("go list -deps: %v", err)
	}
	deps := strings.Fields(string(out))
	allowed := []string{"github.com/toolgate/toolgate/workers", "github.com/toolgate/toolgate/bus/wire"}
	for _, d := range deps {
		switch {
		case strings.Contains(d, "nats-server"):
			t.Errorf("the SDK imports %s: the NATS server", d)
		case strings.HasPrefix(d, "github.com/toolgate/toolgate/") && !slices.Contains(allowed, d):
			t.Errorf("the SDK imports %s: only %v may be in its graph", d, allowed)
		}
	}
	if !slices.Contains(deps, "github.com/toolgate/toolgate/bus/wire") {
		t.Errorf("go list printed no wire package; is the check looking at the SDK? %d deps", len(deps))
	}
}
