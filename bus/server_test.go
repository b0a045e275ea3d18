package bus_test

import (
	"fmt"
	"path/filepath"
	"testing"

	"github.com/toolgate/toolgate/bus"
	"github.com/toolgate/toolgate/busauth"
	"github.com/toolgate/toolgate/internal/testenv"
)

// TestARouteWithoutTheCAsCertificateIsRefused: a node whose certificate another CA
// signed cannot join a secured cluster, while the cluster's own nodes stay routed.
func TestARouteWithoutTheCAsCertificateIsRefused(t *testing.T) {
	sec := testenv.NewSecurity(t)
	c := testenv.NewSecureCluster(t, sec)
	rogue := testenv.NewSecurity(t)
	routeURL := c.Servers[0].ClusterAddr()
	intruder := testenv.ServerWith(t, func(cfg *bus.ServerConfig) {
		// The deployment's operator and CA: only the node's own certificate is not the
		// deployment's, so only the cluster's check of it can keep the node out.
		sec.Apply(t, cfg, true)
		cfg.TLS.Cert = filepath.Join(rogue.CertDir, busauth.ServerCertFile)
		cfg.TLS.Key = filepath.Join(rogue.CertDir, busauth.ServerKeyFile)
		cfg.Name = "intruder"
		cfg.Cluster = bus.ClusterConfig{Name: "tg-test", Host: "127.0.0.1", Port: -1,
			Routes: []string{fmt.Sprintf("nats-route://%s", routeURL.String())}}
	})
	// The intruder keeps trying its route: wait until the node it dials has refused it
	// more than once, as each attempt is logged.
	refusals := testenv.RecordServerLog(c.Servers[0], false)
	testenv.WaitFor(t, "the node refused the intruder's route twice", func() bool {
		return len(refusals.Matching("TLS route handshake error")) >= 2
	})
	if n := intruder.NumRoutes(); n != 0 {
		t.Fatalf("the intruder has %d routes", n)
	}
	for i, s := range c.Servers {
		if n := s.NumRoutes(); n < 2 {
			t.Errorf("node %d has %d routes", i+1, n)
		}
	}
}
