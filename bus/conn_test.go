package bus_test

import (
	"bufio"
	"context"
	"errors"
	"io"
	"net"
	"net/url"
	"os"
	"path/filepath"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/nats-io/nats.go"

	"github.com/toolgate/toolgate/bus"
	"github.com/toolgate/toolgate/busauth"
	"github.com/toolgate/toolgate/internal/testenv"
)

// TestConnectNamesWhyItWasRefused connects with what a misconfigured role would
// have, to servers with authentication and TLS on, and checks that each refusal is
// an error naming its cause, at once, rather than a connection retrying forever.
func TestConnectNamesWhyItWasRefused(t *testing.T) {
	sec := testenv.NewSecurity(t)
	secured := testenv.SecureServer(t, sec, true)
	plainTLS := testenv.ServerWith(t, func(cfg *bus.ServerConfig) { // TLS, anyone
		cfg.TLS = bus.ServerTLS{Cert: filepath.Join(sec.CertDir, busauth.ServerCertFile), Key: filepath.Join(sec.CertDir, busauth.ServerKeyFile)}
	})
	verifying := testenv.ServerWith(t, func(cfg *bus.ServerConfig) { // TLS with client certificates
		sec.Apply(t, cfg, true)
		cfg.TLS.VerifyClients = true
	})
	open := testenv.Server(t)
	otherName := t.TempDir() // certificates for another host name than the one connected to
	if _, err := busauth.Certificates(otherName, []string{"nats-1"}); err != nil {
		t.Fatal(err)
	}
	misnamed := testenv.ServerWith(t, func(cfg *bus.ServerConfig) {
		cfg.TLS = bus.ServerTLS{Cert: filepath.Join(otherName, busauth.ServerCertFile), Key: filepath.Join(otherName, busauth.ServerKeyFile)}
	})
	other := testenv.NewSecurity(t) // another deployment
	edgeCreds := sec.Deployment.CredsFile(busauth.RoleEdge)
	ca := filepath.Join(sec.CertDir, busauth.CAFile)

	tests := []struct {
		name string
		url  string
		auth bus.ClientAuth
		want error
	}{
		{"no credentials", secured.ClientURL(), bus.ClientAuth{CA: ca}, bus.ErrNoCredentials},
		{"another deployment's credentials", secured.ClientURL(), bus.ClientAuth{Creds: other.Deployment.CredsFile(busauth.RoleEdge), CA: ca}, bus.ErrCredentialsRefused},
		{"no CA for a TLS-only server", secured.ClientURL(), bus.ClientAuth{Creds: edgeCreds}, bus.ErrServerNotTrusted},
		{"another CA", secured.ClientURL(), bus.ClientAuth{Creds: edgeCreds, CA: filepath.Join(other.CertDir, busauth.CAFile)}, bus.ErrServerNotTrusted},
		{"a server certificate for another name", misnamed.ClientURL(), bus.ClientAuth{CA: filepath.Join(otherName, busauth.CAFile)}, bus.ErrServerName},
		{"TLS asked of a server without it", open.ClientURL(), bus.ClientAuth{CA: ca}, bus.ErrNoTLS},
		{"no client certificate for a server that verifies clients", verifying.ClientURL(), bus.ClientAuth{Creds: edgeCreds, CA: ca}, bus.ErrClientCertRequired},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			start := time.Now()
			nc, err := bus.Connect(tt.url, "test", testenv.Logger(t), tt.auth.Options()...)
			if err == nil {
				nc.Close()
				t.Fatal("connected")
			}
			if !errors.Is(err, tt.want) || !strings.Contains(err.Error(), tt.want.Error()) {
				t.Fatalf("got %v, want %v", err, tt.want)
			}
			if took := time.Since(start); took > 10*time.Second {
				t.Errorf("refused only after %v", took)
			}
		})
	}

	t.Run("the right credentials, CA and client certificate are let in", func(t *testing.T) {
		for _, s := range []string{secured.ClientURL(), verifying.ClientURL()} {
			a := bus.ClientAuth{Creds: edgeCreds, CA: ca,
				Cert: filepath.Join(sec.CertDir, busauth.ClientCertFile), Key: filepath.Join(sec.CertDir, busauth.ClientKeyFile)}
			testenv.SecureConn(t, s, a)
		}
		testenv.SecureConn(t, plainTLS.ClientURL(), bus.ClientAuth{CA: ca})
	})

	t.Run("a plaintext client of a TLS-only server gets no answer but a closed connection", func(t *testing.T) {
		u, _ := url.Parse(secured.ClientURL())
		conn, err := net.DialTimeout("tcp", u.Host, 5*time.Second)
		if err != nil {
			t.Fatal(err)
		}
		defer conn.Close()
		_ = conn.SetDeadline(time.Now().Add(10 * time.Second))
		r := bufio.NewReader(conn)
		info, err := r.ReadString('\n')
		if err != nil || !strings.Contains(info, `"tls_required":true`) {
			t.Fatalf("INFO %q %v", info, err)
		}
		if _, err := conn.Write([]byte("CONNECT {\"verbose\":false}\r\nPING\r\n")); err != nil {
			t.Fatal(err)
		}
		rest, err := r.ReadString('\n')
		if strings.Contains(rest, "PONG") || err == nil && !strings.HasPrefix(rest, "-ERR") {
			t.Fatalf("the server answered plaintext: %q %v", rest, err)
		}
	})

	t.Run("a credentials file that is missing is named before connecting", func(t *testing.T) {
		missing := filepath.Join(t.TempDir(), "none.creds")
		err := bus.ClientAuth{Creds: missing}.Validate()
		if !errors.Is(err, os.ErrNotExist) || !strings.HasPrefix(err.Error(), "nats-creds: ") {
			t.Fatalf("got %v", err)
		}
	})
}

