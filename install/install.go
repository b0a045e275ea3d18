// Package install writes one toolgate tool into one MCP client's configuration and
// takes it out again. It owns the knowledge of each client (where its configuration
// lives on Linux, macOS and Windows, and the shape of its server entries) and the safe
// editing of those files: other servers, unknown keys and comments are kept, the
// previous file is backed up and the new one is written atomically.
package install

import (
	"errors"
	"fmt"
	"os"
	"path"
	"runtime"
	"slices"
	"strings"
)

// Entry is one tool as a client should reach it.
type Entry struct {
	// Name is the key the client lists the server under.
	Name string
	// URL is the tool's Streamable HTTP link. It carries a secret in its path.
	URL string
	// Description tells the user what the tool does, for clients that show one.
	Description string
	// Command and Args start `toolgate connect <link>`, for clients that only run
	// stdio servers.
	Command string
	Args    []string
}

// Scope says which of a client's configuration files an entry goes to.
type Scope string

const (
	// ScopeUser is the user's own configuration, used in every project.
	ScopeUser Scope = "user"
	// ScopeProject is the configuration kept in a project directory.
	ScopeProject Scope = "project"
)

// ParseScope reads a --scope value.
func ParseScope(s string) (Scope, error) {
	switch Scope(s) {
	case ScopeUser, ScopeProject:
		return Scope(s), nil
	}
	return "", fmt.Errorf("scope %q: must be user or project", s)
}

// ErrNoProjectScope is returned for a client that keeps no configuration in a
// project directory.
var ErrNoProjectScope = errors.New("the client has no project configuration")

// Env is what a client's configuration path depends on. Tests build one per
// operating system; CurrentEnv reads this machine's.
type Env struct {
	OS         string // "linux", "darwin" or "windows"
	Home       string
	ConfigHome string // $XDG_CONFIG_HOME; empty means Home/.config
	AppData    string // %APPDATA% on Windows; empty means Home\AppData\Roaming
	CodexHome  string // $CODEX_HOME; empty means Home/.codex
	Project    string // the project directory, for ScopeProject
}

// CurrentEnv describes this machine, with the working directory as the project.
func CurrentEnv() (Env, error) {
	home, err := os.UserHomeDir()
	if err != nil {
		return Env{}, fmt.Errorf("install: home directory: %w", err)
	}
	wd, err := os.Getwd()
	if err != nil {
		return Env{}, fmt.Errorf("install: working directory: %w", err)
	}
	return Env{
		OS:         runtime.GOOS,
		Home:       home,
		ConfigHome: os.Getenv("XDG_CONFIG_HOME"),
		AppData:    os.Getenv("APPDATA"),
		CodexHome:  os.Getenv("CODEX_HOME"),
		Project:    wd,
	}, nil
}

// join builds a path in the style of e.OS, so that paths for every operating
// system can be computed (and tested) on any of them.
func (e Env) join(elem ...string) string {
	if e.OS != "windows" {
		return path.Join(elem...)
	}
	parts := make([]string, 0, len(elem))
	for i, p := range elem {
		p = strings.ReplaceAll(p, "/", `\`)
		if i > 0 {
			p = strings.TrimLeft(p, `\`)
		}
		if i < len(elem)-1 {
			p = strings.TrimRight(p, `\`)
		}
		if p != "" {
			parts = append(parts, p)
		}
	}
	return strings.Join(parts, `\`)
}

// home is the user's home directory.
func (e Env) home() string { return e.Home }

// codexHome is $CODEX_HOME, falling back to ~/.codex.
func (e Env) codexHome() string {
	if e.CodexHome != "" {
		return e.CodexHome
	}
	return e.join(e.Home, ".codex")
}

// configDir is $XDG_CONFIG_HOME, falling back to ~/.config.
func (e Env) configDir() string {
	if e.ConfigHome != "" {
		return e.ConfigHome
	}
	return e.join(e.Home, ".config")
}

// appData is %APPDATA%, falling back to its usual place.
func (e Env) appData() string {
	if e.AppData != "" {
		return e.AppData
	}
	return e.join(e.Home, "AppData", "Roaming")
}

// vscodeUserDir is VS Code's per-user settings directory; extensions such as Cline
// keep their files below it.
func (e Env) vscodeUserDir() string {
	switch e.OS {
	case "darwin":
		return e.join(e.Home, "Library", "Application Support", "Code", "User")
	case "windows":
		return e.join(e.appData(), "Code", "User")
	}
	return e.join(e.configDir(), "Code", "User")
}

// Lookup finds a client by name or alias, ignoring case and spaces
// ("VS Code", "Claude").
func Lookup(name string) (Client, error) {
	key := strings.ToLower(strings.Join(strings.Fields(name), "-"))
	for _, c := range Clients() {
		if c.name == key || slices.Contains(c.aliases, key) {
			return c, nil
		}
	}
	names := make([]string, 0, len(Clients()))
	for _, c := range Clients() {
		names = append(names, c.Name())
	}
	slices.Sort(names)
	return Client{}, fmt.Errorf("unknown client %q (one of: %s)", name, strings.Join(names, ", "))
}

// Scopes lists the scopes c supports in env.
func Scopes(c Client, env Env) []Scope {
	var out []Scope
	for _, s := range []Scope{ScopeUser, ScopeProject} {
		if _, err := c.Path(env, s); err == nil {
			out = append(out, s)
		}
	}
	return out
}
