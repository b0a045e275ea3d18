package core

import (
	"context"
	"encoding/json"
	"fmt"
	"sync"
	"time"

	"github.com/modelcontextprotocol/go-sdk/mcp"

	"github.com/toolgate/toolgate/calls"
)

// Task status on a subscriptions/listen stream (2026-07-28, the tasks extension): a
// client names the tasks it follows in notifications.taskIds, and the stream carries
// notifications/tasks, the task as tasks/get would answer it, each time its status
// changes. The status lives in the task's call record (tg-calls), written by whichever
// edge runs the call or takes its tasks/update or tasks/cancel; the stream watches the
// record, so the edge that serves it holds nothing of the task.
//
// One change is written by nobody: a task whose edge stopped before recording its end
// reads as failed once overdue (calls.Record.Overdue), with no record written then. The
// stream keeps a timer per task it last saw working, to its overdue moment, and reads
// the record again when it fires.

// NotifyTasks is the tasks extension's status notification.
const NotifyTasks = "notifications/tasks"

// TaskFollow is the kept tasks one subscriptions/listen stream follows.
type TaskFollow struct {
	// IDs are the task ids granted, as the acknowledgement names them.
	IDs []string
	// Changed carries the id of a task whose record was written (and each one's once
	// at the start), or whose record said working and is now overdue; Notification
	// tells whether its status changed.
	Changed <-chan string
	s       *Server
	r       *Request
	sent    map[string]string // id -> the status (and message) last sent
	due     *overdueTimers
}

// FollowTasks checks the task ids a subscriptions/listen request r asks to follow
// and starts watching their records until ctx ends. Each must be a task of r's caller
// and r's tool, as tasks/get asks (-32602 otherwise, for an unknown id as for
// another's), and there may be at most MaxListenTasks. A tool whose server keeps its
// own tasks is granted none (nil): its task ids are its server's to follow.
func (s *Server) FollowTasks(ctx context.Context, r *Request, ids []string) (*TaskFollow, error) {
	if len(ids) == 0 {
		return nil, nil
	}
	if !declaresTasks(r.Meta) {
		return nil, missingTasksCapability(r.RPC.Method)
	}
	t, err := s.view.Snapshot().Tool(r.Principal, r.Tool)
	if err != nil || !s.keepsTasks(t.Tool, true) {
		return nil, nil
	}
	if len(ids) > s.cfg.MaxListenTasks {
		return nil, badTaskParams(r, "%s: notifications.taskIds names %d tasks, more than the %d a stream may follow (--mcp-listen-tasks)",
			r.RPC.Method, len(ids), s.cfg.MaxListenTasks)
	}
	seen := map[string]bool{}
	var granted []string
	for _, id := range ids {
		if seen[id] {
			continue
		}
		seen[id] = true
		if _, _, err := s.readKeptTask(ctx, r, id); err != nil {
			return nil, err
		}
		granted = append(granted, id)
	}
	changed, err := s.cfg.Tasks.Watch(ctx, granted)
	if err != nil {
		return nil, fmt.Errorf("subscriptions/listen: %w", err)
	}
	due := &overdueTimers{fired: make(chan string, 2*len(granted)), timers: map[string]*time.Timer{}}
	return &TaskFollow{IDs: granted, Changed: due.merge(ctx, changed), s: s, r: r, sent: map[string]string{}, due: due}, nil
}

// Notification is the notifications/tasks of task id for the stream subscription
// sub, read from its record as its owner: nil when its status (and status message)
// is the one sent last, or the record cannot be read now.
func (f *TaskFollow) Notification(ctx context.Context, id string, sub mcp.Meta) []byte {
	rec, body, err := f.s.readKeptTask(ctx, f.r, id)
	if err != nil {
		return nil
	}
	f.due.arm(id, rec)
	fields := f.s.taskFieldsOf(rec, true)
	if f.sent[id] == fields.Status+"\x00"+fields.StatusMessage {
		return nil
	}
	task, err := json.Marshal(f.s.detailedTask(rec, body, true))
	if err != nil {
		return nil
	}
	var params map[string]json.RawMessage
	if json.Unmarshal(task, &params) != nil {
		return nil
	}
	if params["_meta"], err = json.Marshal(sub); err != nil {
		return nil
	}
	f.sent[id] = fields.Status + "\x00" + fields.StatusMessage
	return EncodeNotification(NotifyTasks, params)
}

// overdueTimers fire, for each followed task last read active, at the moment its
// record will read as overdue.
type overdueTimers struct {
	mu     sync.Mutex
	fired  chan string // buffered: two per task, a timer's id and a re-armed one's
	timers map[string]*time.Timer
	done   bool
}

// overdueMargin is waited past a record's overdue moment, so that the read it
// triggers finds the record overdue by the clock of the edge reading it.
const overdueMargin = 100 * time.Millisecond

// arm sets id's timer to rec's overdue moment while rec is active and not yet
// overdue, and stops it otherwise.
func (o *overdueTimers) arm(id string, rec *calls.Record) {
	o.mu.Lock()
	defer o.mu.Unlock()
	if t := o.timers[id]; t != nil {
		t.Stop()
		delete(o.timers, id)
	}
	now := time.Now()
	if o.done || !rec.Status.Active() || rec.Overdue(now) {
		return
	}
	wait := rec.Deadline.Add(calls.OverdueAfter + overdueMargin).Sub(now)
	o.timers[id] = time.AfterFunc(wait, func() {
		select {
		case o.fired <- id:
		default: // two a task cannot fill it: a timer never waits
		}
	})
}

// merge is the watch's changes and the fired timers in one channel, which ends with
// the watch's; the timers stop then.
func (o *overdueTimers) merge(ctx context.Context, changed <-chan string) <-chan string {
	out := make(chan string)
	go func() {
		defer close(out)
		defer o.stop()
		for {
			var id string
			select {
			case c, ok := <-changed:
				if !ok {
					return
				}
				id = c
			case id = <-o.fired:
			case <-ctx.Done():
				return
			}
			select {
			case out <- id:
			case <-ctx.Done():
				return
			}
		}
	}()
	return out
}

func (o *overdueTimers) stop() {
	o.mu.Lock()
	defer o.mu.Unlock()
	o.done = true
	for _, t := range o.timers {
		t.Stop()
	}
	clear(o.timers)
}
