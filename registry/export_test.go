package registry

import (
	"context"
	"log/slog"
)

// MarkBehind tells v that the follower of bucket is behind or current again, as the
// follower does when its consumer is lost or caught up: for the tests of View.Confirm,
// which cannot make a follower lag on purpose.
func MarkBehind(v *View, bucket string, behind bool) { v.current[viewBucket[bucket]].Store(!behind) }

// NewViewNotFollowing is NewView with no follower for the buckets named: the view
// holds nothing of them but what it learns, and counts as behind, as a view does
// whose followers' consumers cannot be made.
func NewViewNotFollowing(ctx context.Context, store *Store, log *slog.Logger, buckets ...string) (*View, error) {
	return newView(ctx, store, log, buckets)
}
