package registry

import (
	"context"
	"errors"

	"github.com/toolgate/toolgate/bus/wire"
)

func connKey(account, tool string) string { return account + "." + tool }

// Connect makes tool available to account and gives the connection its SSE link. It
// returns ErrExists if they are connected already.
func (s *Store) Connect(ctx context.Context, account, tool string, signer *LinkSigner) (*Connection, error) {
	if err := s.lasting(ctx, func(ctx context.Context, _ bool) error {
		_, err := s.Account(ctx, account)
		return err
	}); err != nil {
		if errors.Is(err, ErrNotFound) {
			return nil, invalidf("account %q does not exist", account)
		}
		return nil, err
	}
	if err := wire.CheckToolID(tool); err != nil {
		return nil, invalidf("%v", err)
	}
	t := now()
	c := Connection{Account: account, Tool: tool, ConnectedAt: t, LinkNonce: NewID(""), LinkCreatedAt: t}
	if err := s.lastingCreate(ctx, s.conns, connKey(account, tool), c); err != nil {
		return nil, err
	}
	link := Link{Account: account, Tool: tool, CreatedAt: t}
	if err := s.lastingPut(ctx, s.links, Hash(signer.Token(account, tool, c.LinkNonce)), link); err != nil {
		return nil, err
	}
	return &c, nil
}

// Connection reads one connection.
func (s *Store) Connection(ctx context.Context, account, tool string) (*Connection, error) {
	c, _, err := getJSON[Connection](ctx, s, s.conns, connKey(account, tool))
	return c, err
}

// Connections lists an account's connections.
func (s *Store) Connections(ctx context.Context, account string) ([]Connection, error) {
	var out []Connection
	err := eachJSON(ctx, s, s.conns, func(_ string, c Connection) {
		if c.Account == account {
			out = append(out, c)
		}
	})
	return out, err
}

// Disconnect removes a connection and its link. With a nil signer the link record is
// found by scanning, as when an account is deleted.
func (s *Store) Disconnect(ctx context.Context, account, tool string, signer *LinkSigner) error {
	var c *Connection
	err := s.lastingEvery(ctx, s.opts.RevokeAttempt, func(ctx context.Context, _ bool) (err error) {
		c, err = s.Connection(ctx, account, tool)
		return err
	})
	if err != nil {
		return err
	}
	if err := s.deleteLinks(ctx, c, signer); err != nil {
		return err
	}
	return s.revokingDelete(ctx, s.conns, connKey(account, tool), RevokedConnection, connKey(account, tool))
}

// revokeLink deletes the link filed under hash, and announces it.
func (s *Store) revokeLink(ctx context.Context, hash string) error {
	return s.revokingDelete(ctx, s.links, hash, RevokedLink, hash)
}

func (s *Store) deleteLinks(ctx context.Context, c *Connection, signer *LinkSigner) error {
	if signer != nil {
		return s.revokeLink(ctx, Hash(signer.Token(c.Account, c.Tool, c.LinkNonce)))
	}
	var hashes []string
	if err := s.lasting(ctx, func(ctx context.Context, _ bool) error {
		hashes = nil
		return eachJSON(ctx, s, s.links, func(hash string, l Link) {
			if l.Account == c.Account && l.Tool == c.Tool {
				hashes = append(hashes, hash)
			}
		})
	}); err != nil {
		return err
	}
	for _, h := range hashes {
		if err := s.revokeLink(ctx, h); err != nil {
			return err
		}
	}
	return nil
}

// RotateLink gives a connection a new SSE link; the old one stops working.
func (s *Store) RotateLink(ctx context.Context, account, tool string, signer *LinkSigner) (*Connection, error) {
	// Tried as a revocation is (Options.RevokeAttempt): the old link must stop working as
	// soon as the bucket can take it. The old nonce is the one first read: an attempt
	// that failed without an answer may have written a nonce whose link was never made.
	var old string
	var c *Connection
	err := s.lastingEvery(ctx, s.opts.RevokeAttempt, func(ctx context.Context, _ bool) (err error) {
		c, err = updateJSON(ctx, s, s.conns, connKey(account, tool), func(c *Connection) error {
			if old == "" {
				old = c.LinkNonce
			}
			c.LinkNonce = NewID("")
			c.LinkCreatedAt = now()
			return nil
		})
		return err
	})
	if err != nil {
		return nil, err
	}
	link := Link{Account: account, Tool: tool, CreatedAt: c.LinkCreatedAt}
	if err := s.lastingPut(ctx, s.links, Hash(signer.Token(account, tool, c.LinkNonce)), link); err != nil {
		return nil, err
	}
	if err := s.revokeLink(ctx, Hash(signer.Token(account, tool, old))); err != nil {
		return nil, err
	}
	return c, nil
}
