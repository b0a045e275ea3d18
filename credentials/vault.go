package credentials

import (
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"maps"
	"slices"
	"strings"
	"sync/atomic"
	"time"

	"github.com/nats-io/nats.go/jetstream"
	"github.com/nats-io/nkeys"

	"github.com/toolgate/toolgate/bus/wire"
	"github.com/toolgate/toolgate/registry"
)

// Bucket holds one record per connection with values (account.tool), each an
// Envelope: ciphertext only.
const Bucket = "tg-credentials"

// Record is a connection's values at rest: which fields are set, and the values
// encrypted.
type Record struct {
	Account string `json:"account"`
	Tool    string `json:"tool"`
	// Fields says of each field set when it was set and its value's fingerprint.
	Fields map[string]FieldState `json:"fields"`
	// Grant is the account's OAuth grant, for a tool whose connection declares a
	// provider: its tokens are among the values.
	Grant     *Grant    `json:"grant,omitempty"`
	Envelope  Envelope  `json:"envelope"`
	UpdatedAt time.Time `json:"updated_at"`
}

// FieldState is what may be shown of a field's value.
type FieldState struct {
	SetAt       time.Time `json:"set_at"`
	Fingerprint string    `json:"fingerprint"`
}

// Vault reads and writes the credentials bucket with the deployment's keys.
type Vault struct {
	kv     jetstream.KeyValue
	js     jetstream.JetStream
	store  *registry.Store
	keys   *Keyring
	sender nkeys.KeyPair          // this edge's curve key, which seals values to tools
	copy   atomic.Pointer[copyOf] // the bucket as this process follows it (Follow); nil: none
	oauth  *oauth                 // nil: no OAuth connections (EnableOAuth)
}

// Open opens (or makes) the credentials bucket beside the registry's.
func Open(ctx context.Context, store *registry.Store, keys *Keyring, update bool) (*Vault, error) {
	kv, err := store.OpenBucket(ctx, jetstream.KeyValueConfig{Bucket: Bucket,
		Description: "toolgate connection credentials, encrypted"}, update)
	if err != nil {
		return nil, err
	}
	sender, err := nkeys.CreateCurveKeys()
	if err != nil {
		return nil, fmt.Errorf("credentials: curve key: %w", err)
	}
	return &Vault{kv: kv, js: store.JetStream(), store: store, keys: keys, sender: sender}, nil
}

// Keys are the vault's KEKs.
func (v *Vault) Keys() *Keyring { return v.keys }

func recordKey(account, tool string) string { return account + "." + tool }

// Read returns the record of account's connection to tool and its revision;
// registry.ErrNotFound when it has none.
func (v *Vault) Read(ctx context.Context, account, tool string) (*Record, uint64, error) {
	b, rev, err := registry.ReadLatest(ctx, v.js, Bucket, recordKey(account, tool))
	if err != nil {
		return nil, 0, err
	}
	var r Record
	if err := json.Unmarshal(b, &r); err != nil {
		return nil, 0, fmt.Errorf("credentials: decode %s: %w", recordKey(account, tool), err)
	}
	return &r, rev, nil
}

// Lookup returns the record of account's connection to t (nil: none) from the copy
// Follow keeps, or from the bucket's stream leader when the copy has none or one that
// lacks a field t requires (a write the copy has not seen yet), and its revision.
func (v *Vault) Lookup(ctx context.Context, account string, t *wire.Tool) (*Record, uint64, error) {
	if c := v.copy.Load().lookup(account, t.ID); c != nil && len(Missing(t.Connection, c.r)) == 0 {
		return c.r, c.rev, nil
	}
	r, rev, err := v.Read(ctx, account, t.ID)
	if errors.Is(err, registry.ErrNotFound) {
		return nil, 0, nil
	}
	return r, rev, err
}

// Missing are the fields conn requires that r (nil: none set) lacks, and
// MissingOAuth when conn declares a provider and r holds no grant, or one refused.
func Missing(conn *wire.Connection, r *Record) []string {
	var missing []string
	if conn == nil {
		return nil
	}
	for _, f := range conn.Fields {
		if _, ok := r.fields()[f.Name]; !ok && !f.Optional {
			missing = append(missing, f.Name)
		}
	}
	if conn.OAuth != nil && (r == nil || r.Grant == nil || r.Grant.Refused != "") {
		missing = append(missing, MissingOAuth)
	}
	return missing
}

// Reauthorize reports whether r's grant was refused: its account must authorize the
// tool again.
func Reauthorize(r *Record) bool {
	return r != nil && r.Grant != nil && r.Grant.Refused != ""
}

func (r *Record) fields() map[string]FieldState {
	if r == nil {
		return nil
	}
	return r.Fields
}

