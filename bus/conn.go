package bus

import (
	"fmt"
	"log/slog"
	"time"

	"github.com/nats-io/nats.go"
)

// How often a connection asks its server for a sign of life, and how many asks may go
// unanswered before it is given up.
const (
	PingInterval = 2 * time.Second
	MaxPingsOut  = 2
)

// Connect dials NATS with the options every toolgate role wants: reconnect forever
// (an edge or worker that gives up is worse than one that waits), a name that shows in
// server monitoring, and logged connection changes. A server that stops answering
// without closing the connection (it hangs, or the network between is cut) is given
// up after about PingInterval × (MaxPingsOut + 1), not the client's default of
// minutes, and another node of the cluster is tried.
func Connect(url, name string, log *slog.Logger, extra ...nats.Option) (*nats.Conn, error) {
	if log == nil {
		log = slog.Default()
	}
	opts := []nats.Option{
		nats.Name(name),
		nats.MaxReconnects(-1),
		nats.ReconnectWait(250 * time.Millisecond),
		nats.ReconnectJitter(100*time.Millisecond, time.Second),
		nats.RetryOnFailedConnect(false),
		nats.PingInterval(PingInterval),
		nats.MaxPingsOutstanding(MaxPingsOut),
		nats.DisconnectErrHandler(func(_ *nats.Conn, err error) {
			if err != nil {
				log.Warn("nats disconnected", "err", err)
			}
		}),
		nats.ReconnectHandler(func(nc *nats.Conn) {
			log.Info("nats reconnected", "url", nc.ConnectedUrlRedacted())
		}),
		nats.ErrorHandler(func(_ *nats.Conn, sub *nats.Subscription, err error) {
			subj := ""
			if sub != nil {
				subj = sub.Subject
			}
			log.Error("nats async error", "subject", subj, "err", err)
		}),
	}
	nc, err := nats.Connect(url, append(opts, extra...)...)
	if err != nil {
		return nil, fmt.Errorf("bus: connect %s: %w", url, err)
	}
	log.Info("nats connected", "url", nc.ConnectedUrlRedacted())
	return nc, nil
}
