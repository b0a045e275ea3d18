package bus

import (
	"context"
	"crypto/x509"
	"errors"
	"fmt"
	"log/slog"
	"net"
	"os"
	"strings"
	"sync"
	"time"
	"weak"

	"github.com/nats-io/nats.go"
)

// Why a connection was refused or lost, for a role to report and exit with instead of
// retrying what cannot succeed. Connect's errors wrap one of them (and the client's
// own error) when it applies.
var (
	// ErrNoCredentials: the server admits only users with credentials, and none were given.
	ErrNoCredentials = errors.New("the server requires credentials and none were given")
	// ErrCredentialsRefused: the server does not accept the credentials: signed by an
	// account it does not trust, or revoked, or expired.
	ErrCredentialsRefused = errors.New("the server refused the credentials (not signed for this deployment, revoked or expired)")
	// ErrCredentialsRevoked: the credentials were revoked while connected.
	ErrCredentialsRevoked = errors.New("the credentials were revoked")
	// ErrCredentialsExpired: the credentials expired.
	ErrCredentialsExpired = errors.New("the credentials expired")
	// ErrServerNotTrusted: the server's TLS certificate is not signed by a CA this
	// client trusts (no CA given, or another one).
	ErrServerNotTrusted = errors.New("the server's TLS certificate is not signed by a trusted CA")
	// ErrServerName: the server's certificate does not name the host connected to.
	ErrServerName = errors.New("the server's TLS certificate is not valid for the host connected to")
	// ErrClientCertRequired: the server verifies clients' certificates, and this
	// client gave none it accepts.
	ErrClientCertRequired = errors.New("the server requires a client certificate signed by its CA")
	// ErrNoTLS: TLS was asked for and the server does not offer it.
	ErrNoTLS = errors.New("TLS was asked for and the server does not offer it")
	// ErrConnectionLost: the connection closed for good while the role ran (its
	// credentials refused on reconnecting); the context of Watch ends with it.
	ErrConnectionLost = errors.New("bus: connection to NATS closed for good")
)

// ClientAuth is how a role proves itself to NATS and checks the server: a user
// credentials file (its JWT and seed), the CA that signs the servers' certificates,
// and a client certificate for servers that verify clients. Empty fields are not used.
type ClientAuth struct {
	Creds string
	CA    string
	Cert  string
	Key   string
}

// Validate names the first file that is missing or unreadable, before any
// connection is tried.
func (a ClientAuth) Validate() error {
	if (a.Cert == "") != (a.Key == "") {
		return errors.New("nats-tls-cert, nats-tls-key: a client certificate needs its key, and a key its certificate")
	}
	for _, f := range []struct{ name, path string }{
		{"nats-creds", a.Creds}, {"nats-tls-ca", a.CA}, {"nats-tls-cert", a.Cert}, {"nats-tls-key", a.Key},
	} {
		if f.path == "" {
			continue
		}
		if _, err := os.ReadFile(f.path); err != nil {
			return fmt.Errorf("%s: %w", f.name, err)
		}
	}
	return nil
}

// Options are the nats.Options that apply a: the credentials, and TLS when any TLS
// file is given (a tls:// URL, or a server that requires TLS, turns it on too).
func (a ClientAuth) Options() []nats.Option {
	var opts []nats.Option
	if a.Creds != "" {
		opts = append(opts, nats.UserCredentials(a.Creds))
	}
	if a.CA != "" {
		opts = append(opts, nats.RootCAs(a.CA))
	}
	if a.Cert != "" {
		opts = append(opts, nats.ClientCert(a.Cert, a.Key))
	}
	return opts
}

// How often a connection asks its server for a sign of life, and how many asks may go
// unanswered before it is given up.
const (
	PingInterval = 500 * time.Millisecond
	MaxPingsOut  = 2
)

// DialTimeout bounds opening the TCP connection to one server address (its name's
// lookup is bounded apart, see LookupAttempt): an address that does not answer (a node cut off the network, or
// one that moved) is left for the next within it, so a client reconnecting tries every
// node in seconds. The handshake after it (TLS, the server's check of the credentials)
// has the client's own timeout, 5 seconds.
const DialTimeout = time.Second