// Update changes the values of account's connection to tool, whose record declares
// conn: each value of values is set, each nil one removed; with replace, every field
// not in values is removed too. A field conn does not declare is refused, with its
// name, before anything is written.
func (v *Vault) Update(ctx context.Context, account, tool string, conn *wire.Connection, values map[string]*string, replace bool) (*Record, error) {
	var unknown []string
	for name, val := range values {
		switch {
		case conn == nil || conn.Field(name) == nil:
			unknown = append(unknown, name)
		case val != nil && *val == "":
			return nil, fmt.Errorf("%w: field %s: empty (to remove a field, PATCH it with null, or DELETE the credentials)", registry.ErrInvalid, name)
		}
	}
	if len(unknown) > 0 {
		slices.Sort(unknown)
		return nil, fmt.Errorf("%w: tool %s declares no connection field %s", registry.ErrInvalid, tool, strings.Join(unknown, ", "))
	}
	for {
		r, rev, err := v.Read(ctx, account, tool)
		if err != nil && !errors.Is(err, registry.ErrNotFound) {
			return nil, err
		}
		current := map[string]string{}
		switch {
		case r == nil:
			r = &Record{Account: account, Tool: tool}
		case replace && r.Grant != nil:
			// The values are replaced, the grant kept: an envelope this edge cannot
			// open loses it, as a replace loses any value.
			if current, err = v.keys.open(&r.Envelope, account, tool); err != nil {
				current, r.Grant = map[string]string{}, nil
			}
		case !replace:
			// Replacing needs nothing of what is there: a record wrapped under a key
			// this edge no longer holds can still be set anew.
			if current, err = v.keys.open(&r.Envelope, account, tool); err != nil {
				return nil, err
			}
		}
		next := v.merge(r, current, values, replace)
		clear(current)
		if err := v.write(ctx, r, next, rev); errors.Is(err, errConflict) {
			continue
		} else if err != nil {
			return nil, err
		}
		return r, nil
	}
}

// merge applies values to current into r's field states, and returns the values
// that result.
func (v *Vault) merge(r *Record, current map[string]string, values map[string]*string, replace bool) map[string]string {
	next := map[string]string{}
	states := map[string]FieldState{}
	if !replace {
		maps.Copy(next, current)
		maps.Copy(states, r.Fields)
	}
	for _, name := range []string{grantAccess, grantRefresh, grantType} {
		if val, ok := current[name]; ok {
			next[name] = val
		}
	}
	now := time.Now().UTC().Truncate(time.Millisecond)
	for name, val := range values {
		if val == nil {
			delete(next, name)
			delete(states, name)
			continue
		}
		next[name] = *val
		states[name] = FieldState{SetAt: now, Fingerprint: v.keys.Fingerprint(r.Account, r.Tool, name, *val)}
	}
	r.Fields, r.UpdatedAt = states, now
	return next
}

var errConflict = errors.New("credentials: another writer wrote first")

// write seals values into r and writes it after revision rev (0: a new record);
// errConflict when the record moved on meanwhile.
func (v *Vault) write(ctx context.Context, r *Record, values map[string]string, rev uint64) error {
	env, err := v.keys.seal(values, r.Account, r.Tool)
	clear(values)
	if err != nil {
		return err
	}
	r.Envelope = env
	return v.put(ctx, r, rev)
}

func (v *Vault) put(ctx context.Context, r *Record, rev uint64) error {
	b, err := json.Marshal(r)
	if err != nil {
		return fmt.Errorf("credentials: encode: %w", err)
	}
	key := recordKey(r.Account, r.Tool)
	var written uint64
	if rev == 0 {
		written, err = v.kv.Create(ctx, key, b)
	} else {
		written, err = v.kv.Update(ctx, key, b, rev)
	}
	if errors.Is(err, jetstream.ErrKeyExists) || errors.Is(err, jetstream.ErrKeyRevisionMismatch) {
		return errConflict
	}
	if err != nil {
		return fmt.Errorf("credentials: write %s: %w", key, err)
	}
	v.copy.Load().wrote(key, r, written)
	return nil
}

// Clear removes the values of account's connection to tool; no record is no error.
func (v *Vault) Clear(ctx context.Context, account, tool string) error {
	return v.clear(ctx, recordKey(account, tool))
}

// clear purges the record at key (a purge, not a delete: the bucket keeps no earlier
// revision's ciphertext), takes it out of this process's copy, and announces it, so
// that every edge's copy drops it at once (see registry.Revocation).
func (v *Vault) clear(ctx context.Context, key string) error {
	rev, err := registry.PurgeKeyRev(ctx, v.js, v.kv, key)
	if err != nil {
		return fmt.Errorf("credentials: clear %s: %w", key, err)
	}
	v.copy.Load().cleared(key, rev)
	v.store.Revoked(ctx, registry.RevokedCredentials, key, v.kv, rev)
	return nil
}