// TestAConnectionLeavesAServerThatStopsAnswering: the server a client is connected to
// stops answering but keeps the connection open (it hangs, or the network between is
// cut). The client gives it up within seconds, by its pings, and goes on with another
// node, instead of waiting minutes with every request it sends lost.
func TestAConnectionLeavesAServerThatStopsAnswering(t *testing.T) {
	srv := testenv.Server(t)
	proxy := testenv.NewStallingProxy(t, srv.Addr().String())
	through, direct := "nats://"+proxy.Addr, srv.ClientURL()
	nc, err := bus.Connect(through+","+direct, "test", testenv.Logger(t), nats.DontRandomize())
	if err != nil {
		t.Fatal(err)
	}
	defer nc.Close()
	if nc.ConnectedUrl() != through {
		t.Fatalf("connected to %s, want %s first", nc.ConnectedUrl(), through)
	}
	stalled := time.Now()
	proxy.Stall()
	promised := bus.PingInterval*time.Duration(bus.MaxPingsOut+2) + 5*time.Second
	testenv.Eventually(t, promised, "the client on another node", func() bool {
		return nc.IsConnected() && nc.ConnectedUrl() == direct
	})
	t.Logf("on another node %v after the server stopped answering", time.Since(stalled).Round(time.Millisecond))
	if err := nc.Flush(); err != nil {
		t.Fatalf("the connection on the other node: %v", err)
	}
}

// TestALookupTheDNSServerDropsCostsOneDial: while a container network's DNS server
// reloads (a node has just left the network) it drops queries, and a client that
// waited the resolver's own 5 seconds for one would be that long without a node. A
// connection looks a name up in tries of LookupAttempt, LookupAttempts at most,
// after which the next address is tried. Here the DNS server never answers at all:
// a lookup without a deadline would hold Connect for good.
func TestALookupTheDNSServerDropsCostsOneDial(t *testing.T) {
	var mu sync.Mutex
	var opened []net.Conn
	saved := net.DefaultResolver
	net.DefaultResolver = &net.Resolver{PreferGo: true, Dial: func(context.Context, string, string) (net.Conn, error) {
		asked, server := net.Pipe()
		go func() { _, _ = io.Copy(io.Discard, server) }() // takes every query, answers none
		mu.Lock()
		opened = append(opened, asked, server)
		mu.Unlock()
		return deaf{asked}, nil
	}}
	t.Cleanup(func() {
		net.DefaultResolver = saved
		mu.Lock()
		defer mu.Unlock()
		for _, c := range opened {
			_ = c.Close()
		}
	})

	srv := testenv.Server(t)
	_, port, _ := net.SplitHostPort(srv.Addr().String())
	done := make(chan *nats.Conn, 1)
	go func() {
		nc, err := bus.Connect("nats://unanswered.invalid:"+port+","+srv.ClientURL(), "test", testenv.Logger(t), nats.DontRandomize())
		if err != nil {
			t.Error(err)
		}
		done <- nc
	}()
	select {
	case nc := <-done:
		if nc == nil {
			return
		}
		defer nc.Close()
		if nc.ConnectedUrl() != srv.ClientURL() {
			t.Errorf("connected to %s", nc.ConnectedUrl())
		}
	case <-time.After(time.Minute):
		t.Fatal("Connect is still waiting on a lookup the DNS server never answers")
	}
}

// deaf is a connection to a DNS server that ignores the deadlines the resolver sets,
// so a lookup ends only when its caller stops waiting.
type deaf struct{ net.Conn }

func (deaf) SetDeadline(time.Time) error      { return nil }
func (deaf) SetReadDeadline(time.Time) error  { return nil }
func (deaf) SetWriteDeadline(time.Time) error { return nil }
