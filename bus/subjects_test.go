package bus_test

import (
	"testing"

	"github.com/toolgate/toolgate/bus"
)

func TestSubjects(t *testing.T) {
	custom := bus.Subjects{Prefix: "acme.tg"}
	for _, tc := range []struct{ name, got, want string }{
		{"a call names the tool and method", bus.DefaultSubjects.Call("email", "send_email"), "tg.call.email.send_email"},
		{"every method of a tool", bus.DefaultSubjects.CallAll("email"), "tg.call.email.>"},
		{"a tool's queue group", bus.DefaultSubjects.QueueGroup("email"), "tg.email"},
		{"an empty prefix is the default", bus.Subjects{}.Cancel("req_1"), "tg.cancel.req_1"},
		{"a prefix of several tokens", custom.SessionReply("s1", "7"), "acme.tg.sess.s1.reply.7"},
		{"every cancel", custom.CancelAll(), "acme.tg.cancel.*"},
	} {
		t.Run(tc.name, func(t *testing.T) {
			if tc.got != tc.want {
				t.Fatalf("got %q, want %q", tc.got, tc.want)
			}
		})
	}
}
