package registry

import (
	"context"

	"github.com/toolgate/toolgate/bus/wire"
)

// CreateAccount writes a new account; ErrExists if the id is taken.
func (s *Store) CreateAccount(ctx context.Context, a Account) (*Account, error) {
	if err := wire.CheckToolID(a.ID); err != nil { // account ids are key tokens too
		return nil, invalidf("account %v", err)
	}
	if a.CreatedAt.IsZero() {
		a.CreatedAt = now()
	}
	if err := s.lastingCreate(ctx, s.accounts, a.ID, a); err != nil {
		return nil, err
	}
	return &a, nil
}

// Account reads an account.
func (s *Store) Account(ctx context.Context, id string) (*Account, error) {
	a, _, err := getJSON[Account](ctx, s, s.accounts, id)
	return a, err
}

// UpdateAccount changes an account with compare-and-set.
func (s *Store) UpdateAccount(ctx context.Context, id string, change func(*Account) error) (*Account, error) {
	return lastingUpdate(ctx, s, s.accounts, id, change)
}

// AccountSettled reads an account as Account does, tried as a revocation's write is
// (Options.RevokeAttempt, for up to WriteWait) while the bucket's stream has no leader: for
// the changes that take something away, which must not fail for an election.
func (s *Store) AccountSettled(ctx context.Context, id string) (*Account, error) {
	var a *Account
	err := s.lastingEvery(ctx, s.opts.RevokeAttempt, func(ctx context.Context, _ bool) (err error) {
		a, err = s.Account(ctx, id)
		return err
	})
	return a, err
}

// DeleteAccount removes an account with its keys, connections and links, announcing
// each (see Revocation).
func (s *Store) DeleteAccount(ctx context.Context, id string) error {
	if _, err := s.AccountSettled(ctx, id); err != nil {
		return err
	}
	var conns []Connection
	if err := s.lasting(ctx, func(ctx context.Context, _ bool) (err error) {
		conns, err = s.Connections(ctx, id)
		return err
	}); err != nil {
		return err
	}
	for _, c := range conns {
		if err := s.Disconnect(ctx, c.Account, c.Tool, nil); err != nil {
			return err
		}
	}
	var keys map[string]Key
	if err := s.lasting(ctx, func(ctx context.Context, _ bool) (err error) {
		keys, err = s.Keys(ctx, id)
		return err
	}); err != nil {
		return err
	}
	for hash := range keys {
		if err := s.revokingDelete(ctx, s.keys, hash, RevokedKey, hash); err != nil {
			return err
		}
	}
	return s.revokingDelete(ctx, s.accounts, id, RevokedAccount, id)
}

// Accounts lists every account.
func (s *Store) Accounts(ctx context.Context) ([]Account, error) {
	var out []Account
	err := eachJSON(ctx, s, s.accounts, func(_ string, a Account) { out = append(out, a) })
	return out, err
}
