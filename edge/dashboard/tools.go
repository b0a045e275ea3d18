package dashboard

import (
	"bytes"
	"encoding/json"
	"errors"
	"fmt"
	"mime"
	"net/http"
	"strconv"
	"strings"
	"unicode/utf8"

	"github.com/toolgate/toolgate/audit"
	"github.com/toolgate/toolgate/edge"
	"github.com/toolgate/toolgate/gateway"
	"github.com/toolgate/toolgate/install"
	"github.com/toolgate/toolgate/registry"
)

type toolRow struct {
	Tool *registry.Tool
	edge.Availability
	Methods int
}

func (d *Dashboard) toolsPage(w http.ResponseWriter, r *http.Request, v *visit) {
	snap := d.view.Snapshot()
	var rows []toolRow
	for _, t := range snap.Tools(v.principal) {
		rows = append(rows, toolRow{Tool: t.Tool, Availability: edge.ToolAvailability(snap, t.Tool.ID), Methods: len(t.Tool.Methods)})
	}
	d.render(w, http.StatusOK, "tools", d.page(v, "Tools", "tools", rows))
}

// toolView is a tool's page: its header and one tab.
type toolView struct {
	Tool *registry.Tool
	edge.Availability
	Tab string
	// ConnectURL is the tool's Connect page, for a tool whose connection is
	// authorized at an OAuth provider; Connected: the provider just sent the
	// account holder back.
	ConnectURL string
	Connected  bool
	// Authorization is the state of the account's authorization at the provider:
	// "connected", "not connected" or "needs reauthorization".
	Authorization string
	// Credentials is the account's connection, for a tool whose connection needs
	// fields it sets here.
	Credentials *credentialsView

	Installs []installLine
	Minted   *mintedKey // a key just made for one client's command
	CanMint  bool       // the visit's key may make keys

	SSELink        string
	StreamableLink string
	LinkCreated    string
	RequireSignIn  bool // the account's links take only callers that signed in
	Configs        []clientConfig
	Rotated        bool

	APIURL  string
	CallURL string // the tool-call route, with a placeholder for the method
	Methods []methodView
}

type installLine struct {
	Client  install.Client
	Command string
}

type methodView struct {
	Method    *registry.Method
	Fields    []field
	SchemaErr string
	Curl      string
	Params    string      // the try-it form's parameters
	Result    *callResult // the answer to the form, when it was just sent
}

// callResult is a call made from the try-it form, as an HTTP caller would have seen it:
// a failure before or on the way to the tool is the edge's own answer (edge.ErrorAnswer).
type callResult struct {
	Status      int
	ContentType string
	Body        string
	Note        string // about the body: truncated, binary
	RetryAfter  int
	RequestID   string
	Failed      bool   // the gateway refused or the tool failed
	Approval    string // the approval the call awaits, when its account's rules hold it
}

var tabs = map[string]bool{"install": true, "sse": true, "api": true}

// tool finds the tool named in the path as v may see it, or shows why not.
func (d *Dashboard) tool(w http.ResponseWriter, r *http.Request, v *visit) (*registry.ToolEntry, *registry.Snapshot, bool) {
	snap := d.view.Snapshot()
	t, err := snap.Tool(v.principal, r.PathValue("tool"))
	switch {
	case errors.Is(err, registry.ErrForbidden):
		d.fail(w, r, v, http.StatusForbidden, "The key you signed in with does not reach this tool.")
		return nil, nil, false
	case err != nil:
		d.fail(w, r, v, http.StatusNotFound, "There is no such tool on this account.")
		return nil, nil, false
	}
	return t, snap, true
}

func (d *Dashboard) toolPage(w http.ResponseWriter, r *http.Request, v *visit) {
	tab := r.PathValue("tab")
	if tab == "" {
		tab = "install"
	}
	if !tabs[tab] {
		d.fail(w, r, v, http.StatusNotFound, "There is no such page.")
		return
	}
	t, snap, ok := d.tool(w, r, v)
	if !ok {
		return
	}
	tv, err := d.toolView(snap, v, t, tab)
	if err != nil {
		d.log.Error("dashboard: tool page", "tool", t.Tool.ID, "err", err)
		d.fail(w, r, v, http.StatusInternalServerError, "The page could not be shown.")
		return
	}
	tv.Rotated = tab == "sse" && r.URL.Query().Has("rotated")
	tv.Connected = r.URL.Query().Has("connected")
	if d.connects(t.Tool) {
		tv.ConnectURL = d.cfg.Prefix + "tools/" + t.Tool.ID + "/connect"
		tv.Authorization = d.authorization(r.Context(), v.principal.Account, t.Tool)
	}
	if d.sets(t.Tool) {
		tv.Credentials = d.credentials(r.Context(), v.principal.Account, t.Tool)
		tv.Credentials.Saved = savedFields(t.Tool, r.URL.Query().Get("saved"))
	}
	d.render(w, http.StatusOK, "tool", d.page(v, toolTitle(t.Tool), "tools", tv))
}

func toolTitle(t *registry.Tool) string {
	if t.Title != "" {
		return t.Title
	}
	return t.ID
}

