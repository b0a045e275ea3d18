package busauth

import (
	"slices"
	"testing"

	"github.com/toolgate/toolgate/approvals"
	"github.com/toolgate/toolgate/calls"
	"github.com/toolgate/toolgate/credentials"
	"github.com/toolgate/toolgate/edge/dashboard"
	"github.com/toolgate/toolgate/oauth"
	"github.com/toolgate/toolgate/registry"
)

// TestEdgeBucketsAreTheRegistrys keeps the edge's grant in step with the buckets
// the registry, the dashboard and the calls that outlive their request make.
func TestEdgeBucketsAreTheRegistrys(t *testing.T) {
	want := []string{
		registry.BucketTools, registry.BucketAccounts, registry.BucketKeys, registry.BucketConnections, registry.BucketLinks,
		registry.BucketPresence, registry.BucketSessions, registry.BucketRates, registry.BucketQuotas, dashboard.SessionBucket, calls.Bucket,
		credentials.Bucket, credentials.OAuthBucket, approvals.Bucket, oauth.KeyBucket, oauth.RequestBucket, oauth.GrantBucket, oauth.ClientBucket,
	}
	slices.Sort(want)
	got := slices.Sorted(slices.Values(edgeBuckets))
	if !slices.Equal(got, want) {
		t.Fatalf("the edge may use %v, the registry and dashboard make %v", got, want)
	}
}
