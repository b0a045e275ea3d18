package testenv

import (
	"io"
	"net/http"
	"strings"
	"testing"
)

// Admin sends one request to the admin API of the edge at url with the admin key and
// returns the answer's body, failing the test on any status but 2xx.
func Admin(t testing.TB, url, adminKey, method, path, body string) []byte {
	t.Helper()
	req, err := http.NewRequest(method, url+path, strings.NewReader(body))
	if err != nil {
		t.Fatal(err)
	}
	req.Header.Set("Authorization", "Bearer "+adminKey)
	req.Header.Set("Content-Type", "application/json")
	resp, err := http.DefaultClient.Do(req)
	if err != nil {
		t.Fatal(err)
	}
	defer resp.Body.Close()
	b, _ := io.ReadAll(resp.Body)
	if resp.StatusCode/100 != 2 {
		t.Fatalf("%s %s: %d %s", method, path, resp.StatusCode, b)
	}
	return b
}
