package testenv

import (
	"net"
	"sync"
	"testing"
)

// StallingProxy passes TCP connections to a server until told to stall: then it passes
// no more bytes either way, and the connections stay open, as with a peer that hangs
// or a network that drops everything without a word.
type StallingProxy struct {
	Addr    string // host:port to connect to instead of the server
	stalled chan struct{}
	once    sync.Once
}

// NewStallingProxy passes connections to target until the test ends.
func NewStallingProxy(t testing.TB, target string) *StallingProxy {
	t.Helper()
	ln, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		t.Fatal(err)
	}
	p := &StallingProxy{Addr: ln.Addr().String(), stalled: make(chan struct{})}
	var mu sync.Mutex
	var conns []net.Conn
	t.Cleanup(func() {
		ln.Close()
		mu.Lock()
		defer mu.Unlock()
		for _, c := range conns {
			c.Close()
		}
	})
	go func() {
		for {
			in, err := ln.Accept()
			if err != nil {
				return
			}
			out, err := net.Dial("tcp", target)
			if err != nil {
				in.Close()
				continue
			}
			mu.Lock()
			conns = append(conns, in, out)
			mu.Unlock()
			go p.pass(out, in)
			go p.pass(in, out)
		}
	}()
	return p
}

func (p *StallingProxy) pass(dst, src net.Conn) {
	buf := make([]byte, 32<<10)
	for {
		n, err := src.Read(buf)
		select {
		case <-p.stalled:
			return // what arrives from now on is never passed on
		default:
		}
		if n > 0 {
			if _, werr := dst.Write(buf[:n]); werr != nil {
				return
			}
		}
		if err != nil {
			return
		}
	}
}

// Stall stops passing bytes, on every connection, now and to come.
func (p *StallingProxy) Stall() { p.once.Do(func() { close(p.stalled) }) }