// Seal reads account's values for t and seals them to t's key, for a call: the
// HeaderCredentials value ("" when t needs no values, or has no key to seal them to),
// or, when a field t requires is not set, the fields missing. An OAuth grant whose
// access token expires soon is refreshed first (refresh), and only its access token
// is sealed (wire.OAuthTokenField), never its refresh token.
func (v *Vault) Seal(ctx context.Context, account string, t *wire.Tool) (header string, missing []string, err error) {
	if !t.Connection.Needs() {
		return "", nil, nil
	}
	c, err := v.current(ctx, account, t)
	if err != nil {
		return "", nil, err
	}
	if v.oauth.due(c.r) {
		if err := v.refresh(ctx, account, t); err != nil {
			if c.r.Grant.Expiry.Before(time.Now()) {
				return "", nil, err
			}
			// The token still serves: this call goes with it, the next tries again.
			v.log().Warn("credentials: oauth: refresh failed; the access token still serves", "account", account, "tool", t.ID, "err", err)
		} else if c, err = v.current(ctx, account, t); err != nil {
			return "", nil, err
		}
	}
	if missing = Missing(t.Connection, c.r); len(missing) > 0 || c.r == nil || t.Connection.SealKey == "" {
		return "", missing, nil
	}
	// One seal per revision of the record and key of the tool: the header carries
	// nothing but the values, bound to the account and tool, to the tool's workers.
	c.sealMu.Lock()
	defer c.sealMu.Unlock()
	if c.sealKey == t.Connection.SealKey && c.sealed != "" {
		return c.sealed, nil, nil
	}
	values, err := v.keys.open(&c.r.Envelope, account, t.ID)
	if err != nil {
		return "", nil, err
	}
	defer clear(values)
	sent := toolValues(values)
	if header, err = wire.SealCredentials(v.sender, t.Connection.SealKey, account, t.ID, sent); err != nil {
		return "", nil, err
	}
	c.sealKey, c.sealed = t.Connection.SealKey, header
	return header, nil, nil
}

// current is account's record of t as a call needs it: from the copy Follow keeps,
// or from the stream's leader when the copy lacks it or lacks something t requires.
func (v *Vault) current(ctx context.Context, account string, t *wire.Tool) (*copied, error) {
	if c := v.copy.Load().lookup(account, t.ID); c != nil && len(Missing(t.Connection, c.r)) == 0 && !v.oauth.due(c.r) {
		return c, nil
	}
	r, rev, err := v.Read(ctx, account, t.ID)
	if err != nil && !errors.Is(err, registry.ErrNotFound) {
		return nil, err
	}
	if c := v.copy.Load().lookup(account, t.ID); c != nil && c.rev == rev && r != nil {
		return c, nil // the copy's, with its seal
	}
	return &copied{r: r, rev: rev}, nil
}

// toolValues are the values a tool's workers get: the fields, and of a grant only
// its access token.
func toolValues(values map[string]string) map[string]string {
	sent := make(map[string]string, len(values))
	for k, val := range values {
		switch k {
		case grantAccess:
			sent[wire.OAuthTokenField] = val
		case grantRefresh, grantType:
		default:
			sent[k] = val
		}
	}
	return sent
}

// Rotate wraps every record's data key under the current KEK, each compare-and-set
// (a record changed meanwhile is read again); the values' ciphertext is left as it
// is. It returns how many records it wrapped again and how many there are.
func (v *Vault) Rotate(ctx context.Context) (rewrapped, total int, err error) {
	lister, err := v.kv.ListKeys(ctx)
	if errors.Is(err, jetstream.ErrNoKeysFound) {
		return 0, 0, nil
	}
	if err != nil {
		return 0, 0, fmt.Errorf("credentials: list: %w", err)
	}
	var keys []string
	for k := range lister.Keys() {
		keys = append(keys, k)
	}
	for _, k := range keys {
		account, tool, _ := strings.Cut(k, ".")
		for {
			r, rev, err := v.Read(ctx, account, tool)
			if errors.Is(err, registry.ErrNotFound) {
				break
			}
			if err != nil {
				return rewrapped, total, err
			}
			changed, err := v.keys.rewrap(&r.Envelope, connection(account, tool))
			if err != nil {
				return rewrapped, total, err
			}
			if !changed {
				total++
				break
			}
			if err := v.put(ctx, r, rev); errors.Is(err, errConflict) {
				continue
			} else if err != nil {
				return rewrapped, total, err
			}
			rewrapped++
			total++
			break
		}
	}
	return rewrapped, total, nil
}

// ClearAccount removes the values of every connection of account.
func (v *Vault) ClearAccount(ctx context.Context, account string) error {
	lister, err := v.kv.ListKeysFiltered(ctx, recordKey(account, "*"))
	if errors.Is(err, jetstream.ErrNoKeysFound) {
		return nil
	}
	if err != nil {
		return fmt.Errorf("credentials: list %s: %w", account, err)
	}
	var keys []string
	for k := range lister.Keys() {
		keys = append(keys, k)
	}
	for _, k := range keys {
		if err := v.clear(ctx, k); err != nil {
			return err
		}
	}
	return nil
}
