package credentials

import (
	"testing"

	"golang.org/x/oauth2"
)

// TestClientAuthentication: the gateway registers with the way of authenticating at
// the token endpoint that the provider takes (a secret in the header first), and
// authenticates as it registered: a suite's provider that takes only one way is
// refused any other.
func TestClientAuthentication(t *testing.T) {
	for _, c := range []struct {
		supported []string
		want      string
	}{
		{nil, "client_secret_basic"},
		{[]string{"none"}, "none"},
		{[]string{"client_secret_post"}, "client_secret_post"},
		{[]string{"none", "client_secret_post", "client_secret_basic"}, "client_secret_basic"},
		{[]string{"private_key_jwt"}, "client_secret_basic"},
	} {
		if got := registrationMethod(c.supported); got != c.want {
			t.Errorf("registrationMethod(%v) = %q, want %q", c.supported, got, c.want)
		}
	}
	for _, c := range []struct {
		client    oauthClient
		supported []string
		want      oauth2.AuthStyle
	}{
		{oauthClient{id: "a"}, []string{"client_secret_basic"}, oauth2.AuthStyleInParams},
		{oauthClient{id: "a", secret: "s", method: "client_secret_post"}, nil, oauth2.AuthStyleInParams},
		{oauthClient{id: "a", secret: "s", method: "client_secret_basic"}, []string{"client_secret_post"}, oauth2.AuthStyleInHeader},
		{oauthClient{id: "a", secret: "s"}, []string{"client_secret_basic"}, oauth2.AuthStyleInHeader},
		{oauthClient{id: "a", secret: "s"}, []string{"client_secret_post"}, oauth2.AuthStyleInParams},
		{oauthClient{id: "a", secret: "s"}, nil, oauth2.AuthStyleAutoDetect},
	} {
		if got := c.client.authStyle(c.supported); got != c.want {
			t.Errorf("%+v.authStyle(%v) = %v, want %v", c.client, c.supported, got, c.want)
		}
	}
}
