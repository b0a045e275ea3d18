package edge

import (
	"net/http"
	"slices"
	"strings"
	"time"

	"github.com/gin-gonic/gin"

	"github.com/toolgate/toolgate/audit"
	"github.com/toolgate/toolgate/registry"
)

// The users of an account (registry.User): made and deleted by the admin, they sign
// in to the dashboard and, through it, to links; a deleted one is refused everywhere
// (its sessions, tokens and grants) from the DELETE's answer on.

// UserRequest is the body of POST /admin/accounts/{id}/users: a user who signs in
// with a secret made for it, or, with a subject, at the deployment's identity
// provider.
type UserRequest struct {
	Name    string `json:"name"`
	Subject string `json:"subject,omitempty"`
}

// User is a user as the admin API shows it: never its secret's hash.
type User struct {
	Name      string    `json:"name"`
	Kind      string    `json:"kind"` // "secret" or "subject"
	Subject   string    `json:"subject,omitempty"`
	CreatedAt time.Time `json:"created_at"`
}

// NewUser is the answer of POST /admin/accounts/{id}/users: the user and, this once,
// its sign-in secret (none for a subject).
type NewUser struct {
	User
	Secret string `json:"secret,omitempty"`
}

// UserList is the answer of GET /admin/accounts/{id}/users.
type UserList struct {
	Users []User `json:"users"`
}

func userView(u registry.User) User {
	return User{Name: u.Name, Kind: u.Kind(), Subject: u.Subject, CreatedAt: u.CreatedAt}
}

func (e *Edge) userRoutes(g *gin.RouterGroup) {
	g.POST("/accounts/:account/users", e.addUser)
	g.GET("/accounts/:account/users", e.listUsers)
	g.DELETE("/accounts/:account/users/:user", e.deleteUser)
}

// maxUsers is Config.MaxUsers, or its default when the edge was built without one.
func (e *Edge) maxUsers() int {
	if e.cfg.MaxUsers > 0 {
		return e.cfg.MaxUsers
	}
	return registry.DefaultMaxUsers
}

func (e *Edge) addUser(c *gin.Context) {
	account, ok := e.pathID(c, "account")
	if !ok {
		return
	}
	var req UserRequest
	if err := decodeStrict(c.Request.Body, &req); err != nil {
		e.fail(c, err)
		return
	}
	u, secret, err := e.store.AddUser(c.Request.Context(), account, req.Name, req.Subject, e.maxUsers())
	if err != nil {
		e.fail(c, err)
		return
	}
	e.adminRecord(c, audit.Record{Status: http.StatusCreated, Method: audit.ActionAddUser, Account: account, User: u.Name})
	c.Header("Cache-Control", "no-store")
	c.JSON(http.StatusCreated, NewUser{User: userView(*u), Secret: secret})
}

func (e *Edge) listUsers(c *gin.Context) {
	account, ok := e.pathID(c, "account")
	if !ok {
		return
	}
	a, err := e.store.Account(c.Request.Context(), account)
	if err != nil {
		e.fail(c, err)
		return
	}
	users := make([]User, 0, len(a.Users))
	for _, u := range a.Users {
		users = append(users, userView(u))
	}
	slices.SortFunc(users, func(a, b User) int { return strings.Compare(a.Name, b.Name) })
	c.JSON(http.StatusOK, UserList{Users: users})
}

// deleteUser removes a user, and with it the grants it signed in for: the account's
// record and the revocation announced refuse its dashboard sessions and its tokens on
// every edge, and its refresh tokens are gone with its grants.
func (e *Edge) deleteUser(c *gin.Context) {
	account, ok := e.pathID(c, "account")
	if !ok {
		return
	}
	name := c.Param("user")
	if err := registry.CheckUserName(name); err != nil {
		e.fail(c, err)
		return
	}
	u, err := e.store.DeleteUser(c.Request.Context(), account, name)
	if err != nil {
		e.fail(c, err)
		return
	}
	if srv := e.cfg.AuthServer; srv != nil {
		if err := srv.RevokeUserGrants(c.Request.Context(), account, u.Name); err != nil {
			e.fail(c, err)
			return
		}
	}
	e.adminRecord(c, audit.Record{Status: http.StatusNoContent, Method: audit.ActionDeleteUser, Account: account, User: u.Name})
	c.Status(http.StatusNoContent)
}
