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

// DeleteAccount removes an account with its keys, connections and links.
func (s *Store) DeleteAccount(ctx context.Context, id string) error {
	if _, err := s.Account(ctx, id); err != nil {
		return err
	}
	conns, err := s.Connections(ctx, id)
	if err != nil {
		return err
	}
	for _, c := range conns {
		if err := s.Disconnect(ctx, c.Account, c.Tool, nil); err != nil {
			return err
		}
	}
	keys, err := s.Keys(ctx, id)
	if err != nil {
		return err
	}
	for hash := range keys {
		if err := s.lastingDelete(ctx, s.keys, hash); err != nil {
			return err
		}
	}
	return s.lastingDelete(ctx, s.accounts, id)
}

// Accounts lists every account.
func (s *Store) Accounts(ctx context.Context) ([]Account, error) {
	var out []Account
	err := eachJSON(ctx, s, s.accounts, func(_ string, a Account) { out = append(out, a) })
	return out, err
}
