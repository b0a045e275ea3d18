package registry

import (
	"context"
)

func presenceKey(tool, instance string) string { return tool + "." + instance }

// PutPresence records (or refreshes) a live worker instance.
func (s *Store) PutPresence(ctx context.Context, p Presence) error {
	return putJSON(ctx, s.presence, presenceKey(p.Tool, p.Instance), p)
}

// DeletePresence removes a worker instance at once, as a clean shutdown does.
func (s *Store) DeletePresence(ctx context.Context, tool, instance string) error {
	return deleteKey(ctx, s.presence, presenceKey(tool, instance))
}
