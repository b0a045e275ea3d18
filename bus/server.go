package bus

import (
	"errors"
	"fmt"
	"net/url"
	"path/filepath"
	"time"

	"github.com/nats-io/jwt/v2"
	"github.com/nats-io/nats-server/v2/server"
)

// ServerConfig describes one embedded NATS server node.
type ServerConfig struct {
	Name      string // server name; unique within a cluster
	Host      string // client listen host
	Port      int    // client port; -1 picks a free one
	JetStream bool
	StoreDir  string // JetStream storage; required with JetStream
	// MaxPayload is the largest message the server accepts (bytes); 0 keeps the server's 1 MiB.
	MaxPayload int32
	// MonitorHost and MonitorPort serve the server's HTTP monitoring endpoints
	// (/healthz, /varz, /jsz); a port of 0 serves none.
	MonitorHost string
	MonitorPort int

	// PingInterval is how often the node asks a client it has heard nothing from for
	// a sign of life; after MaxPingsOut unanswered, the client is taken for gone and
	// its subscriptions with it. 0 keeps the server's default (2 minutes).
	PingInterval time.Duration

	Cluster ClusterConfig

	// Auth, when set, admits only users whose JWTs are signed by an account its
	// operator trusts; without it the server takes any connection (toolgate dev).
	Auth *ServerAuth
	// TLS, when its certificate is set, serves clients and routes over TLS only.
	TLS ServerTLS
}

// ClusterConfig joins a server into a NATS cluster. Leave Name empty for a single node.
type ClusterConfig struct {
	Name   string
	Host   string
	Port   int      // -1 picks a free one
	Routes []string // nats-route://host:port of the other nodes
	// PingInterval is how often a route is asked for a sign of life; after
	// MaxPingsOut unanswered, the node gives the route up, and with it the interest
	// of the other node's clients, so that messages stop going where they are lost.
	// 0 keeps the server's default (up to 30 seconds).
	PingInterval time.Duration
}

// Defaults of `toolgate nats` for PingInterval and ClusterConfig.PingInterval: a node
// cut off the network is given up by the other nodes (routes) within about a second
// and a half, and a client that vanished within about six seconds. Either way after
// MaxPingsOut pings unanswered.
const (
	DefaultRoutePing  = 500 * time.Millisecond
	DefaultClientPing = 2 * time.Second
)

// ServerAuth is decentralized JWT authentication (operator mode) with the NATS-based
// "full" account resolver: the node keeps every account JWT in ResolverDir, takes
// updates at run time from the system account ($SYS.REQ.CLAIMS.UPDATE), and shares
// them with the other nodes of its cluster. So a user revoked in the account's JWT is
// disconnected without a restart.
type ServerAuth struct {
	// Operator is the operator's JWT; it names the system account.
	Operator string
	// Accounts are account JWTs the node starts with (the system account's among
	// them). One the resolver already holds in a newer version is not replaced.
	Accounts []string
	// ResolverDir is where the node keeps account JWTs; <StoreDir>/jwt when empty.
	ResolverDir string
}

// ServerTLS is the node's certificate, for clients and routes, and the CA that signs
// the certificates of the other nodes (routes always verify each other) and, with
// VerifyClients, of clients.
type ServerTLS struct {
	CA, Cert, Key string // PEM files
	VerifyClients bool   // require clients to present a certificate the CA signed
}

// Enabled reports whether the node serves TLS.
func (t ServerTLS) Enabled() bool { return t.Cert != "" }

// MaxControlLine is the longest protocol line a node with ServerAuth takes (the
// server's max_control_line).
const MaxControlLine = 32 * 1024

// resolverSync is how often a node compares its account JWTs with its cluster's and
// takes what it missed, for instance an update sent while it was down.
const resolverSync = 30 * time.Second

// DefaultServerConfig is a single JetStream node on 127.0.0.1:4222.
func DefaultServerConfig() ServerConfig {
	return ServerConfig{Name: "toolgate", Host: "127.0.0.1", Port: 4222, JetStream: true}
}

// Validate names the first field that is wrong.
func (c ServerConfig) Validate() error {
	if c.JetStream && c.StoreDir == "" {
		return errors.New("nats: store-dir: required with JetStream")
	}
	if c.PingInterval < 0 || c.Cluster.PingInterval < 0 {
		return errors.New("nats: ping intervals must not be negative")
	}
	if c.Cluster.Name != "" && c.Name == "" {
		return errors.New("nats: name: required in a cluster")
	}
	for _, r := range c.Cluster.Routes {
		if _, err := url.Parse(r); err != nil {
			return fmt.Errorf("nats: routes: %q: %w", r, err)
		}
	}
	if c.Auth != nil {
		if c.Auth.Operator == "" {
			return errors.New("nats: auth: operator JWT required")
		}
		if c.Auth.ResolverDir == "" && c.StoreDir == "" {
			return errors.New("nats: auth: a resolver directory or store-dir is required")
		}
	}
	if (c.TLS.Cert == "") != (c.TLS.Key == "") {
		return errors.New("nats: tls: a certificate needs its key, and a key its certificate")
	}
	if c.TLS.Enabled() && c.TLS.CA == "" && (c.Cluster.Name != "" || c.TLS.VerifyClients) {
		return errors.New("nats: tls-ca: required to verify routes and client certificates")
	}
	if c.TLS.VerifyClients && !c.TLS.Enabled() {
		return errors.New("nats: tls-verify: needs the server's certificate and key")
	}
	return nil
}

