package oauth_test

import (
	"context"
	"net"
	"net/http"
	"testing"
	"time"

	"golang.org/x/oauth2"

	"github.com/toolgate/toolgate/internal/testidp"
	"github.com/toolgate/toolgate/oauth"
)

// BenchmarkExternalVerify is what checking a token of the deployment's provider
// costs a request once its key set is held: zitadel/oidc's checks (RS256) and the
// audience and claims, no fetch.
func BenchmarkExternalVerify(b *testing.B) {
	const resource = "https://gw.example/mcp/tgl_a"
	codes := make(chan string, 1)
	ln, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		b.Fatal(err)
	}
	srv := &http.Server{ReadHeaderTimeout: time.Second, Handler: http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		codes <- r.URL.Query().Get("code")
	})}
	go func() { _ = srv.Serve(ln) }()
	b.Cleanup(func() { srv.Close() })
	redirect := "http://" + ln.Addr().String() + "/cb"
	idp := testidp.Start(b, testidp.Options{ClientID: "c", ClientSecret: "s", RedirectURI: redirect, JWTAccessTokens: true,
		ResourceAudience: true, Claims: map[string]map[string]any{testidp.Subject: {"toolgate_account": "acme"}}})
	cfg := oauth2.Config{ClientID: "c", ClientSecret: "s", RedirectURL: redirect, Scopes: []string{"kit:list", "kit:call"},
		Endpoint: oauth2.Endpoint{AuthURL: idp.Issuer + "/auth", TokenURL: idp.Issuer + "/oauth/token", AuthStyle: oauth2.AuthStyleInHeader}}
	if _, _, err := idp.SignIn(cfg.AuthCodeURL("s", oauth2.SetAuthURLParam("resource", resource))); err != nil {
		b.Fatal(err)
	}
	tok, err := cfg.Exchange(context.Background(), <-codes)
	if err != nil {
		b.Fatal(err)
	}
	x, err := oauth.DiscoverExternal(context.Background(), oauth.ExternalConfig{Issuer: idp.Issuer, AccountClaim: "toolgate_account",
		UserClaim: "sub", KeysMinRefetch: time.Second, KeysMaxAge: time.Hour, AcceptJWTTyp: true}) // testidp labels access tokens JWT, as zitadel does
	if err != nil {
		b.Fatal(err)
	}
	for b.Loop() {
		if _, err := x.Verify(context.Background(), tok.AccessToken, resource, time.Now()); err != nil {
			b.Fatal(err)
		}
	}
}
