package dashboard

import (
	"errors"
	"net/http"

	"github.com/toolgate/toolgate/audit"
	"github.com/toolgate/toolgate/install"
	"github.com/toolgate/toolgate/registry"
)

// The install tab mints, on one click, a key for one client: scoped to the tool,
// named for the client, and shown once inside that client's command, ready to paste.
// It is a key like any other, listed (and revoked) on the keys page; the dashboard
// keeps none.

// mintedKey is the key just made for a client's install command.
type mintedKey struct {
	Client string // the client, as people call it
	Name   string // the key's
}

// installKeyName names the key made for client to reach tool.
func installKeyName(client install.Client, tool string) string {
	return client.Title() + " · " + tool
}

func (d *Dashboard) mintInstallKey(w http.ResponseWriter, r *http.Request, v *visit) {
	if !d.mayManageKeys(w, r, v) {
		return
	}
	t, snap, ok := d.tool(w, r, v)
	if !ok {
		return
	}
	client, err := install.Lookup(r.PathValue("client"))
	if err != nil {
		d.fail(w, r, v, http.StatusNotFound, "There is no such MCP client.")
		return
	}
	id := t.Tool.ID
	k, secret, err := d.store.CreateKey(r.Context(), registry.NewKeyRequest{
		Account: v.principal.Account, Name: installKeyName(client, id), Scopes: []string{id},
	})
	if err != nil {
		status, msg := http.StatusInternalServerError, "The key could not be created. Try again."
		if errors.Is(err, registry.ErrInvalid) {
			status = http.StatusBadRequest
		}
		d.log.Error("dashboard: install key", "account", v.principal.Account, "tool", id, "err", err)
		d.fail(w, r, v, status, msg)
		return
	}
	d.log.Info("dashboard: install key created", "account", k.Account, "key_id", k.ID, "tool", id, "client", client.Name())
	d.record(w, r, v, audit.Record{Method: audit.ActionCreateKey, Key: k.ID, Tool: id})
	d.await(r.Context(), func(s *registry.Snapshot) bool { _, got := s.KeyByID(k.ID); return got != nil })
	tv, err := d.toolView(snap, v, t, "install")
	if err != nil {
		d.fail(w, r, v, http.StatusInternalServerError, "The page could not be shown.")
		return
	}
	for i := range tv.Installs {
		if tv.Installs[i].Client.Name() == client.Name() {
			tv.Installs[i].Command = d.cfg.installCommand(id, shellQuote(secret), client)
		}
	}
	tv.Minted = &mintedKey{Client: client.Title(), Name: k.Name}
	w.Header().Set("Cache-Control", "no-store") // the page holds a key
	d.render(w, http.StatusOK, "tool", d.page(v, toolTitle(t.Tool), "tools", tv))
}
