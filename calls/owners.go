package calls

import (
	"context"
	"errors"
	"fmt"
	"strings"

	"github.com/nats-io/nats.go/jetstream"

	"github.com/toolgate/toolgate/registry"
)

// Each record has a key beside it that names its owner, "owner.<account>.<owner>.<id>"
// (owner: "key-<key id>" or "link-<tool>"), so that the calls of one caller are listed
// by a filter on the bucket's keys, without reading anyone else's. It is written when
// the record is made, and expires with the bucket's TTL as the record does.

const ownerPrefix = "owner."

// ownerToken names p in an owner key; "" when p owns no call.
func ownerToken(keyID, link string) string {
	switch {
	case keyID != "":
		return "key-" + keyID
	case link != "":
		return "link-" + link
	}
	return ""
}

func ownerKey(r *Record) string {
	return ownerPrefix + r.Account + "." + ownerToken(r.KeyID, r.Link) + "." + r.ID
}

// List lists p's calls, at most max of them, in no particular order.
func (cs *Calls) List(ctx context.Context, p registry.Principal, max int) ([]*Record, error) {
	owner := ownerToken(keyIDOf(p), p.Tool)
	if owner == "" || strings.ContainsAny(p.Account+owner, ".*> ") {
		return nil, nil
	}
	lister, err := cs.recs.kv.ListKeysFiltered(ctx, ownerPrefix+p.Account+"."+owner+".*")
	if errors.Is(err, jetstream.ErrNoKeysFound) {
		return nil, nil
	}
	if err != nil {
		return nil, fmt.Errorf("calls: list: %w", err)
	}
	defer func() { _ = lister.Stop() }()
	var out []*Record
	for key := range lister.Keys() {
		if len(out) == max {
			break
		}
		id := key[strings.LastIndexByte(key, '.')+1:]
		rec, _, err := cs.owned(ctx, p, id)
		if errors.Is(err, ErrNotFound) {
			continue // expired
		}
		if err != nil {
			return nil, err
		}
		out = append(out, rec)
	}
	return out, nil
}

func keyIDOf(p registry.Principal) string {
	if p.Key != nil {
		return p.Key.ID
	}
	return ""
}