func (d *Dashboard) toolView(snap *registry.Snapshot, v *visit, t *registry.ToolEntry, tab string) (*toolView, error) {
	id := t.Tool.ID
	tv := &toolView{Tool: t.Tool, Availability: edge.ToolAvailability(snap, id), Tab: tab}
	switch tab {
	case "install":
		tv.CanMint = v.canManageKeys()
		for _, c := range install.Clients() {
			tv.Installs = append(tv.Installs, installLine{Client: c, Command: d.cfg.installCommand(id, apiKeyPlaceholder, c)})
		}
	case "sse":
		conn := snap.Connection(v.principal.Account, id)
		if conn == nil {
			return nil, fmt.Errorf("no connection for a visible tool")
		}
		links := edge.ToolLinks(d.cfg.base(), id, d.signer.Token(conn.Account, conn.Tool, conn.LinkNonce))
		tv.SSELink, tv.StreamableLink = links.SSEURL, links.MCPURL
		tv.LinkCreated = formatDate(conn.LinkCreatedAt)
		if a := snap.Account(v.principal.Account); a != nil {
			tv.RequireSignIn = a.RequireSignIn
		}
		description := firstNonEmpty(t.Tool.Description, t.Tool.Title)
		var err error
		if tv.Configs, err = clientConfigs(id, description, tv.StreamableLink); err != nil {
			return nil, err
		}
	case "api":
		tv.APIURL = edge.ToolLinks(d.cfg.base(), id, "").APIURL
		tv.CallURL = edge.ToolCallURL(d.cfg.base(), id, "<method>")
		for i := range t.Tool.Methods {
			tv.Methods = append(tv.Methods, d.methodView(id, &t.Tool.Methods[i]))
		}
	}
	return tv, nil
}

func (d *Dashboard) methodView(tool string, m *registry.Method) methodView {
	mv := methodView{Method: m, Params: "{}"}
	s, err := parseSchema(m.InputSchema)
	if err != nil {
		mv.SchemaErr = err.Error()
	} else {
		mv.Fields = s.fields()
		mv.Params = s.example()
	}
	mv.Curl = d.cfg.curlExample(tool, m.Name, compactJSON(mv.Params))
	return mv
}

// compactJSON puts a small example on one line, as it reads best in a command.
func compactJSON(s string) string {
	var b bytes.Buffer
	if err := json.Compact(&b, []byte(s)); err != nil {
		return s
	}
	return b.String()
}

func (d *Dashboard) rotateLink(w http.ResponseWriter, r *http.Request, v *visit) {
	t, _, ok := d.tool(w, r, v)
	if !ok {
		return
	}
	conn, err := d.store.RotateLink(r.Context(), v.principal.Account, t.Tool.ID, d.signer)
	if err != nil {
		d.log.Error("dashboard: rotate link", "tool", t.Tool.ID, "err", err)
		d.fail(w, r, v, http.StatusInternalServerError, "The link could not be rotated; the old one still works. Try again.")
		return
	}
	d.log.Info("dashboard: link rotated", "account", v.principal.Account, "tool", t.Tool.ID)
	d.record(w, r, v, audit.Record{Method: audit.ActionRotateLink, Tool: t.Tool.ID})
	d.await(r.Context(), func(s *registry.Snapshot) bool {
		c := s.Connection(conn.Account, conn.Tool)
		return c != nil && c.LinkNonce == conn.LinkNonce
	})
	d.redirect(w, r, "tools/"+t.Tool.ID+"/sse?rotated=1")
}

// maxShownBody bounds how much of a reply the page shows.
const maxShownBody = 256 << 10

// tryCall runs the try-it form's call through the gateway, as the HTTP API would,
// and shows the API tab with the answer under the method.
func (d *Dashboard) tryCall(w http.ResponseWriter, r *http.Request, v *visit) {
	t, snap, ok := d.tool(w, r, v)
	if !ok {
		return
	}
	method := r.PathValue("method")
	if t.Method(method) == nil {
		d.fail(w, r, v, http.StatusNotFound, "The tool has no such method.")
		return
	}
	params := r.PostForm.Get("params")
	call := &gateway.Call{
		Principal: v.principal,
		Tool:      t.Tool.ID,
		Method:    method,
		Params:    []byte(params),
		RequestID: registry.NewID("req_"),
		Transport: audit.TransportDashboard,
	}
	res, held := d.tryHeld(r.Context(), call)
	if !held {
		reply, err := d.gw.Call(r.Context(), call)
		res = d.tryResult(call, reply, err)
	}
	tv, err := d.toolView(snap, v, t, "api")
	if err != nil {
		d.fail(w, r, v, http.StatusInternalServerError, "The page could not be shown.")
		return
	}
	for i := range tv.Methods {
		if tv.Methods[i].Method.Name == method {
			tv.Methods[i].Params = params
			tv.Methods[i].Result = res
		}
	}
	d.render(w, http.StatusOK, "tool", d.page(v, toolTitle(t.Tool), "tools", tv))
}

// showBody makes a reply readable: JSON indented, text as it is, anything else
// described rather than shown.
func showBody(data []byte, contentType string) (body, note string) {
	if len(data) == 0 {
		return "", "The tool answered with an empty body."
	}
	mt, _, _ := mime.ParseMediaType(contentType)
	if (mt == "" || mt == "application/json" || strings.HasSuffix(mt, "+json")) && json.Valid(data) {
		var b bytes.Buffer
		if json.Indent(&b, data, "", "  ") == nil && b.Len() <= maxShownBody {
			return b.String(), ""
		}
	}
	if !utf8.Valid(data) {
		return "", strconv.Itoa(len(data)) + " bytes of binary data, not shown."
	}
	if len(data) > maxShownBody {
		cut := maxShownBody
		for cut > 0 && !utf8.RuneStart(data[cut]) {
			cut--
		}
		return string(data[:cut]), "Only the first " + strconv.Itoa(cut) + " of " + strconv.Itoa(len(data)) + " bytes are shown."
	}
	return string(data), ""
}
