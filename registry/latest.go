package registry

import (
	"context"
	"encoding/json"
	"fmt"

	"github.com/nats-io/nats.go"
	"github.com/nats-io/nats.go/jetstream"
)

// latest reads the newest revision of key in kv from the leader of the bucket's
// stream (see ReadLatest).
//
// The store's reads decide what an administrator's change does (a connection or a key
// needs its account) and answer administrators, so they read this way. The view does
// not: it follows the buckets.
func (s *Store) latest(ctx context.Context, kv jetstream.KeyValue, key string) ([]byte, uint64, error) {
	return ReadLatest(ctx, s.js, kv.Bucket(), key)
}

// ReadLatest reads the newest revision of key in the bucket from the leader of the
// bucket's stream, and the revision; ErrNotFound when the key has none or it was
// deleted.
//
// kv.Get sends a direct get, which every node of a replicated stream answers from its
// own copy (a client's request goes to the copy on its own server), and a follower may
// not yet hold a write that the leader has acknowledged: an account created a moment
// before, through another node or through this one, is "not found", and a tool's state
// written by one of its instances reads back older through another. The leader
// ($JS.API.STREAM.MSG.GET) holds every write it acknowledged.
func ReadLatest(ctx context.Context, js jetstream.JetStream, bucket, key string) ([]byte, uint64, error) {
	if _, ok := ctx.Deadline(); !ok {
		var cancel context.CancelFunc
		ctx, cancel = context.WithTimeout(ctx, js.Options().DefaultTimeout)
		defer cancel()
	}
	req, err := json.Marshal(struct {
		LastBySubject string `json:"last_by_subj"`
	}{"$KV." + bucket + "." + key})
	if err != nil {
		return nil, 0, err
	}
	m, err := js.Conn().RequestWithContext(ctx, jetstream.DefaultAPIPrefix+"STREAM.MSG.GET.KV_"+bucket, req)
	if err != nil {
		return nil, 0, fmt.Errorf("registry: get %s/%s: %w", bucket, key, err)
	}
	var resp struct {
		Error   *jetstream.APIError `json:"error"`
		Message *struct {
			Seq    uint64 `json:"seq"`
			Header []byte `json:"hdrs"`
			Data   []byte `json:"data"`
		} `json:"message"`
	}
	if err := json.Unmarshal(m.Data, &resp); err != nil {
		return nil, 0, fmt.Errorf("registry: get %s/%s: %w", bucket, key, err)
	}
	switch {
	case resp.Error != nil && resp.Error.ErrorCode == jetstream.JSErrCodeMessageNotFound:
		return nil, 0, ErrNotFound
	case resp.Error != nil:
		return nil, 0, fmt.Errorf("registry: get %s/%s: %w", bucket, key, resp.Error)
	case resp.Message == nil:
		return nil, 0, fmt.Errorf("registry: get %s/%s: %w", bucket, key, jetstream.ErrInvalidJetStreamResponse)
	}
	if len(resp.Message.Header) > 0 {
		h, err := nats.DecodeHeadersMsg(resp.Message.Header)
		if err != nil {
			return nil, 0, fmt.Errorf("registry: get %s/%s: %w", bucket, key, err)
		}
		if deleted(h) {
			return nil, 0, ErrNotFound
		}
	}
	return resp.Message.Data, resp.Message.Seq, nil
}

// deleted reports whether a bucket's message with headers h marks its key deleted: a
// delete or a purge, or the marker the server leaves when a key's TTL ends it.
func deleted(h nats.Header) bool {
	if op := h.Get("KV-Operation"); op != "" {
		return op == "DEL" || op == "PURGE"
	}
	return h.Get(jetstream.MarkerReasonHeader) != ""
}
