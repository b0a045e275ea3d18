package install

import (
	"bytes"
	"errors"
	"io/fs"
	"os"
	"path/filepath"
	"runtime"
	"strings"
	"testing"
)

// localTarget is a client's user configuration under a temporary home.
func localTarget(t *testing.T, c Client) Target {
	t.Helper()
	home := t.TempDir()
	env := Env{OS: runtime.GOOS, Home: home, ConfigHome: filepath.Join(home, ".config"), AppData: filepath.Join(home, "AppData"), Project: home}
	target, err := NewTarget(c, ScopeUser, env)
	if err != nil {
		t.Fatal(err)
	}
	return target
}

func write(t *testing.T, path string, data []byte, mode fs.FileMode) {
	t.Helper()
	if err := os.MkdirAll(filepath.Dir(path), 0o755); err != nil {
		t.Fatal(err)
	}
	if err := os.WriteFile(path, data, mode); err != nil {
		t.Fatal(err)
	}
	if err := os.Chmod(path, mode); err != nil {
		t.Fatal(err)
	}
}

func read(t *testing.T, path string) []byte {
	t.Helper()
	b, err := os.ReadFile(path)
	if err != nil {
		t.Fatal(err)
	}
	return b
}

func install(t *testing.T, target Target, e Entry) (*Change, string) {
	t.Helper()
	ch, err := target.Install(e)
	if err != nil {
		t.Fatal(err)
	}
	backup, err := ch.Apply()
	if err != nil {
		t.Fatal(err)
	}
	return ch, backup
}

func TestInstallCreatesAPrivateFileWhenThereIsNone(t *testing.T) {
	target := localTarget(t, Cursor)
	ch, backup := install(t, target, testEntry("linux"))
	if backup != "" {
		t.Errorf("backup %q for a file that did not exist", backup)
	}
	if !bytes.Equal(read(t, target.Path), ch.After) {
		t.Error("file does not hold the planned content")
	}
	info, err := os.Stat(target.Path)
	if err != nil {
		t.Fatal(err)
	}
	if runtime.GOOS != "windows" && info.Mode().Perm() != 0o600 {
		t.Errorf("mode %v, want 0600: the file holds a secret link", info.Mode().Perm())
	}
	if _, err := os.Stat(target.Path + ".bak"); !errors.Is(err, fs.ErrNotExist) {
		t.Errorf("a backup was made of nothing: %v", err)
	}
}

func TestInstallBacksUpAndKeepsTheFileMode(t *testing.T) {
	for _, c := range Clients() {
		t.Run(c.Name()+" keeps the previous file as .bak, with the file's mode", func(t *testing.T) {
			target := localTarget(t, c)
			before := fixture(t, c, "existing")
			write(t, target.Path, before, 0o640)

			_, backup := install(t, target, testEntry("linux"))
			if backup != target.Path+".bak" {
				t.Fatalf("backup %q, want %q", backup, target.Path+".bak")
			}
			if !bytes.Equal(read(t, backup), before) {
				t.Error("backup does not hold the previous file")
			}
			if !strings.Contains(string(read(t, target.Path)), testLink) {
				t.Error("new file does not hold the link")
			}
			if runtime.GOOS == "windows" {
				return
			}
			for _, p := range []string{target.Path, backup} {
				info, err := os.Stat(p)
				if err != nil {
					t.Fatal(err)
				}
				if info.Mode().Perm() != 0o640 {
					t.Errorf("%s has mode %v, want 0640", p, info.Mode().Perm())
				}
			}
		})
	}
}

func TestInstallingTwiceChangesNothingTheSecondTime(t *testing.T) {
	for _, c := range Clients() {
		t.Run(c.Name()+" writes nothing and makes no backup the second time", func(t *testing.T) {
			target := localTarget(t, c)
			write(t, target.Path, fixture(t, c, "existing"), 0o600)
			install(t, target, testEntry("linux"))
			if err := os.Remove(target.Path + ".bak"); err != nil {
				t.Fatal(err)
			}
			first := read(t, target.Path)

			ch, backup := install(t, target, testEntry("linux"))
			if !ch.Empty() {
				t.Error("second install planned a change")
			}
			if backup != "" {
				t.Errorf("second install made a backup %q", backup)
			}
			if _, err := os.Stat(target.Path + ".bak"); !errors.Is(err, fs.ErrNotExist) {
				t.Errorf("second install left a backup: %v", err)
			}
			if !bytes.Equal(read(t, target.Path), first) {
				t.Error("second install changed the file")
			}
		})
	}
}

