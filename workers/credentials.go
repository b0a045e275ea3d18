package workers

import (
	"errors"
	"fmt"
	"maps"

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
			c.creds, c.credsErr = wire.OpenCredentials(c.w.cfg.sealKey, c.sealed, c.Account, c.Tool)
			if c.credsErr != nil {
				c.credsErr = fmt.Errorf("workers: %w", c.credsErr)
			}
		}
	})
	return maps.Clone(c.creds), c.credsErr
}
