package registry

import (
	"context"
	"errors"
	"fmt"
	"time"

	"github.com/nats-io/nats.go"
	"github.com/nats-io/nats.go/jetstream"

	"github.com/toolgate/toolgate/bus/wire"
)

// DefaultStateMaxBytes is how much a tool's state bucket holds unless told otherwise.
const DefaultStateMaxBytes = 64 << 20

// MaxStateMaxBytes is the most a tool's state bucket may be made to hold: state
// beyond a gigabyte belongs in a store of the tool's own.
const MaxStateMaxBytes = 1 << 30

// StateOptions are a tool's state bucket's settings.
type StateOptions struct {
	Replicas int // 1 on a single node, 3 in a cluster; 0 for 1
	// MaxBytes bounds what the bucket holds, its history and markers included; a write
	// past it is refused (the bucket discards nothing). 0 for DefaultStateMaxBytes.
	MaxBytes int64
}

// Validate names the first setting that is wrong.
func (o StateOptions) Validate() error {
	if o.Replicas < 0 || o.Replicas > 5 {
		return errors.New("state: replicas: must be from 1 to 5, or 0 for 1")
	}
	if o.MaxBytes < 0 || o.MaxBytes > MaxStateMaxBytes {
		return fmt.Errorf("state: max bytes: must be from 1 to %d, or 0 for %d", int64(MaxStateMaxBytes), DefaultStateMaxBytes)
	}
	return nil
}

// stateMarkerTTL is how long a state bucket keeps the marker of a key that expired
// (written with jetstream.KeyTTL), so that a watcher sees it go.
const stateMarkerTTL = time.Minute

// CreateToolState makes tool's state bucket (wire.StateBucket) on nc, which must be
// allowed to create streams (the admin role's credentials), and reports whether it
// made it. A bucket that exists is kept as it is, whatever its settings: an operator
// may have changed them. Keys may be written with a TTL of their own
// (jetstream.KeyTTL).
func CreateToolState(ctx context.Context, nc *nats.Conn, tool string, o StateOptions) (bool, error) {
	if err := wire.CheckToolID(tool); err != nil {
		return false, fmt.Errorf("state: %w", err)
	}
	if err := o.Validate(); err != nil {
		return false, err
	}
	js, err := jetstream.New(nc)
	if err != nil {
		return false, fmt.Errorf("state: jetstream: %w", err)
	}
	cfg := jetstream.KeyValueConfig{
		Bucket:         wire.StateBucket(tool),
		Description:    "the state of tool " + tool + "'s workers",
		Replicas:       max(o.Replicas, 1),
		MaxBytes:       o.MaxBytes,
		LimitMarkerTTL: stateMarkerTTL,
	}
	if cfg.MaxBytes == 0 {
		cfg.MaxBytes = DefaultStateMaxBytes
	}
	found, err := findBucket(ctx, js, cfg.Bucket)
	if err != nil || found != nil {
		return false, err
	}
	made := false
	err = retry(ctx, cfg.Bucket, func(ctx context.Context) error {
		_, err := js.CreateKeyValue(ctx, cfg)
		if errors.Is(err, jetstream.ErrBucketExists) {
			return nil // another process made it first
		}
		made = err == nil
		return err
	})
	if err == nil {
		_, err = madeBucket(ctx, js, cfg.Bucket)
	}
	if err != nil {
		return false, fmt.Errorf("state: %s: %w", cfg.Bucket, err)
	}
	return made, nil
}
