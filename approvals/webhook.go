package approvals

import (
	"bytes"
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"log/slog"
	"net/http"
	"net/url"
	"time"
)

// WebhookConfig is where and how each new pending approval is announced.
type WebhookConfig struct {
	// URL is POSTed an Announcement; empty: no webhook.
	URL string
	// Timeout bounds each attempt.
	Timeout time.Duration
	// Attempts is how many times an announcement is tried before it is given up
	// (logged); attempts are a second apart, then two, then four, at most Timeout.
	Attempts int
}

// DefaultWebhookConfig: no URL, 5 s an attempt, 3 attempts.
func DefaultWebhookConfig() WebhookConfig {
	return WebhookConfig{Timeout: 5 * time.Second, Attempts: 3}
}

// Validate names the first field that is wrong.
func (c WebhookConfig) Validate() error {
	if c.URL != "" {
		u, err := url.Parse(c.URL)
		if err != nil || (u.Scheme != "http" && u.Scheme != "https") || u.Host == "" {
			return fmt.Errorf("approvals: approval-webhook: %q is not an http or https URL", c.URL)
		}
	}
	switch {
	case c.Timeout <= 0:
		return errors.New("approvals: approval-webhook-timeout: must be positive")
	case c.Attempts < 1:
		return errors.New("approvals: approval-webhook-attempts: must be at least 1")
	}
	return nil
}

// Announcement is the body of the webhook's POST: one approval now pending, its
// record without the arguments.
type Announcement struct {
	Type     string `json:"type"` // AnnouncePending
	Approval Record `json:"approval"`
}

// AnnouncePending is the type of an announcement of a new pending approval.
const AnnouncePending = "approval.pending"

type announcer struct {
	cfg    WebhookConfig
	client *http.Client
	log    *slog.Logger
}

func newAnnouncer(cfg WebhookConfig, log *slog.Logger) *announcer {
	return &announcer{cfg: cfg, client: &http.Client{Timeout: cfg.Timeout}, log: log}
}

// announce POSTs r to the webhook off the call's path: a webhook that is slow or down
// never holds the call up, and the approval waits on the dashboard either way.
func (a *Approvals) announce(r *Record) {
	if a.hook == nil {
		return
	}
	// The arguments stay in the bucket, for the dashboard: a webhook's receiver
	// (a chat channel, a ticket) is told the call by its digest only.
	shown := *r
	shown.Arguments = ""
	body, err := json.Marshal(Announcement{Type: AnnouncePending, Approval: shown})
	if err != nil {
		a.log.Error("approvals: webhook: encode", "approval", r.ID, "err", err)
		return
	}
	a.wg.Add(1)
	go func() {
		defer a.wg.Done()
		a.hook.post(r.ID, body)
	}()
}

func (h *announcer) post(id string, body []byte) {
	wait := time.Second
	for attempt := 1; ; attempt++ {
		err := h.try(body)
		if err == nil {
			return
		}
		if attempt >= h.cfg.Attempts {
			h.log.Warn("approvals: webhook: giving up announcing an approval", "approval", id, "attempts", attempt, "err", err)
			return
		}
		time.Sleep(min(wait, h.cfg.Timeout))
		wait *= 2
	}
}

func (h *announcer) try(body []byte) error {
	ctx, cancel := context.WithTimeout(context.Background(), h.cfg.Timeout)
	defer cancel()
	req, err := http.NewRequestWithContext(ctx, http.MethodPost, h.cfg.URL, bytes.NewReader(body))
	if err != nil {
		return err
	}
	req.Header.Set("Content-Type", "application/json")
	resp, err := h.client.Do(req)
	if err != nil {
		return err
	}
	_ = resp.Body.Close()
	if resp.StatusCode/100 != 2 {
		return fmt.Errorf("answered %s", resp.Status)
	}
	return nil
}