// StartServer starts an embedded NATS server and waits until it accepts clients.
func StartServer(cfg ServerConfig) (*server.Server, error) {
	if err := cfg.Validate(); err != nil {
		return nil, err
	}
	opts := &server.Options{
		ServerName: cfg.Name,
		Host:       cfg.Host,
		Port:       cfg.Port,
		JetStream:  cfg.JetStream,
		StoreDir:   cfg.StoreDir,
		MaxPayload: cfg.MaxPayload,
		HTTPHost:   cfg.MonitorHost,
		HTTPPort:   cfg.MonitorPort,
		NoSigs:     true,
		NoLog:      true,
	}
	if cfg.PingInterval > 0 {
		opts.PingInterval, opts.MaxPingsOut = cfg.PingInterval, MaxPingsOut
	}
	if cfg.Cluster.Name != "" {
		opts.Cluster = server.ClusterOpts{Name: cfg.Cluster.Name, Host: cfg.Cluster.Host, Port: cfg.Cluster.Port}
		if cfg.Cluster.PingInterval > 0 {
			opts.Cluster.PingInterval, opts.Cluster.MaxPingsOut = cfg.Cluster.PingInterval, MaxPingsOut
		}
		for _, r := range cfg.Cluster.Routes {
			u, err := url.Parse(r)
			if err != nil {
				return nil, fmt.Errorf("nats: routes: %q: %w", r, err)
			}
			opts.Routes = append(opts.Routes, u)
		}
	}
	if err := cfg.applyAuth(opts); err != nil {
		return nil, err
	}
	if err := cfg.applyTLS(opts); err != nil {
		return nil, err
	}
	s, err := server.NewServer(opts)
	if err != nil {
		return nil, fmt.Errorf("nats: new server: %w", err)
	}
	go s.Start()
	if !s.ReadyForConnections(10 * time.Second) {
		s.Shutdown()
		return nil, errors.New("nats: server not ready for connections within 10s")
	}
	return s, nil
}

func (c ServerConfig) applyAuth(opts *server.Options) error {
	if c.Auth == nil {
		return nil
	}
	op, err := jwt.DecodeOperatorClaims(c.Auth.Operator)
	if err != nil {
		return fmt.Errorf("nats: auth: operator JWT: %w", err)
	}
	if op.SystemAccount == "" {
		return errors.New("nats: auth: the operator JWT names no system account")
	}
	dir := c.Auth.ResolverDir
	if dir == "" {
		dir = filepath.Join(c.StoreDir, "jwt")
	}
	// Deleted accounts are renamed, not removed: an account deleted by mistake can be
	// brought back.
	res, err := server.NewDirAccResolver(dir, 0, resolverSync, server.RenameDeleted)
	if err != nil {
		return fmt.Errorf("nats: auth: resolver %s: %w", dir, err)
	}
	for i, a := range c.Auth.Accounts {
		ac, err := jwt.DecodeAccountClaims(a)
		if err != nil {
			return fmt.Errorf("nats: auth: account JWT %d: %w", i+1, err)
		}
		// Store keeps a newer JWT the resolver learned (a revocation) over this one.
		if err := res.Store(ac.Subject, a); err != nil {
			return fmt.Errorf("nats: auth: account %s: %w", ac.Name, err)
		}
	}
	// A user's JWT travels in its CONNECT line, and the edge's, with every JetStream
	// subject it may use, is longer than the 4 KiB the server takes by default.
	opts.MaxControlLine = MaxControlLine
	opts.TrustedOperators = []*jwt.OperatorClaims{op}
	opts.SystemAccount = op.SystemAccount
	opts.AccountResolver = res
	// A user of an account the server does not know is refused once the resolver has
	// looked for it (up to 1.9s); the server's early first PING to a new client (at 2s
	// to 2.4s) would race that refusal, and a client that reads the PING first reports
	// a protocol error instead of its refused credentials. The first PING comes at the
	// ping interval instead.
	opts.DisableShortFirstPing = true
	return nil
}

func (c ServerConfig) applyTLS(opts *server.Options) error {
	if !c.TLS.Enabled() {
		return nil
	}
	clients, err := server.GenTLSConfig(&server.TLSConfigOpts{
		CertFile: c.TLS.Cert, KeyFile: c.TLS.Key, CaFile: c.TLS.CA, Verify: c.TLS.VerifyClients,
	})
	if err != nil {
		return fmt.Errorf("nats: tls: %w", err)
	}
	opts.TLSConfig, opts.TLSVerify, opts.TLSTimeout = clients, c.TLS.VerifyClients, tlsTimeout
	if c.Cluster.Name == "" {
		return nil
	}
	// Routes verify each other both ways: a node joins the cluster only with a
	// certificate the CA signed.
	routes, err := server.GenTLSConfig(&server.TLSConfigOpts{
		CertFile: c.TLS.Cert, KeyFile: c.TLS.Key, CaFile: c.TLS.CA, Verify: true,
	})
	if err != nil {
		return fmt.Errorf("nats: tls: routes: %w", err)
	}
	routes.RootCAs = routes.ClientCAs
	opts.Cluster.TLSConfig, opts.Cluster.TLSTimeout = routes, tlsTimeout
	return nil
}

// tlsTimeout is the seconds a TLS handshake may take: the server's default of 2 is
// short for a loaded 2-core machine doing many at once.
const tlsTimeout = 5
