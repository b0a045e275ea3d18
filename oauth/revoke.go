package oauth

import (
	"context"
	"errors"
	"fmt"
	"maps"
	"sync"
	"time"

	"github.com/toolgate/toolgate/registry"
)

// How a revoked grant's tokens stop on every edge: the server announces the
// revocation on the registry's revocation subject (registry.RevokedGrant, the grant's
// record key, never a token) once the grant is gone from the bucket, and Verify asks
// the edge's view what it heard. A token the view cannot answer for goes to the
// grant bucket's leader, as every token did before: one issued before the view last
// began hearing every announcement (it started, or its connection was down) or while
// it is behind, and one older than the view holds a revocation.

// hearMargin widens, on both sides, what Verify leaves to the view: a token issued
// within it of the view's hearing again, or of the end of a revocation's hold, asks
// the leader; a refresh that read its grant just before the revocation mints a token
// a moment after it.
const hearMargin = 2 * time.Second

// holdMargin is added to a revocation's hold past the tokens' lifetime, for the same
// race: a token minted just after the revocation outlives it by that moment.
const holdMargin = time.Minute

// leaderWait bounds the leader's read of a grant; a leader that does not answer (an
// election) leaves the token to what the view heard, as View.Confirm does for keys.
const leaderWait = registry.DefaultConfirmWait

// CheckRevocations makes Verify refuse the tokens of revoked grants: by what view
// heard announced, and by the grant's record in store where the view cannot tell.
// The records are the authorization server's when it was made first (with its
// ServerConfig.UnusedLifetime), or opened here.
func (is *Issuer) CheckRevocations(ctx context.Context, store *registry.Store, view *registry.View) error {
	if is.records == nil {
		rs, err := openRecords(ctx, store, RefreshLifetime)
		if err != nil {
			return err
		}
		is.records = rs
	}
	is.view = view
	return nil
}

// revoked reports whether grant, of a token issued at iat, was revoked.
func (is *Issuer) revoked(ctx context.Context, grant string, iat, now time.Time) bool {
	if is.records == nil {
		return false
	}
	if is.here.has(grant, now) {
		return true
	}
	if is.view != nil {
		if is.view.Snapshot().Revoked(registry.RevokedGrant, grant) {
			return true
		}
		since, current := is.view.Hearing()
		if current && iat.After(since.Add(hearMargin)) && now.Sub(iat) < registry.RevocationHold-hearMargin {
			return false // the view heard every revocation that could touch this token
		}
	}
	ctx, cancel := context.WithTimeout(ctx, leaderWait)
	defer cancel()
	var g Grant
	return errors.Is(is.records.read(ctx, is.records.grants, grant, &g), errNotFound)
}

// revoke removes the grant find finds, and announces its revocation. It is tried as
// the registry's revocations are (registry.Store.Lasting), through a stream's loss
// of its leader: the grant found once is the one removed, whatever the next attempts
// read, and its removal and announcement are made again until they succeed.
func (s *Server) revoke(ctx context.Context, find func(ctx context.Context) (*Grant, error)) error {
	var g *Grant
	return s.store.Lasting(ctx, func(ctx context.Context) error {
		if g == nil {
			found, err := find(ctx)
			if err != nil {
				return err
			}
			g = found
		}
		if g.RefreshHash != "" {
			if err := s.records.remove(ctx, s.records.grants, "refresh."+g.RefreshHash); err != nil {
				return err
			}
		}
		key := grantKey(g.Account, g.ID)
		if err := s.records.remove(ctx, s.records.grants, key); err != nil {
			return err
		}
		return s.announce(ctx, key)
	})
}

// announce tells every edge that grant (its record's key) was revoked; its tokens
// live ttl at most. A failed announcement leaves the edges to the leader's record,
// which they read for the tokens their view cannot answer for.
func (s *Server) announce(ctx context.Context, grant string) error {
	until := time.Now().Add(s.tokenTTL + holdMargin)
	s.issuer.here.add(grant, until)
	err := s.store.Announce(ctx, registry.Revocation{Kind: registry.RevokedGrant, ID: grant, Until: until})
	if err != nil {
		return fmt.Errorf("oauth: announce a grant's revocation: %w", err)
	}
	return nil
}

// revokedHere are the grants this edge revoked, until their tokens expire: the edge
// that answered a revocation refuses the grant's tokens from that answer on, without
// waiting for its own view to hear the announcement.
type revokedHere struct {
	mu    sync.Mutex
	until map[string]time.Time
}

func (r *revokedHere) add(grant string, until time.Time) {
	r.mu.Lock()
	defer r.mu.Unlock()
	if r.until == nil {
		r.until = map[string]time.Time{}
	}
	now := time.Now()
	maps.DeleteFunc(r.until, func(_ string, u time.Time) bool { return now.After(u) })
	r.until[grant] = until
}

func (r *revokedHere) has(grant string, now time.Time) bool {
	r.mu.Lock()
	defer r.mu.Unlock()
	u, ok := r.until[grant]
	return ok && now.Before(u)
}
