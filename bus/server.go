package bus

import (
	"errors"
	"fmt"
	"net/url"
	"time"

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

	Cluster ClusterConfig
}

// ClusterConfig joins a server into a NATS cluster. Leave Name empty for a single node.
type ClusterConfig struct {
	Name   string
	Host   string
	Port   int      // -1 picks a free one
	Routes []string // nats-route://host:port of the other nodes
}

// DefaultServerConfig is a single JetStream node on 127.0.0.1:4222.
func DefaultServerConfig() ServerConfig {
	return ServerConfig{Name: "toolgate", Host: "127.0.0.1", Port: 4222, JetStream: true}
}

// Validate names the first field that is wrong.
func (c ServerConfig) Validate() error {
	if c.JetStream && c.StoreDir == "" {
		return errors.New("nats: store-dir: required with JetStream")
	}
	if c.Cluster.Name != "" && c.Name == "" {
		return errors.New("nats: name: required in a cluster")
	}
	for _, r := range c.Cluster.Routes {
		if _, err := url.Parse(r); err != nil {
			return fmt.Errorf("nats: routes: %q: %w", r, err)
		}
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
	if cfg.Cluster.Name != "" {
		opts.Cluster = server.ClusterOpts{Name: cfg.Cluster.Name, Host: cfg.Cluster.Host, Port: cfg.Cluster.Port}
		for _, r := range cfg.Cluster.Routes {
			u, err := url.Parse(r)
			if err != nil {
				return nil, fmt.Errorf("nats: routes: %q: %w", r, err)
			}
			opts.Routes = append(opts.Routes, u)
		}
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
