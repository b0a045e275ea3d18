package busauth

import (
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"time"

	"github.com/nats-io/nats.go"
)

// ErrNoServerStored is Push hearing from no server that stored the account JWT.
var ErrNoServerStored = errors.New("busauth: no NATS server stored the account JWT")

// Stored is one server's answer to an account JWT it was sent.
type Stored struct {
	Server string // the server's name
	Err    error  // why it refused the JWT, or nil
}

// Push sends an account JWT to every server of the system nc (a system account
// user's connection) is part of, on $SYS.REQ.CLAIMS.UPDATE. Each server of the
// NATS-based resolver stores it, applies it at once (a revoked user is
// disconnected), and answers; servers that are down take it from the others when
// they come back. Push collects the answers for settle after the first one and
// returns them; it fails when none came, or when any server refused the JWT.
func Push(ctx context.Context, nc *nats.Conn, accountJWT string, settle time.Duration) ([]Stored, error) {
	inbox := nc.NewRespInbox()
	answers := make(chan *nats.Msg, 64)
	sub, err := nc.ChanSubscribe(inbox, answers)
	if err != nil {
		return nil, fmt.Errorf("busauth: push: %w", err)
	}
	defer sub.Unsubscribe()
	if err := nc.PublishRequest(claimsUpdateSubject, inbox, []byte(accountJWT)); err != nil {
		return nil, fmt.Errorf("busauth: push: %w", err)
	}
	if err := nc.FlushWithContext(ctx); err != nil {
		return nil, fmt.Errorf("busauth: push: %w", err)
	}
	var stored []Stored
	var refused []error
	var quiet <-chan time.Time
	for {
		select {
		case m := <-answers:
			var a struct {
				Server struct {
					Name string `json:"name"`
				} `json:"server"`
				Error *struct {
					Description string `json:"description"`
				} `json:"error"`
			}
			if err := json.Unmarshal(m.Data, &a); err != nil {
				return stored, fmt.Errorf("busauth: push: undecodable answer: %w", err)
			}
			s := Stored{Server: a.Server.Name}
			if a.Error != nil {
				s.Err = errors.New(a.Error.Description)
				refused = append(refused, fmt.Errorf("server %s: %w", s.Server, s.Err))
			}
			stored = append(stored, s)
			if quiet == nil {
				quiet = time.After(settle)
			}
		case <-quiet:
			if len(refused) > 0 {
				return stored, fmt.Errorf("busauth: push: %w", errors.Join(refused...))
			}
			return stored, nil
		case <-ctx.Done():
			if len(stored) > 0 && len(refused) == 0 {
				return stored, nil
			}
			if len(refused) > 0 {
				return stored, fmt.Errorf("busauth: push: %w", errors.Join(refused...))
			}
			return nil, fmt.Errorf("%w: %w", ErrNoServerStored, ctx.Err())
		}
	}
}
