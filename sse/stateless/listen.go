package stateless

import (
	"context"
	"encoding/json"
	"net/http"
	"time"

	"github.com/modelcontextprotocol/go-sdk/mcp"

	"github.com/toolgate/toolgate/bus/wire"
	"github.com/toolgate/toolgate/sse/core"
)

// listenParams are subscriptions/listen's params with the tasks extension's filter,
// which the SDK's NotificationSubscriptions lacks.
type listenParams struct {
	Notifications *grantedNotifications `json:"notifications"`
}

// grantedNotifications are the notifications a stream asks for, and those it is
// granted, as the acknowledgement names them.
type grantedNotifications struct {
	mcp.NotificationSubscriptions
	TaskIDs []string `json:"taskIds,omitempty"`
}

// listen serves subscriptions/listen: a stream that carries the change notifications
// the client opted into until the client closes it. Of those, a link has the lists of
// its tool: its tools, which the registry says change, and its prompts and resources
// where its server declared their changes (core.ListChangesOf), which its workers pass on
// (wire.Subjects.ListChanged); and the status of the caller's own tasks the gateway
// keeps (core.FollowTasks). Each notification names the stream's subscriptionId.
func (t *Transport) listen(w http.ResponseWriter, r *http.Request, rr *core.Request) {
	s := t.core
	var params listenParams
	if err := json.Unmarshal(rr.RPC.Params, &params); err != nil {
		core.WriteRPCError(w, rr.RPC.ID, core.InvalidParams("subscriptions/listen: %v", err))
		return
	}
	var granted grantedNotifications
	var wanted map[string]string
	if n := params.Notifications; n != nil {
		granted.NotificationSubscriptions, wanted = t.grantLists(rr, n.NotificationSubscriptions)
	}
	// The tasks' watch lasts as the stream does, which may outlive the handler
	// (ServeStream): the stream stops it.
	ctx, stop := context.WithCancel(context.WithoutCancel(r.Context()))
	var follow *core.TaskFollow
	if n := params.Notifications; n != nil {
		var err error
		if follow, err = s.FollowTasks(ctx, rr, n.TaskIDs); err != nil {
			stop()
			core.WriteRPCError(w, rr.RPC.ID, err)
			return
		}
		if follow != nil {
			granted.TaskIDs = follow.IDs
		}
	}
	subID := mcp.Meta{mcp.MetaKeySubscriptionID: rr.RPC.ID.Raw()}
	ack := core.EncodeNotification(core.NotifySubscriptionAck, struct {
		Meta          mcp.Meta             `json:"_meta"`
		Notifications grantedNotifications `json:"notifications"`
	}{subID, granted})
	finish := func(ew *core.EventWriter) {
		if res, err := s.MarshalResult(&mcp.SubscriptionsListenResult{Meta: subID}, rr); err == nil {
			_ = ew.Event("", "message", core.EncodeResult(rr.RPC.ID, res))
		}
	}
	if len(wanted) == 0 && follow == nil {
		stop()
		// Nothing to deliver: the acknowledgement and the result, at once.
		ew := core.StartEvents(w, http.StatusOK)
		if ew.Event("", "message", ack) == nil {
			finish(ew)
		}
		return
	}
	t.serveListen(w, r, rr, listenStream{ack: ack, sub: subID, wanted: wanted, follow: follow, finish: finish, stop: stop})
}

// grantLists is the part of the lists' changes asked for that the link's tool can
// tell, and the notification of each list granted.
func (t *Transport) grantLists(rr *core.Request, n mcp.NotificationSubscriptions) (mcp.NotificationSubscriptions, map[string]string) {
	var granted mcp.NotificationSubscriptions
	granted.ToolsListChanged = n.ToolsListChanged
	if tl, err := t.core.View().Snapshot().Tool(rr.Principal, rr.Tool); err == nil {
		prompts, resources := core.ListChangesOf(tl.Tool)
		granted.PromptsListChanged = n.PromptsListChanged && prompts
		granted.ResourcesListChanged = n.ResourcesListChanged && resources
	}
	wanted := map[string]string{} // wire list -> its notification
	if granted.ToolsListChanged {
		wanted[wire.ListTools] = core.NotifyToolsChanged
	}
	if granted.PromptsListChanged {
		wanted[wire.ListPrompts] = core.NotifyPromptsChanged
	}
	if granted.ResourcesListChanged {
		wanted[wire.ListResources] = core.NotifyResourcesChanged
	}
	return granted, wanted
}

// listenStream is what one subscriptions/listen stream carries.
type listenStream struct {
	ack    []byte
	sub    mcp.Meta
	wanted map[string]string // wire list -> its notification
	follow *core.TaskFollow  // nil: no tasks
	finish func(*core.EventWriter)
	stop   func() // ends the tasks' watch
}

// serveListen writes the acknowledgement, then the notifications of ls as they come,
// until the client leaves or the edge drains.
func (t *Transport) serveListen(w http.ResponseWriter, r *http.Request, rr *core.Request, ls listenStream) {
	s := t.core
	ln, release := s.Listen(rr.Tool)
	var tasks <-chan string
	if ls.follow != nil {
		tasks = ls.follow.Changed
	}
	s.ServeStream(w, r, func(ctx context.Context, ew *core.EventWriter) core.StreamEnd {
		defer release()
		defer ls.stop()
		if ew.Event("", "message", ls.ack) != nil {
			return core.EndClient
		}
		keepAlive := time.NewTicker(s.Config().KeepAlive)
		defer keepAlive.Stop()
		for {
			select {
			case <-ln.Wake:
				if ls.writeLists(ew, ln.Take()) != nil {
					return core.EndClient
				}
			case id, ok := <-tasks:
				if !ok {
					tasks = nil // the watch ended with the request
					continue
				}
				if msg := ls.follow.Notification(ctx, id, ls.sub); msg != nil && ew.Event("", "message", msg) != nil {
					return core.EndClient
				}
			case <-keepAlive.C:
				if ew.KeepAlive(s.Config().KeepAlive) != nil {
					return core.EndClient
				}
			case <-s.Draining():
				ls.finish(ew)
				return core.EndServer
			case <-ctx.Done():
				return core.EndClient
			}
		}
	}, func(core.StreamEnd) {})
}

// writeLists writes the notification of each list granted that changed.
func (ls *listenStream) writeLists(ew *core.EventWriter, changed map[string]bool) error {
	for _, list := range []string{wire.ListTools, wire.ListPrompts, wire.ListResources} {
		method := ls.wanted[list]
		if method == "" || !changed[list] {
			continue
		}
		if err := ew.Event("", "message", core.EncodeNotification(method, struct {
			Meta mcp.Meta `json:"_meta"`
		}{ls.sub})); err != nil {
			return err
		}
	}
	return nil
}
