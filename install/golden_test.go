package install

import (
	"bytes"
	"flag"
	"fmt"
	"os"
	"path/filepath"
	"strings"
	"testing"
)

var update = flag.Bool("update", false, "rewrite the golden files under testdata")

var systems = []string{"linux", "darwin", "windows"}

// testEnv is a user's machine on each operating system.
func testEnv(osName string) Env {
	switch osName {
	case "darwin":
		return Env{OS: osName, Home: "/Users/ada", Project: "/Users/ada/src/shop"}
	case "windows":
		return Env{OS: osName, Home: `C:\Users\ada`, AppData: `C:\Users\ada\AppData\Roaming`, Project: `C:\Users\ada\src\shop`}
	}
	return Env{OS: osName, Home: "/home/ada", Project: "/home/ada/src/shop"}
}

const testLink = "https://gateway.example.com/mcp/lnk_7Hq2xZ"

// testEntry is the email tool, with toolgate installed where it usually is.
func testEntry(osName string) Entry {
	cmd := map[string]string{
		"linux":   "/usr/local/bin/toolgate",
		"darwin":  "/opt/homebrew/bin/toolgate",
		"windows": `C:\Program Files\toolgate\toolgate.exe`,
	}[osName]
	return Entry{
		Name:        "email",
		URL:         testLink,
		Description: "Send and read email.",
		Command:     cmd,
		Args:        []string{"connect", testLink},
	}
}

// fixture reads testdata/<client>/<name>.*; "none" is no file at all.
func fixture(t *testing.T, c Client, name string) []byte {
	t.Helper()
	if name == "none" {
		return nil
	}
	matches, err := filepath.Glob(filepath.Join("testdata", c.Name(), name+".*"))
	if err != nil {
		t.Fatal(err)
	}
	for _, m := range matches {
		if !strings.HasSuffix(m, ".golden") {
			b, err := os.ReadFile(m)
			if err != nil {
				t.Fatal(err)
			}
			return b
		}
	}
	t.Fatalf("no fixture %s for %s", name, c.Name())
	return nil
}

func checkGolden(t *testing.T, path string, got []byte) {
	t.Helper()
	if *update {
		if err := os.WriteFile(path, got, 0o644); err != nil {
			t.Fatal(err)
		}
		return
	}
	want, err := os.ReadFile(path)
	if err != nil {
		t.Fatalf("%v (run go test ./install -update to create it)", err)
	}
	if !bytes.Equal(got, want) {
		t.Errorf("%s differs:\n--- got\n%s\n--- want\n%s", path, got, want)
	}
}

var fixtures = []struct{ name, says string }{
	{"none", "a client with no configuration file yet"},
	{"existing", "a configuration with other servers"},
	{"installed", "a configuration that has an older entry for the tool"},
}

func TestClientsWriteTheEntryTheirDocumentationDescribes(t *testing.T) {
	for _, c := range Clients() {
		for _, osName := range systems {
			for _, f := range fixtures {
				t.Run(fmt.Sprintf("%s on %s: install into %s", c.Name(), osName, f.says), func(t *testing.T) {
					in := fixture(t, c, f.name)
					e := testEntry(osName)
					out, err := c.Add(in, e)
					if err != nil {
						t.Fatal(err)
					}
					checkGolden(t, filepath.Join("testdata", c.Name(), f.name+"."+osName+".golden"), out)

					again, err := c.Add(out, e)
					if err != nil {
						t.Fatal(err)
					}
					if !bytes.Equal(again, out) {
						t.Errorf("installing twice changed the file again:\n%s", again)
					}
				})
			}
		}
	}
}

func TestClientsRemoveOnlyTheEntry(t *testing.T) {
	for _, c := range Clients() {
		t.Run(c.Name()+" takes the tool out of a configuration that has it", func(t *testing.T) {
			out, err := c.Remove(fixture(t, c, "installed"), "email")
			if err != nil {
				t.Fatal(err)
			}
			checkGolden(t, filepath.Join("testdata", c.Name(), "installed.uninstalled.golden"), out)
		})
		t.Run(c.Name()+" leaves a configuration without the tool byte for byte", func(t *testing.T) {
			in := fixture(t, c, "existing")
			out, err := c.Remove(in, "email")
			if err != nil {
				t.Fatal(err)
			}
			if !bytes.Equal(out, in) {
				t.Errorf("file changed:\n%s", out)
			}
		})
		t.Run(c.Name()+" gives back what it was given when installing then uninstalling", func(t *testing.T) {
			in := fixture(t, c, "existing")
			added, err := c.Add(in, testEntry("linux"))
			if err != nil {
				t.Fatal(err)
			}
			out, err := c.Remove(added, "email")
			if err != nil {
				t.Fatal(err)
			}
			checkGolden(t, filepath.Join("testdata", c.Name(), "existing.roundtrip.golden"), out)
		})
	}
}

func TestClientsKnowWhereTheirConfigurationLives(t *testing.T) {
	var b strings.Builder
	for _, c := range Clients() {
		for _, osName := range systems {
			for _, scope := range []Scope{ScopeUser, ScopeProject} {
				p, err := c.Path(testEnv(osName), scope)
				if err != nil {
					p = "(" + err.Error() + ")"
				}
				fmt.Fprintf(&b, "%-15s %-8s %-8s %s\n", c.Name(), osName, scope, p)
			}
		}
	}
	checkGolden(t, filepath.Join("testdata", "paths.golden"), []byte(b.String()))
}
