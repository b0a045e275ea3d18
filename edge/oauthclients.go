package edge

import (
	"errors"
	"net/http"

	"github.com/gin-gonic/gin"

	"github.com/toolgate/toolgate/audit"
	"github.com/toolgate/toolgate/gateway"
	"github.com/toolgate/toolgate/oauth"
	"github.com/toolgate/toolgate/registry"
)

// OAuthClientRequest is the body of POST /admin/oauth/clients: a client the
// operator registers with the deployment's authorization server. A confidential
// one gets a secret, in the answer only.
type OAuthClientRequest struct {
	ClientID     string   `json:"client_id"`
	ClientName   string   `json:"client_name,omitempty"`
	RedirectURIs []string `json:"redirect_uris"`
	Confidential bool     `json:"confidential,omitempty"`
}

// OAuthClientList is the answer of GET /admin/oauth/clients: never a secret.
type OAuthClientList struct {
	Clients []oauth.Client `json:"clients"`
}

func (e *Edge) oauthClientRoutes(g *gin.RouterGroup) {
	g.POST("/oauth/clients", e.addOAuthClient)
	g.GET("/oauth/clients", e.listOAuthClients)
	g.DELETE("/oauth/clients/:client", e.removeOAuthClient)
}

// errNoAuthServer: this edge runs no authorization server of its own.
var errNoAuthServer = newHTTPError(gateway.KindNotFound, "the deployment's own authorization server is off on this edge (--no-sign-in, or no dashboard for its sign-in pages)")

// authServer is the edge's authorization server, or the refusal when it has none.
func (e *Edge) authServer(c *gin.Context) (*oauth.Server, bool) {
	if e.cfg.AuthServer == nil {
		e.fail(c, errNoAuthServer)
		return nil, false
	}
	return e.cfg.AuthServer, true
}

func (e *Edge) addOAuthClient(c *gin.Context) {
	srv, ok := e.authServer(c)
	if !ok {
		return
	}
	var req OAuthClientRequest
	if err := decodeStrict(c.Request.Body, &req); err != nil {
		e.fail(c, err)
		return
	}
	added, err := srv.AddClient(c.Request.Context(), oauth.Client{ID: req.ClientID, Name: req.ClientName,
		RedirectURIs: req.RedirectURIs, Confidential: req.Confidential})
	if err != nil {
		e.fail(c, oauthClientError(err))
		return
	}
	e.adminChange(c, http.StatusCreated, audit.ActionAddOAuthClient, "", "", "")
	c.Header("Cache-Control", "no-store") // the secret is in it
	c.JSON(http.StatusCreated, added)
}

func (e *Edge) listOAuthClients(c *gin.Context) {
	srv, ok := e.authServer(c)
	if !ok {
		return
	}
	clients, err := srv.Clients(c.Request.Context())
	if err != nil {
		e.fail(c, err)
		return
	}
	c.JSON(http.StatusOK, OAuthClientList{Clients: clients})
}

func (e *Edge) removeOAuthClient(c *gin.Context) {
	srv, ok := e.authServer(c)
	if !ok {
		return
	}
	if err := srv.RemoveClient(c.Request.Context(), c.Param("client")); err != nil {
		e.fail(c, oauthClientError(err))
		return
	}
	e.adminChange(c, http.StatusNoContent, audit.ActionRemoveOAuthClient, "", "", "")
	c.Status(http.StatusNoContent)
}

// oauthClientError is the envelope's error for what the authorization server
// answered about a pre-registered client.
func oauthClientError(err error) error {
	var invalid *oauth.InvalidClientError
	switch {
	case errors.As(err, &invalid):
		vs := make([]registry.Violation, len(invalid.Violations))
		for i, v := range invalid.Violations {
			vs[i] = registry.Violation{Pointer: v.Pointer, Message: v.Message}
		}
		return invalidInput(vs)
	case errors.Is(err, oauth.ErrClientExists):
		return newHTTPError(gateway.KindConflict, "a client with this client_id is registered already")
	case errors.Is(err, oauth.ErrClientNotFound):
		return newHTTPError(gateway.KindNotFound, "no such pre-registered client")
	}
	return err
}