// Connect dials NATS with the options every toolgate role wants: reconnect forever
// (an edge or worker that gives up is worse than one that waits), a name that shows in
// server monitoring, and logged connection changes. A refusal that retrying cannot
// cure (credentials, TLS) is named in the error: see ErrNoCredentials and the others.
// A server that stops answering without closing the connection (it hangs, or the
// network between is cut) is given up after about PingInterval × (MaxPingsOut + 1),
// not the client's default of minutes, and another node of the cluster is tried.
func Connect(url, name string, log *slog.Logger, extra ...nats.Option) (*nats.Conn, error) {
	if log == nil {
		log = slog.Default()
	}
	o := nats.GetDefaultOptions()
	for _, u := range strings.Split(url, ",") { // as nats.Connect reads its URL
		o.Servers = append(o.Servers, strings.TrimSpace(u))
	}
	opts := []nats.Option{
		nats.Name(name),
		nats.MaxReconnects(-1),
		nats.ReconnectWait(250 * time.Millisecond),
		nats.ReconnectJitter(100*time.Millisecond, time.Second),
		nats.RetryOnFailedConnect(false),
		// Long enough for a server to look up an account it does not know (up to 2s)
		// and refuse the user by name, rather than the client timing out first.
		nats.Timeout(5 * time.Second),
		nats.PingInterval(PingInterval),
		nats.MaxPingsOutstanding(MaxPingsOut),
		// The client would look a server's name up itself, with no deadline: a
		// lookup the DNS server drops (as a container network's resolver does while
		// it reloads, when a node leaves the network) holds the reconnect for the
		// resolver's 5 seconds. The dialer looks it up in tries of LookupAttempt.
		nats.SkipHostLookup(),
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
	for _, opt := range append(opts, extra...) {
		if err := opt(&o); err != nil {
			return nil, fmt.Errorf("bus: connect %s: %w", url, err)
		}
	}
	d := &dialer{Dialer: net.Dialer{Timeout: DialTimeout, KeepAlive: -1}}
	if o.CustomDialer == nil {
		o.CustomDialer = d
	}
	nc, err := o.Connect()
	if err != nil {
		return nil, fmt.Errorf("bus: connect %s: %w", url, explain(err, o.UserJWT != nil || o.User != "" || o.Token != "" || o.Nkey != ""))
	}
	keepDialer(nc, d)
	log.Info("nats connected", "url", nc.ConnectedUrlRedacted())
	return nc, nil
}

// dialer dials as the client does by default and keeps the connection it made last,
// so that Reconnect can drop it.
type dialer struct {
	net.Dialer
	mu   sync.Mutex
	last net.Conn
}

func (d *dialer) Dial(network, address string) (net.Conn, error) {
	host, port, err := net.SplitHostPort(address)
	if err != nil || net.ParseIP(host) != nil {
		return d.dial(network, address)
	}
	addrs, err := lookup(host)
	if err != nil {
		return nil, err
	}
	for _, a := range addrs {
		var c net.Conn
		if c, err = d.dial(network, net.JoinHostPort(a, port)); err == nil {
			return c, nil
		}
	}
	return nil, err
}

func (d *dialer) dial(network, address string) (net.Conn, error) {
	c, err := d.Dialer.Dial(network, address)
	if err == nil {
		d.mu.Lock()
		d.last = c
		d.mu.Unlock()
	}
	return c, err
}

// A server's name is looked up in tries of LookupAttempt, up to LookupAttempts of
// them: a DNS server that dropped a query (as a container network's does while it
// reloads, when a node leaves the network) costs one try, not the resolver's own
// 5 seconds, and one that is slow for a while (it has been seen to be, just after a
// stack starts) is given a few seconds in all.
const (
	LookupAttempt  = time.Second
	LookupAttempts = 4
)

// lookup resolves host, asking again after a try that got no answer in time. Each
// try has a resolver of its own (as net.DefaultResolver is set up): a resolver
// shares one lookup of a name among its callers, so a second try on the same one
// would only wait on the first query again.
func lookup(host string) ([]string, error) {
	var err error
	for range LookupAttempts {
		r := &net.Resolver{PreferGo: net.DefaultResolver.PreferGo, StrictErrors: net.DefaultResolver.StrictErrors, Dial: net.DefaultResolver.Dial}
		ctx, cancel := context.WithTimeout(context.Background(), LookupAttempt)
		var ips []net.IPAddr
		ips, err = r.LookupIPAddr(ctx, host) // returns at the deadline, whatever the query does
		cancel()
		var dnsErr *net.DNSError
		if err == nil || (errors.As(err, &dnsErr) && dnsErr.IsNotFound) {
			addrs := make([]string, len(ips))
			for i, ip := range ips {
				addrs[i] = ip.String()
			}
			return addrs, err
		}
	}
	return nil, err
}

// drop closes the connection made last; false when there is none.
func (d *dialer) drop() bool {
	d.mu.Lock()
	defer d.mu.Unlock()
	if d.last == nil {
		return false
	}
	_ = d.last.Close()
	return true
}

// dialers holds the dialer of each connection Connect made, by a weak pointer to the
// connection, so that a connection no longer used is not kept.
var dialers sync.Map // weak.Pointer[nats.Conn] -> *dialer

func keepDialer(nc *nats.Conn, d *dialer) {
	dialers.Range(func(k, _ any) bool {
		if k.(weak.Pointer[nats.Conn]).Value() == nil {
			dialers.Delete(k)
		}
		return true
	})
	dialers.Store(weak.Make(nc), d)
}

// Reconnect gives up the server nc is connected to and goes on to another, as the
// client does when its pings go unanswered: what is published meanwhile waits in the
// client's buffer, subscriptions are made again on the new server, and requests in
// flight still take their replies there. (The client's own ForceReconnect fails every
// request in flight instead.) For a server that stopped answering, sooner than the
// pings notice.
func Reconnect(nc *nats.Conn) error {
	if d, ok := dialers.Load(weak.Make(nc)); ok && d.(*dialer).drop() {
		return nil
	}
	return nc.ForceReconnect()
}

// explain puts the cause a user can act on in front of the client's error, when
// there is one.
func explain(err error, hadCredentials bool) error {
	var unknownCA x509.UnknownAuthorityError
	var hostname x509.HostnameError
	var cause error
	switch {
	case errors.Is(err, nats.ErrAuthorization) && !hadCredentials:
		cause = ErrNoCredentials
	case errors.Is(err, nats.ErrAuthorization):
		cause = ErrCredentialsRefused
	case errors.Is(err, nats.ErrAuthRevoked):
		cause = ErrCredentialsRevoked
	case errors.Is(err, nats.ErrAuthExpired):
		cause = ErrCredentialsExpired
	case errors.As(err, &unknownCA):
		cause = ErrServerNotTrusted
	case errors.As(err, &hostname):
		cause = ErrServerName
	// A server refusing the client's certificate is seen as its TLS alert, which
	// reaches the client only as text, or, as TLS 1.3 finishes the client's side of
	// the handshake first, as the server hanging up right after it.
	case strings.Contains(err.Error(), "tls: certificate required"), strings.Contains(err.Error(), "tls: bad certificate"),
		errors.Is(err, nats.ErrTLS) && strings.Contains(err.Error(), "closed by remote after TLS handshake"):
		cause = ErrClientCertRequired
	case errors.Is(err, nats.ErrSecureConnWanted):
		cause = ErrNoTLS
	default:
		return err
	}
	return fmt.Errorf("%w: %w", cause, err)
}

// Watch returns a context that ends when ctx does or when nc closes for good without
// Close being called first: the servers refused its credentials on reconnecting
// (revoked or expired ones). Its cause then wraps ErrConnectionLost and names why, so
// a role can stop and exit with it instead of waiting on a connection that will not
// come back. Call stop before closing nc.
func Watch(ctx context.Context, nc *nats.Conn) (watched context.Context, stop context.CancelFunc) {
	ctx, cancel := context.WithCancelCause(ctx)
	nc.SetClosedHandler(func(nc *nats.Conn) {
		err := nc.LastError()
		if err == nil {
			err = errors.New("closed")
		}
		cancel(fmt.Errorf("%w: %w", ErrConnectionLost, explain(err, true)))
	})
	return ctx, func() { cancel(context.Canceled) }
}
