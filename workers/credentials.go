package workers

import (
	"errors"
	"fmt"
	"maps"
	"sync"

	"github.com/nats-io/nkeys"

	"github.com/toolgate/toolgate/bus/wire"
)

// ErrNoCredentials: the call brought no connection values (the tool declares no
// Connection fields, or the account set none of them).
var ErrNoCredentials = errors.New("workers: the call brings no connection values")

// Credentials are the calling account's values for its connection to the tool, by
// field name (Tool.Connection), opened with the tool's seal key: only the tool's
// workers can open them, and only for the account and tool they were sealed for.
// Every field the tool requires is present: the gateway refuses (connection_required)
// a call of an account that has not set one. The map is the handler's own; never log
// it. The error is ErrNoCredentials when the call brought none, or says why the
// values do not open (sealed to another key: an instance with another seal key
// rewrote the tool's record).
func (c *Call) Credentials() (map[string]string, error) {
	c.credsOnce.Do(func() {
		switch {
		case c.sealed == "":
			c.credsErr = ErrNoCredentials
		case c.w == nil || c.w.cfg.sealKey == nil:
			c.credsErr = errors.New("workers: the call brings connection values, and this worker has no seal key")
		default:
			c.creds, c.credsErr = c.w.opened.open(c.w.cfg.sealKey, c.sealed, c.Account, c.Tool)
		}
	})
	return maps.Clone(c.creds), c.credsErr
}

// openedCredentials keeps what the worker opened, by the sealed value: an edge seals
// a record's values once per revision, so an account's calls bring the same sealed
// value until it changes them, and opening one (an X25519 exchange) costs more than
// most calls.
type openedCredentials struct {
	mu     sync.Mutex
	values map[string]map[string]string
}

// maxOpened bounds openedCredentials: past it, it starts again empty.
const maxOpened = 1024

func (o *openedCredentials) open(kp nkeys.KeyPair, sealed, account, tool string) (map[string]string, error) {
	key := account + "\x00" + tool + "\x00" + sealed
	o.mu.Lock()
	values, ok := o.values[key]
	o.mu.Unlock()
	if ok {
		return values, nil
	}
	values, err := wire.OpenCredentials(kp, sealed, account, tool)
	if err != nil {
		return nil, fmt.Errorf("workers: %w", err)
	}
	o.mu.Lock()
	if o.values == nil || len(o.values) >= maxOpened {
		o.values = map[string]map[string]string{}
	}
	o.values[key] = values
	o.mu.Unlock()
	return values, nil
}
