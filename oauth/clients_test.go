package oauth_test

import (
	"testing"

	"github.com/toolgate/toolgate/oauth"
)

// TestWhichClientIDsAreFetched: an https URL with a path names a metadata document;
// an http one only on a loopback address and only where the server allows it; nothing
// else is fetched.
func TestWhichClientIDsAreFetched(t *testing.T) {
	for id, want := range map[string][2]bool{ // without, with loopback documents
		"https://client.example/oauth/client.json": {true, true},
		"http://127.0.0.1:8080/client.json":        {false, true},
		"http://[::1]:8080/client.json":            {false, true},
		"http://client.example/client.json":        {false, false},
		"http://10.0.0.5/client.json":              {false, false},
		"https://client.example":                   {false, false},
		"https://user@client.example/c.json":       {false, false},
		"https://client.example/c.json#frag":       {false, false},
		"tgc_abc":                                  {false, false},
	} {
		for i, loopback := range []bool{false, true} {
			if got := oauth.DocumentClient(id, loopback); got != want[i] {
				t.Errorf("%s (loopback documents %v): fetched %v, want %v", id, loopback, got, want[i])
			}
		}
	}
}
