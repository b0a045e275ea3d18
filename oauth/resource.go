package oauth

import (
	"encoding/json"
	"fmt"
	"net/url"
	"strings"
)

// The scopes of a tool's resource: list reaches everything but calls (initialize,
// the lists, pings, the session's own requests); call adds tools/call. Each names its
// tool, so a grant for one tool says nothing of another.
func ListScope(tool string) string { return tool + ":list" }
func CallScope(tool string) string { return tool + ":call" }

// ToolScopes are the scopes a tool's resource supports, the narrower first.
func ToolScopes(tool string) []string { return []string{ListScope(tool), CallScope(tool)} }

// NeedsCall reports whether an MCP message (a JSON-RPC object or a batch of them)
// asks for something only the call scope allows: a tools/call.
func NeedsCall(body []byte) bool {
	type message struct {
		Method string `json:"method"`
	}
	var one message
	if json.Unmarshal(body, &one) == nil {
		return one.Method == "tools/call"
	}
	var batch []message
	if json.Unmarshal(body, &batch) != nil {
		return false // not JSON-RPC: the transport refuses it for what it is
	}
	for _, m := range batch {
		if m.Method == "tools/call" {
			return true
		}
	}
	return false
}

// ResourceMetadata is a protected resource's metadata document (RFC 9728 §2).
type ResourceMetadata struct {
	Resource               string   `json:"resource"`
	AuthorizationServers   []string `json:"authorization_servers"`
	ScopesSupported        []string `json:"scopes_supported"`
	BearerMethodsSupported []string `json:"bearer_methods_supported"`
	ResourceName           string   `json:"resource_name,omitempty"`
}

// ResourceWellKnown is the well-known path prefix of protected resource metadata.
const ResourceWellKnown = "/.well-known/oauth-protected-resource"

// MetadataURL is where the metadata of the resource at resourceURL is served: the
// well-known path put between the host and the resource's path (RFC 9728 §3.1), so
// that each link and each tool has a document of its own.
func MetadataURL(resourceURL string) (string, error) {
	u, err := url.Parse(resourceURL)
	if err != nil || u.Scheme == "" || u.Host == "" {
		return "", fmt.Errorf("oauth: resource %q is not an absolute URL", resourceURL)
	}
	u.Path = ResourceWellKnown + strings.TrimSuffix(u.Path, "/")
	u.RawPath, u.RawQuery, u.Fragment = "", "", ""
	return u.String(), nil
}

// Challenge is a WWW-Authenticate value for a request to the resource whose metadata
// is at metadataURL: with errCode ("" when no token came, "invalid_token",
// "insufficient_scope") and the scope the request needs (RFC 6750 §3, RFC 9728 §5.1).
func Challenge(metadataURL, errCode, scope string) string {
	var b strings.Builder
	b.WriteString(`Bearer resource_metadata="` + metadataURL + `"`)
	if errCode != "" {
		b.WriteString(`, error="` + errCode + `"`)
	}
	if scope != "" {
		b.WriteString(`, scope="` + scope + `"`)
	}
	return b.String()
}
