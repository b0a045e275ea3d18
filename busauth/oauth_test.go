package busauth_test

import (
	"fmt"
	"testing"
	"time"

	"github.com/nats-io/nats.go/jetstream"

	"github.com/toolgate/toolgate/internal/testenv"
	"github.com/toolgate/toolgate/oauth"
)

// TestEdgeRunsTheAuthorizationServer: on its own credentials an edge makes the
// authorization server's buckets, keeps pre-registered clients, counts what a
// bucket holds and removes an ended request whole from the requests' stream; it may
// purge no other OAuth bucket.
func TestEdgeRunsTheAuthorizationServer(t *testing.T) {
	_, edge, errs := securedEdge(t)
	store := testenv.Store(t, edge, 1)
	ctx := testenv.Context(t)

	keys, err := oauth.OpenKeys(ctx, store, 24*time.Hour, nil)
	if err != nil {
		t.Fatal(err)
	}
	as, err := oauth.NewServer(ctx, store, oauth.NewIssuer("http://127.0.0.1:1", keys), oauth.ServerConfig{
		TokenTTL: time.Hour, LoginURL: func(id string) string { return "http://127.0.0.1:1/consent?id=" + id },
	})
	if err != nil {
		t.Fatal(err)
	}
	if _, err := as.AddClient(ctx, oauth.Client{ID: "desk", RedirectURIs: []string{"http://127.0.0.1:9/cb"}, Confidential: true}); err != nil {
		t.Fatal(err)
	}
	if clients, err := as.Clients(ctx); err != nil || len(clients) != 1 {
		t.Fatalf("clients %+v %v", clients, err)
	}
	if err := as.RemoveClient(ctx, "desk"); err != nil {
		t.Fatal(err)
	}
	js, err := jetstream.New(edge)
	if err != nil {
		t.Fatal(err)
	}
	requests, err := js.Stream(ctx, "KV_"+oauth.RequestBucket)
	if err != nil {
		t.Fatal(err)
	}
	if err := requests.Purge(ctx, jetstream.WithPurgeSubject("$KV."+oauth.RequestBucket+".req.x")); err != nil {
		t.Fatalf("removing a request: %v", err)
	}
	cons, err := js.CreateConsumer(ctx, "KV_"+oauth.GrantBucket, jetstream.ConsumerConfig{
		FilterSubject: "$KV." + oauth.GrantBucket + ".client.>", DeliverPolicy: jetstream.DeliverLastPerSubjectPolicy,
		AckPolicy: jetstream.AckNonePolicy, MemoryStorage: true, Replicas: 1,
	})
	if err != nil {
		t.Fatalf("counting the registered clients: %v", err)
	}
	if err := js.DeleteConsumer(ctx, "KV_"+oauth.GrantBucket, cons.CachedInfo().Name); err != nil {
		t.Fatal(err)
	}
	errs.none(t)
	for _, bucket := range []string{oauth.GrantBucket, oauth.ClientBucket, oauth.KeyBucket} {
		subject := "$JS.API.STREAM.PURGE.KV_" + bucket
		if err := edge.PublishRequest(subject, edge.NewRespInbox(), []byte("{}")); err != nil {
			t.Fatal(err)
		}
		errs.expect(t, fmt.Sprintf("Publish to %q", subject))
	}
}
