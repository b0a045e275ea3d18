package wire

import (
	"strings"
)

// A tool's server whose lists change outside any session (a bridged server of
// 2026-07-28, which tells its subscriptions/listen streams) has the tool's workers
// say so on ListChanged(tool): every edge tells its subscriptions/listen streams on the
// tool that asked for that list. The message names the list and nothing else; it is
// not stored, and an edge that hears it twice tells its streams twice.

// Lists a ListChanged message may name: the body is one of them.
const (
	ListTools     = "tools"
	ListPrompts   = "prompts"
	ListResources = "resources"
)

// ListChanged is the subject the workers of tool say one of its lists changed on. It
// is a progress subject, as Holding is: no call id is "listchanged", and a worker may
// publish under its tool's progress subjects.
func (s Subjects) ListChanged(tool string) string { return s.join("progress", tool, "listchanged") }

// ListChangedAll matches the ListChanged subjects of every tool: what edges follow.
func (s Subjects) ListChangedAll() string { return s.join("progress", "*", "listchanged") }

// ParseListChanged reads the tool out of a ListChanged subject, and the list out of
// its body; ok is false for anything else.
func (s Subjects) ParseListChanged(subject string, body []byte) (tool, list string, ok bool) {
	rest, ok := strings.CutPrefix(subject, s.prefix()+".progress.")
	if !ok {
		return "", "", false
	}
	tool, ok = strings.CutSuffix(rest, ".listchanged")
	if !ok || tool == "" || strings.Contains(tool, ".") {
		return "", "", false
	}
	switch list = string(body); list {
	case ListTools, ListPrompts, ListResources:
		return tool, list, true
	}
	return "", "", false
}