func TestAMalformedFileIsRefusedAndLeftUntouched(t *testing.T) {
	malformed := map[string]string{
		".json": "{\n  \"mcpServers\": {\n    \"github\": {\"command\": \"docker\"\n  }\n",
		".toml": "model = \"gpt-5\"\n[mcp_servers.github\ncommand = \"docker\"\n",
		".yaml": "extensions:\n  developer:\n    enabled: true\n   name: developer\n",
	}
	for _, c := range Clients() {
		t.Run(c.Name()+" names the file in the error and writes nothing", func(t *testing.T) {
			target := localTarget(t, c)
			bad := []byte(malformed[filepath.Ext(target.Path)])
			write(t, target.Path, bad, 0o644)

			for _, op := range []struct {
				name string
				plan func() (*Change, error)
			}{
				{"install", func() (*Change, error) { return target.Install(testEntry("linux")) }},
				{"uninstall", func() (*Change, error) { return target.Uninstall("github") }},
			} {
				_, err := op.plan()
				var merr *MalformedError
				if !errors.As(err, &merr) {
					t.Fatalf("%s: error %v, want a MalformedError", op.name, err)
				}
				if !strings.Contains(err.Error(), target.Path) {
					t.Errorf("%s: error %q does not name the file", op.name, err)
				}
			}
			if !bytes.Equal(read(t, target.Path), bad) {
				t.Error("the malformed file was changed")
			}
			if _, err := os.Stat(target.Path + ".bak"); !errors.Is(err, fs.ErrNotExist) {
				t.Error("a backup was written for a refused file")
			}
		})
	}
}

func TestADryRunWritesNothing(t *testing.T) {
	target := localTarget(t, Codex)
	before := fixture(t, Codex, "existing")
	write(t, target.Path, before, 0o600)

	ch, err := target.Install(testEntry("linux"))
	if err != nil {
		t.Fatal(err)
	}
	if ch.Empty() || !bytes.Contains(ch.After, []byte(testLink)) {
		t.Fatalf("planned change does not add the entry:\n%s", ch.After)
	}
	if !bytes.Equal(read(t, target.Path), before) {
		t.Error("planning a change wrote the file")
	}
	entries, err := os.ReadDir(filepath.Dir(target.Path))
	if err != nil {
		t.Fatal(err)
	}
	if len(entries) != 1 {
		t.Errorf("planning left files behind: %v", entries)
	}
}

func TestUninstallRemovesJustTheEntry(t *testing.T) {
	t.Run("the other servers stay and the old file is backed up", func(t *testing.T) {
		target := localTarget(t, VSCode)
		before := fixture(t, VSCode, "installed")
		write(t, target.Path, before, 0o600)

		ch, err := target.Uninstall("email")
		if err != nil {
			t.Fatal(err)
		}
		backup, err := ch.Apply()
		if err != nil {
			t.Fatal(err)
		}
		got := read(t, target.Path)
		if bytes.Contains(got, []byte(`"email"`)) || !bytes.Contains(got, []byte(`"memory"`)) {
			t.Errorf("uninstall did not remove just the entry:\n%s", got)
		}
		if !bytes.Equal(read(t, backup), before) {
			t.Error("backup does not hold the previous file")
		}
	})
	t.Run("a missing file is not created", func(t *testing.T) {
		target := localTarget(t, Goose)
		ch, err := target.Uninstall("email")
		if err != nil {
			t.Fatal(err)
		}
		if !ch.Empty() {
			t.Error("uninstalling from no file planned a change")
		}
		if _, err := ch.Apply(); err != nil {
			t.Fatal(err)
		}
		if _, err := os.Stat(target.Path); !errors.Is(err, fs.ErrNotExist) {
			t.Errorf("uninstall created %s", target.Path)
		}
	})
}

func TestInstallWritesThroughASymbolicLink(t *testing.T) {
	if runtime.GOOS == "windows" {
		t.Skip("symbolic links need privileges on Windows")
	}
	target := localTarget(t, GeminiCLI)
	real := filepath.Join(t.TempDir(), "dotfiles", "gemini-settings.json")
	write(t, real, fixture(t, GeminiCLI, "existing"), 0o600)
	if err := os.MkdirAll(filepath.Dir(target.Path), 0o755); err != nil {
		t.Fatal(err)
	}
	if err := os.Symlink(real, target.Path); err != nil {
		t.Fatal(err)
	}

	install(t, target, testEntry("linux"))
	info, err := os.Lstat(target.Path)
	if err != nil {
		t.Fatal(err)
	}
	if info.Mode()&fs.ModeSymlink == 0 {
		t.Error("the symbolic link was replaced by a file")
	}
	if !bytes.Contains(read(t, real), []byte(testLink)) {
		t.Error("the linked file was not updated")
	}
}

func TestLookupFindsClientsByTheNamesPeopleUse(t *testing.T) {
	for name, want := range map[string]string{
		"Cursor": "cursor", "Claude": "claude-desktop", "VS Code": "vscode", "claude code": "claude-code",
		"gemini": "gemini-cli", "Roo": "roo-code", "codex": "codex",
	} {
		t.Run(name+" is "+want, func(t *testing.T) {
			c, err := Lookup(name)
			if err != nil {
				t.Fatal(err)
			}
			if c.Name() != want {
				t.Errorf("got %s", c.Name())
			}
		})
	}
	t.Run("an unknown client lists the known ones", func(t *testing.T) {
		_, err := Lookup("notepad")
		if err == nil || !strings.Contains(err.Error(), "cursor") {
			t.Errorf("error %v does not list the clients", err)
		}
	})
}
