package edge

import (
	"github.com/gin-gonic/gin"
)

// authLink authenticates the link token in the path. A dead or unknown link is a 404:
// MCP clients treat 401 as a cue to sign in, which no one can at a link that is not.
// The link of an account that requires sign-in takes only a caller that signed in
// (see signIn): the URL alone is no longer the credential.
func (e *Edge) authLink(c *gin.Context) {
	p, err := e.view.AuthenticateLink(c.Request.Context(), c.Param("link"))
	if err != nil {
		e.fail(c, errLinkNotFound)
		return
	}
	snap := e.view.Snapshot()
	if a := snap.Account(p.Account); e.tokens() != nil && a != nil && a.RequireSignIn {
		tool := p.Tool
		if p, err = e.signIn(c, snap, p.Account, tool); err != nil {
			e.failSignIn(c, tool, err)
			return
		}
	}
	if _, err := snap.Tool(p, p.Tool); err != nil {
		e.fail(c, err)
		return
	}
	c.Set(ctxPrincipal, p)
	c.Set(ctxMCPTool, p.Tool)
	c.Next()
}

// authToolMCP checks that the tool in the path is visible to the key's account.
func (e *Edge) authToolMCP(c *gin.Context) {
	tool := c.Param("tool")
	if _, err := e.view.Snapshot().Tool(principal(c), tool); err != nil {
		e.fail(c, err)
		return
	}
	c.Set(ctxMCPTool, tool)
	c.Next()
}

// messagesPath is where the legacy SSE clients of a stream opened at c's route post
// their messages: beside the link, or beside the tool's key-authenticated stream.
// Only the GET that opens a stream needs it, so no other request builds it.
func (e *Edge) messagesPath(c *gin.Context) string {
	if link := c.Param("link"); link != "" {
		return e.basePath + "/mcp/" + link + "/messages"
	}
	return e.basePath + "/tools/" + c.GetString(ctxMCPTool) + "/sse/messages"
}

func (e *Edge) mcpSSE(c *gin.Context) {
	e.cfg.MCP.ServeSSE(c.Writer, c.Request, principal(c), c.GetString(ctxMCPTool), e.messagesPath(c))
}

func (e *Edge) mcpMessages(c *gin.Context) {
	e.cfg.MCP.ServeMessages(c.Writer, c.Request, principal(c), c.GetString(ctxMCPTool))
}

func (e *Edge) mcpStreamable(c *gin.Context) {
	e.cfg.MCP.ServeStreamable(c.Writer, c.Request, principal(c), c.GetString(ctxMCPTool))
}
