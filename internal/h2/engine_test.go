package h2

import (
	"bytes"
	"context"
	"crypto/sha256"
	"crypto/tls"
	"fmt"
	"net/http"
	"runtime"
	"strings"
	"sync"
	"sync/atomic"
	"testing"
	"time"

	"golang.org/x/net/http2"

	"github.com/h2file/caddy-h2file/internal/harness"
	"github.com/h2file/caddy-h2file/internal/harness/h2client"
)

// startEngine serves h by the engine alone; it returns the pair with an
// empty xnetURL.
func startEngine(t *testing.T, h http.Handler, cfg Config) *pair {
	t.Helper()
	cert := harness.NewCert(t)
	p := &pair{engine: NewServer(h, cfg), client: harness.NewClient(t, "h2", cert.ClientTLS())}
	p.engineURL = "https://" + serveTLS(t, cert, func(tc *tls.Conn) { serveChecked(t, p.engine, tc) })
	t.Cleanup(func() { p.engine.Close() })
	return p
}

// addr is the engine's host:port.
func (p *pair) addr() string { return strings.TrimPrefix(p.engineURL, "https://") }

// TestEngineManyStreams runs 600 requests at once (Go's client opens a
// connection for each 250), downloads and uploads of up to 300
// KB, and checks every byte.
func TestEngineManyStreams(t *testing.T) {
	p := startEngine(t, http.HandlerFunc(diffHandler), Config{})
	var wg sync.WaitGroup
	errs := make(chan error, 600)
	for i := range 600 {
		wg.Go(func() {
			n := (i * 7919) % 300_000
			var rq testRequest
			var want string
			if i%3 == 0 {
				body := strings.Repeat(string(rune('a'+i%26)), n)
				rq = testRequest{method: "POST", path: "/echo", body: body}
				want = fmt.Sprintf("POST %d \"\" err=<nil> sum=%x trailer=map[] cl=%d", n, sha256.Sum256([]byte(body)), n)
				if n == 0 {
					want = fmt.Sprintf("POST 0 \"\" err=<nil> sum=%x trailer=map[] cl=0", sha256.Sum256(nil))
				}
			} else {
				rq = testRequest{method: "GET", path: fmt.Sprintf("/bytes?n=%d&w=%d", n, 1+i*131%70000)}
				b := bytes.Repeat([]byte("0123456789abcdef"), n/16+1)[:n]
				want = string(b)
				if len(b) > 200 {
					want = fmt.Sprintf("%d bytes, sha256 %x", len(b), sha256.Sum256(b))
				}
			}
			ex := do(t, p.client, p.engineURL, rq)
			if ex.Status != 200 || ex.Body != want {
				errs <- fmt.Errorf("request %d (%s %s): %v; want body %q", i, rq.method, rq.path, ex, want)
			}
		})
	}
	wg.Wait()
	close(errs)
	for err := range errs {
		t.Error(err)
	}
}

// TestEngineResetCancelsRequest checks that a client's RST_STREAM
// cancels the request's context and fails the handler's writes, and
// that the connection goes on serving.
func TestEngineResetCancelsRequest(t *testing.T) {
	cancelled := make(chan error, 1)
	started := make(chan struct{}, 1)
	h := http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		if r.URL.Path != "/wait" {
			w.Write([]byte("ok"))
			return
		}
		started <- struct{}{}
		<-r.Context().Done()
		_, err := w.Write(make([]byte, 100_000))
		cancelled <- err
	})
	p := startEngine(t, h, Config{})
	c, err := h2client.Dial(p.addr(), h2client.Options{})
	if err != nil {
		t.Fatal(err)
	}
	defer c.Close()
	go c.Drain()
	id, err := c.Get("/wait")
	if err != nil {
		t.Fatal(err)
	}
	<-started
	if err := c.RST(id, http2.ErrCodeCancel); err != nil {
		t.Fatal(err)
	}
	select {
	case err := <-cancelled:
		if err == nil {
			t.Error("a write after the client's reset succeeded")
		}
	case <-time.After(5 * time.Second):
		t.Fatal("the request's context was not cancelled 5 s after RST_STREAM")
	}
}

// TestEngineShutdown checks the drain: a request in progress completes
// after Shutdown starts, the client gets GOAWAY, and Shutdown returns
// once the connection is gone; new connections are refused.
func TestEngineShutdown(t *testing.T) {
	release := make(chan struct{})
	started := make(chan struct{}, 1)
	h := http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		if r.URL.Path == "/slow" {
			started <- struct{}{}
			<-release
		}
		w.Write([]byte("done " + r.URL.Path))
	})
	p := startEngine(t, h, Config{})
	got := make(chan exchange, 1)
	go func() { got <- do(t, p.client, p.engineURL, testRequest{method: "GET", path: "/slow"}) }()
	<-started
	shutdownDone := make(chan error, 1)
	go func() {
		ctx, cancel := context.WithTimeout(context.Background(), 10*time.Second)
		defer cancel()
		shutdownDone <- p.engine.Shutdown(ctx)
	}()
	time.Sleep(100 * time.Millisecond)
	select {
	case err := <-shutdownDone:
		t.Fatalf("Shutdown returned (%v) with a request in progress", err)
	default:
	}
	close(release)
	if ex := <-got; ex.Status != 200 || ex.Body != "done /slow" {
		t.Errorf("the request in progress: %v", ex)
	}
	select {
	case err := <-shutdownDone:
		if err != nil {
			t.Errorf("Shutdown: %v", err)
		}
	case <-time.After(5 * time.Second):
		t.Fatal("Shutdown had not returned 5 s after the last request")
	}
	if n := p.engine.Conns(); n != 0 {
		t.Errorf("%d connections after Shutdown", n)
	}
}

// TestEngineNoLeaks serves requests of every kind, closes the server and
// checks that the goroutines it started are gone.
func TestEngineNoLeaks(t *testing.T) {
	// idle handler goroutines wait for the next request: they are not
	// counted
	live := func() int { return runtime.NumGoroutine() - workers.idleWorkers() }
	before := live()
	var served atomic.Int64
	func() {
		p := startEngine(t, http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
			served.Add(1)
			diffHandler(w, r)
		}), Config{})
		for _, path := range []string{"/bytes?n=100000", "/trailers?n=5", "/panic", "/abort", "/early-hints"} {
			do(t, p.client, p.engineURL, testRequest{method: "GET", path: path})
		}
		do(t, p.client, p.engineURL, testRequest{method: "POST", path: "/echo", body: strings.Repeat("z", 2_000_000)})
		c, err := h2client.Dial(p.addr(), h2client.Options{ZeroWindow: true})
		if err != nil {
			t.Fatal(err)
		}
		c.Get("/bytes?n=1000000") // blocked on a zero window until Close
		time.Sleep(50 * time.Millisecond)
		p.engine.Close()
		c.Close()
		p.client.Transport.(*http.Transport).CloseIdleConnections()
	}()
	if served.Load() < 7 {
		t.Fatalf("%d requests served, want 7", served.Load())
	}
	deadline := time.Now().Add(5 * time.Second)
	for live() > before+2 && time.Now().Before(deadline) {
		time.Sleep(20 * time.Millisecond)
	}
	if n := live(); n > before+2 {
		buf := make([]byte, 1<<20)
		t.Errorf("%d goroutines before, %d after the server closed:\n%s", before, n, buf[:runtime.Stack(buf, true)])
	}
}
