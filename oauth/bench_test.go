package oauth_test

import (
	"context"
	"fmt"
	"testing"
	"time"

	"github.com/toolgate/toolgate/internal/testenv"
	"github.com/toolgate/toolgate/oauth"
)

// BenchmarkVerify is what checking an access token costs a request: the signature
// and claims alone, and with the grant read from the bucket's leader (the
// authorization server's revocation check before announcements, on one local NATS
// server), and with the grant's revocation asked of the view's announcements instead.
func BenchmarkVerify(b *testing.B) {
	srv := testenv.Server(b)
	store := testenv.Store(b, testenv.Conn(b, srv.ClientURL()), 1)
	ctx := testenv.Context(b)
	keys, err := oauth.OpenKeys(ctx, store, time.Hour, nil)
	if err != nil {
		b.Fatal(err)
	}
	is := oauth.NewIssuer("https://gw.example", keys)
	const resource = "https://gw.example/mcp/tgl_a"
	tok := oauth.Token{Account: "acme", Resource: resource, Scope: "kit:list kit:call", Grant: "grant.acme.none"}
	view := testenv.View(b, store)
	time.Sleep(3 * time.Second) // the token is issued after the view began hearing (revoke.go's margin)
	raw, err := is.Mint(ctx, tok, time.Now(), time.Hour)
	if err != nil {
		b.Fatal(err)
	}
	run := func(b *testing.B) {
		for b.Loop() {
			if _, err := is.Verify(context.Background(), raw, resource, time.Now()); err != nil {
				b.Fatal(err)
			}
		}
	}
	b.Run("signature and claims", run)
	if _, err := oauth.NewServer(ctx, store, is, oauth.ServerConfig{TokenTTL: time.Hour, LoginURL: func(string) string { return "" }}); err != nil {
		b.Fatal(err)
	}
	b.Run("with the grant read", func(b *testing.B) {
		for b.Loop() {
			_, _ = is.Verify(context.Background(), raw, resource, time.Now()) // the grant does not exist: refused, after the read
		}
	})
	if err := is.CheckRevocations(ctx, store, view); err != nil {
		b.Fatal(err)
	}
	b.Run("with the view's announcements", run) // no revocation heard: accepted without a read
}

// BenchmarkCountPending is what admitting an authorization request adds to it: the
// count of the requests in progress, by the stream's leader (one local NATS server),
// with 0, 1,000 and 10,000 (the default limit) held.
func BenchmarkCountPending(b *testing.B) {
	srv := testenv.Server(b)
	nc := testenv.Conn(b, srv.ClientURL())
	store := testenv.Store(b, nc, 1)
	ctx := testenv.Context(b)
	keys, err := oauth.OpenKeys(ctx, store, time.Hour, nil)
	if err != nil {
		b.Fatal(err)
	}
	s, err := oauth.NewServer(ctx, store, oauth.NewIssuer("https://gw.example", keys), oauth.ServerConfig{TokenTTL: time.Hour, LoginURL: func(string) string { return "" }})
	if err != nil {
		b.Fatal(err)
	}
	kv, err := store.JetStream().KeyValue(ctx, oauth.RequestBucket)
	if err != nil {
		b.Fatal(err)
	}
	held := 0
	for _, n := range []int{0, 1000, 10000} {
		for ; held < n; held++ {
			if _, err := kv.Put(ctx, fmt.Sprintf("req.r%d", held), []byte(`{}`)); err != nil {
				b.Fatal(err)
			}
		}
		b.Run(fmt.Sprintf("%d held", n), func(b *testing.B) {
			for b.Loop() {
				if got, err := s.Pending(context.Background()); err != nil || got != n {
					b.Fatalf("counted %d (%v), want %d", got, err, n)
				}
			}
		})
	}
}
