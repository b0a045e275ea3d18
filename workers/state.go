package workers

import (
	"context"
	"errors"
	"fmt"
	"strings"

	"github.com/nats-io/nats.go"
	"github.com/nats-io/nats.go/jetstream"

	"github.com/toolgate/toolgate/bus/wire"
)

// ErrNoState is State finding no state bucket for the tool: an admin makes it
// (`toolgate state create TOOL`).
var ErrNoState = errors.New("workers: the tool has no state bucket")

// Inbox makes a connection's inboxes the tool's own (_INBOX.tool.<tool>), the only
// ones a tool's credentials let it receive on. A connection that uses its tool's
// state bucket (State) needs it: the answers of the JetStream client come to the
// connection's inboxes. One connection serving several tools takes one of their
// inboxes.
func Inbox(tool string) nats.Option {
	return nats.CustomInboxPrefix(strings.TrimSuffix(wire.WorkerInbox(tool), "."))
}

// State opens the tool's state bucket, a JetStream key-value bucket
// (wire.StateBucket) that the tool's workers keep whatever they need between calls
// in, shared by all the tool's instances. The tool's credentials allow it and no
// other tool's: reading, writing, creating, updating, deleting and purging keys (with
// a TTL of their own, jetstream.KeyTTL), watching, listing keys and history, and its
// status. Making the bucket, changing its settings or deleting it is the admin's:
// State returns ErrNoState until it is made. With a tool's credentials the connection
// must have been made with Inbox(tool). State may be called before Run.
func (w *Worker) State(ctx context.Context) (jetstream.KeyValue, error) {
	js, err := jetstream.New(w.nc)
	if err != nil {
		return nil, fmt.Errorf("workers: state: %w", err)
	}
	bucket := wire.StateBucket(w.tool.ID)
	kv, err := js.KeyValue(ctx, bucket)
	switch {
	case errors.Is(err, jetstream.ErrBucketNotFound):
		return nil, fmt.Errorf("%w: %s (made by an admin: toolgate state create %s)", ErrNoState, bucket, w.tool.ID)
	case err != nil && !strings.HasPrefix(w.nc.Opts.InboxPrefix+".", "_INBOX.tool."):
		return nil, fmt.Errorf("workers: state: %s: %w (with a tool's credentials, connect with workers.Inbox(%q))", bucket, err, w.tool.ID)
	case err != nil:
		return nil, fmt.Errorf("workers: state: %s: %w", bucket, err)
	}
	return kv, nil
}
