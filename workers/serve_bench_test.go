package workers_test

import (
	"testing"
	"time"

	"github.com/nats-io/nats.go"
	"github.com/nats-io/nats.go/micro"

	"github.com/toolgate/toolgate/internal/testenv"
)

// BenchmarkServe is what serving a subject costs a worker apart from its SDK: one
// request answered with its own bytes by a nats micro endpoint (as the SDK serves its
// methods) and by a plain queue subscription, with callers in parallel on another
// connection. The difference is nats micro's own per-call work.
func BenchmarkServe(b *testing.B) {
	srv := testenv.Server(b)
	echo := func(nc *nats.Conn, m *nats.Msg) { _ = nc.Publish(m.Reply, m.Data) }
	for _, bc := range []struct {
		name  string
		serve func(b *testing.B, nc *nats.Conn, subject string)
	}{
		{"micro endpoint", func(b *testing.B, nc *nats.Conn, subject string) {
			svc, err := micro.AddService(nc, micro.Config{Name: "bench", Version: "1.0.0", QueueGroup: "q"})
			if err != nil {
				b.Fatal(err)
			}
			b.Cleanup(func() { _ = svc.Stop() })
			if err := svc.AddEndpoint("echo", micro.HandlerFunc(func(r micro.Request) { _ = r.Respond(r.Data()) }),
				micro.WithEndpointSubject(subject)); err != nil {
				b.Fatal(err)
			}
		}},
		{"queue subscription", func(b *testing.B, nc *nats.Conn, subject string) {
			if _, err := nc.QueueSubscribe(subject, "q", func(m *nats.Msg) { echo(nc, m) }); err != nil {
				b.Fatal(err)
			}
		}},
	} {
		b.Run(bc.name, func(b *testing.B) {
			server, caller := testenv.Conn(b, srv.ClientURL()), testenv.Conn(b, srv.ClientURL())
			subject := "bench." + nats.NewInbox()[len("_INBOX."):]
			bc.serve(b, server, subject)
			if err := server.Flush(); err != nil {
				b.Fatal(err)
			}
			data := []byte(`{"message":"hello, gateway","n":42}`)
			b.SetParallelism(16)
			b.ReportAllocs()
			b.RunParallel(func(pb *testing.PB) {
				for pb.Next() {
					if _, err := caller.Request(subject, data, 5*time.Second); err != nil {
						b.Error(err)
						return
					}
				}
			})
		})
	}
}
