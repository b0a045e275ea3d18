package wire

import (
	"encoding/json"
	"fmt"
	"strings"
	"time"

	"github.com/nats-io/nats.go"
)

// A worker tells the edges which calls it holds: every HoldingEvery, an instance that
// holds calls taken at least HoldingAfter ago (running, or waiting for a slot)
// publishes their ids on Holding(tool). A call that finishes quickly is never named,
// so calls pay nothing for it; one that runs long is named again and again while it
// runs. An edge that has heard nothing of a call for HoldingLost (neither its answer
// nor its id named) takes it for lost: the worker holding it died, or the request or
// its answer was lost with a NATS node. It answers the caller at once (the gateway's
// tool_unavailable) and cancels the call, instead of waiting for the deadline.
//
// Only the calls of a tool whose record says its workers do so (Tool.Holding) are
// watched: a worker that does not name its calls would otherwise see every long call
// of its tool given up after HoldingLost.
const (
	HoldingAfter = 250 * time.Millisecond
	HoldingEvery = 250 * time.Millisecond
	HoldingLost  = time.Second
)

// Holding is what an instance of a tool publishes on Holding(tool).
type Holding struct {
	Instance string   `json:"instance"`
	Calls    []string `json:"calls"` // call ids
}

// Holding is the subject the instances of tool name the calls they hold on. It is a
// progress subject: no call id is "holding" (the gateway makes them), and a worker may
// publish under its tool's progress subjects.
func (s Subjects) Holding(tool string) string { return s.join("progress", tool, "holding") }

// HoldingAll matches the Holding subjects of every tool: what edges follow.
func (s Subjects) HoldingAll() string { return s.join("progress", "*", "holding") }

// ParseHolding reads the tool out of a Holding subject.
func (s Subjects) ParseHolding(subject string) (tool string, ok bool) {
	rest, ok := strings.CutPrefix(subject, s.prefix()+".progress.")
	if !ok {
		return "", false
	}
	tool, ok = strings.CutSuffix(rest, ".holding")
	return tool, ok && tool != "" && !strings.Contains(tool, ".")
}

// HoldingMsg is the message an instance of tool names the calls it holds with.
func (s Subjects) HoldingMsg(tool string, h *Holding) (*nats.Msg, error) {
	b, err := json.Marshal(h)
	if err != nil {
		return nil, fmt.Errorf("wire: holding of %s: %w", tool, err)
	}
	return &nats.Msg{Subject: s.Holding(tool), Data: b}, nil
}

// ReadHolding decodes what an instance published on Holding(tool).
func ReadHolding(data []byte) (*Holding, error) {
	var h Holding
	if err := json.Unmarshal(data, &h); err != nil {
		return nil, fmt.Errorf("wire: holding: %w", err)
	}
	return &h, nil
}
