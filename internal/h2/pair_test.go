package h2

import (
	"context"
	"crypto/tls"
	"errors"
	"io"
	"log"
	"net"
	"net/http"
	"sync"
	"testing"
	"time"

	"golang.org/x/net/http2"

	"github.com/h2file/caddy-h2file/internal/harness"
)

// pair is one handler served twice over TLS on loopback: by the engine
// and by x/net's server (the reference), with a client that speaks only
// HTTP/2.
type pair struct {
	engineURL, xnetURL string
	engine             *Server
	client             *http.Client
}

// startPair serves h by both servers until the test ends, with cfg's
// settings (x/net's server gets its idle, read and write timeouts and
// MaxHeaderBytes).
func startPair(t *testing.T, h http.Handler, cfg Config) *pair {
	t.Helper()
	cert := harness.NewCert(t)
	p := &pair{engine: NewServer(h, cfg), client: harness.NewClient(t, "h2", cert.ClientTLS())}
	p.engineURL = "https://" + serveTLS(t, cert, func(tc *tls.Conn) {
		serveChecked(t, p.engine, tc)
	})
	// the same settings where x/net has them
	xs := &http2.Server{IdleTimeout: cfg.IdleTimeout}
	base := &http.Server{ErrorLog: log.New(io.Discard, "", 0), ReadTimeout: cfg.ReadTimeout, WriteTimeout: cfg.WriteTimeout, MaxHeaderBytes: cfg.MaxHeaderBytes}
	p.xnetURL = "https://" + serveTLS(t, cert, func(tc *tls.Conn) {
		xs.ServeConn(tc, &http2.ServeConnOpts{Handler: h, BaseConfig: base})
	})
	t.Cleanup(func() { p.engine.Close() })
	return p
}

// serveTLS accepts TLS connections that negotiate h2 on a loopback port
// and hands each to serve on a goroutine of its own; it returns the
// address. The listener and every connection close when the test ends,
// and the test waits for the serving goroutines.
func serveTLS(t testing.TB, cert *harness.Cert, serve func(*tls.Conn)) string {
	t.Helper()
	ln, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		t.Fatal(err)
	}
	tl := tls.NewListener(ln, &tls.Config{Certificates: []tls.Certificate{cert.TLS}, NextProtos: []string{"h2"}})
	var wg sync.WaitGroup
	var mu sync.Mutex
	conns := map[net.Conn]struct{}{}
	wg.Go(func() {
		for {
			c, err := tl.Accept()
			if err != nil {
				return
			}
			mu.Lock()
			conns[c] = struct{}{}
			mu.Unlock()
			wg.Go(func() {
				defer func() {
					mu.Lock()
					delete(conns, c)
					mu.Unlock()
				}()
				tc := c.(*tls.Conn)
				ctx, cancel := context.WithTimeout(context.Background(), 10*time.Second)
				defer cancel()
				if err := tc.HandshakeContext(ctx); err != nil {
					tc.Close()
					return
				}
				serve(tc)
			})
		}
	})
	t.Cleanup(func() {
		tl.Close()
		mu.Lock()
		for c := range conns {
			c.Close()
		}
		mu.Unlock()
		done := make(chan struct{})
		go func() { wg.Wait(); close(done) }()
		select {
		case <-done:
		case <-time.After(10 * time.Second):
			t.Error("connections still served 10 s after the test")
		}
	})
	// the certificate names localhost: dial it as such
	_, port, _ := net.SplitHostPort(ln.Addr().String())
	return "localhost:" + port
}

var errNoResponse = errors.New("no response")
