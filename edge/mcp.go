package edge

import "github.com/gin-gonic/gin"

// authLink authenticates the link token in the path. A dead or unknown link is a 404:
// the URL itself is the credential, and MCP clients treat 401 as a cue to start an
// OAuth flow this gateway does not offer.
func (e *Edge) authLink(c *gin.Context) {
	snap := e.view.Snapshot()
	p, err := snap.AuthenticateLink(c.Param("link"))
	if err != nil {
		e.fail(c, errLinkNotFound)
		return
	}
	if _, err := snap.Tool(p, p.Tool); err != nil {
		e.fail(c, err)
		return
	}
	c.Set(ctxPrincipal, p)
	c.Set(ctxMCPTool, p.Tool)
	c.Set(ctxMessagesPath, e.cfg.basePath()+"/mcp/"+c.Param("link")+"/messages")
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
	c.Set(ctxMessagesPath, e.cfg.basePath()+"/tools/"+tool+"/sse/messages")
	c.Next()
}

func (e *Edge) mcpSSE(c *gin.Context) {
	e.cfg.MCP.ServeSSE(c.Writer, c.Request, principal(c), c.GetString(ctxMCPTool), c.GetString(ctxMessagesPath))
}

func (e *Edge) mcpMessages(c *gin.Context) {
	e.cfg.MCP.ServeMessages(c.Writer, c.Request, principal(c), c.GetString(ctxMCPTool))
}

func (e *Edge) mcpStreamable(c *gin.Context) {
	e.cfg.MCP.ServeStreamable(c.Writer, c.Request, principal(c), c.GetString(ctxMCPTool))
}
