package mcpbridge

import (
	"context"
	"time"

	"github.com/toolgate/toolgate/bus/wire"
)

// A server may move to another authorization server: its protected resource
// metadata names the new one, and it refuses (401) the tokens of the old one. On a
// refusal the bridge looks for the server's provider again, at most once a
// rediscoverEvery, and when the authorization server changed, the tool's record
// declares the new one: an account's next authorization goes there, with a client
// of the new server's own (the edges register again, never showing it the old
// server's client).

// rediscoverEvery bounds how often a refusal has the bridge look again.
const rediscoverEvery = time.Second

// moving is what oauthState holds of a provider found again.
type moving struct {
	moved    *wire.OAuthProvider // found, not yet declared
	looking  bool
	lookedAt time.Time
}

// rediscover looks for the server's provider again, in the background. o.mu is
// held.
func (b *Bridge) rediscover() {
	o := b.oauth
	if o.looking || time.Since(o.lookedAt) < rediscoverEvery {
		return
	}
	o.looking = true
	issuer, authURL, tokenURL := o.provider.Issuer, o.provider.AuthorizationURL, o.provider.TokenURL
	go func() {
		ctx, cancel := context.WithTimeout(b.life, b.cfg.StartTimeout)
		defer cancel()
		p, err := DiscoverOAuth(ctx, b.cfg.URL, *b.cfg.OAuth)
		moved := err == nil && (p.Issuer != issuer || p.AuthorizationURL != authURL || p.TokenURL != tokenURL)
		o.mu.Lock()
		o.looking, o.lookedAt = false, time.Now()
		if moved {
			o.moved = p
		}
		o.mu.Unlock()
		switch {
		case err != nil:
			b.log.Warn("the server refused a token, and its provider could not be found again", "err", err)
		case moved:
			b.log.Info("the server moved to another authorization server; each account connects there", "issuer", p.Issuer)
			select {
			case b.changed <- struct{}{}: // the record is put again, with the new provider (stepUp)
			default:
			}
		}
	}()
}

// move makes the provider found again the one the tool declares. o.mu is held.
func (o *oauthState) move() {
	if o.moved != nil {
		*o.provider, o.moved = *o.moved, nil
	}
}
