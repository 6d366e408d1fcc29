package h2

import (
	"bytes"
	"context"
	"crypto/sha256"
	"crypto/tls"
	"errors"
	"fmt"
	"net/http"
	"os"
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
	p.engineURL = "https://" + serveTLS(t, cert, func(tc *tls.Conn) { p.engine.ServeConn(context.Background(), tc) })
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

// TestEngineSmallWindows downloads and uploads through a client whose
// windows are 16 KiB (stream) and 64 KiB (connection): every DATA frame
// waits for a WINDOW_UPDATE.
func TestEngineSmallWindows(t *testing.T) {
	p := startEngine(t, http.HandlerFunc(diffHandler), Config{StreamWindow: 16 << 10, ConnWindow: 64 << 10})
	tr := p.client.Transport.(*http.Transport)
	tr.HTTP2 = &http.HTTP2Config{MaxReceiveBufferPerStream: 16 << 10, MaxReceiveBufferPerConnection: 64 << 10}
	var wg sync.WaitGroup
	for i := range 8 {
		wg.Go(func() {
			n := 500_000 + i*1000
			b := bytes.Repeat([]byte("0123456789abcdef"), n/16+1)[:n]
			want := fmt.Sprintf("%d bytes, sha256 %x", len(b), sha256.Sum256(b))
			if ex := do(t, p.client, p.engineURL, testRequest{method: "GET", path: fmt.Sprintf("/bytes?n=%d&w=33333", n)}); ex.Body != want {
				t.Errorf("GET %d bytes: %v", n, ex)
			}
			up := strings.Repeat("u", n)
			want = fmt.Sprintf("POST %d \"\" err=<nil> sum=%x trailer=map[] cl=%d", n, sha256.Sum256([]byte(up)), n)
			if ex := do(t, p.client, p.engineURL, testRequest{method: "POST", path: "/echo", body: up}); ex.Body != want {
				t.Errorf("POST %d bytes: %v", n, ex)
			}
		})
	}
	wg.Wait()
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

// TestEngineWriteDeadline checks that a handler writing to a client that
// gives no window fails once its write deadline passes, with the stream
// reset, and that a deadline in the past resets at once.
func TestEngineWriteDeadline(t *testing.T) {
	result := make(chan error, 2)
	h := http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		rc := http.NewResponseController(w)
		if r.URL.Path == "/past" {
			rc.SetWriteDeadline(time.Now().Add(-time.Second))
			w.Write(make([]byte, 10)) // buffered
			result <- rc.Flush()
			return
		}
		rc.SetWriteDeadline(time.Now().Add(200 * time.Millisecond))
		_, err := w.Write(make([]byte, 1<<20))
		result <- err
	})
	p := startEngine(t, h, Config{})
	c, err := h2client.Dial(p.addr(), h2client.Options{ZeroWindow: true})
	if err != nil {
		t.Fatal(err)
	}
	defer c.Close()
	go c.Drain()
	for _, path := range []string{"/stall", "/past"} {
		start := time.Now()
		if _, err := c.Get(path); err != nil {
			t.Fatal(err)
		}
		select {
		case err := <-result:
			if !errors.Is(err, os.ErrDeadlineExceeded) && path == "/stall" {
				t.Errorf("%s: write error %v, want os.ErrDeadlineExceeded", path, err)
			}
			if err == nil && path == "/past" {
				t.Errorf("%s: a write after a past deadline succeeded", path)
			}
			if d := time.Since(start); d > 3*time.Second {
				t.Errorf("%s: the write failed after %v", path, d)
			}
		case <-time.After(10 * time.Second):
			t.Fatalf("%s: the write was still blocked 10 s later", path)
		}
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

// TestEngineCompleteBodyNotHeldBack checks that a response whose whole
// declared body is written reaches the client even when its handler does
// not return (its END_STREAM is deferred to the handler's return, its
// bytes are not).
func TestEngineCompleteBodyNotHeldBack(t *testing.T) {
	release := make(chan struct{})
	defer close(release)
	h := http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		w.Header().Set("Content-Length", "10000")
		w.Write(bytes.Repeat([]byte("b"), 10000))
		<-release
	})
	p := startEngine(t, h, Config{})
	c, err := h2client.Dial(p.addr(), h2client.Options{})
	if err != nil {
		t.Fatal(err)
	}
	defer c.Close()
	id, err := c.Get("/")
	if err != nil {
		t.Fatal(err)
	}
	c.SetReadDeadline(time.Now().Add(5 * time.Second))
	streams := map[uint32]*h2client.Stream{id: {}}
	if err := c.Pump(streams, nil, func() bool { return streams[id].N >= 10000 }); err != nil {
		t.Fatalf("%v after %v", err, streams[id])
	}
	if st := streams[id]; st.Status != "200" || st.Ended {
		t.Errorf("%v: want status 200 and the stream still open (its handler has not returned)", st)
	}
}

// TestEngineSendsAheadOfWindow checks the send-ahead buffer: once the
// client's window is used up, a handler's next writes (up to 64 KiB)
// return at once, and the bytes go out when the client opens its window,
// without the handler writing again.
func TestEngineSendsAheadOfWindow(t *testing.T) {
	wrote := make(chan struct{})
	release := make(chan struct{})
	h := http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		w.Header().Set("Content-Length", "65536")
		w.Write(bytes.Repeat([]byte("a"), 16384)) // the whole window
		w.Write(bytes.Repeat([]byte("b"), 32768)) // ahead of it
		w.Write(bytes.Repeat([]byte("c"), 16384))
		close(wrote)
		<-release
	})
	p := startEngine(t, h, Config{})
	c, err := h2client.Dial(p.addr(), h2client.Options{StreamWindow: 16384})
	if err != nil {
		t.Fatal(err)
	}
	defer c.Close()
	id, err := c.Get("/")
	if err != nil {
		t.Fatal(err)
	}
	c.SetReadDeadline(time.Now().Add(5 * time.Second))
	streams := map[uint32]*h2client.Stream{id: {}}
	if err := c.Pump(streams, nil, func() bool { return streams[id].N >= 16384 }); err != nil {
		t.Fatal(err)
	}
	select {
	case <-wrote:
	case <-time.After(5 * time.Second):
		t.Fatal("the handler's writes past the window did not return")
	}
	// the rest comes from the buffer, while the handler waits
	if err := c.Credit(id, 65536); err != nil {
		t.Fatal(err)
	}
	if err := c.Pump(streams, nil, func() bool { return streams[id].N >= 65536 }); err != nil {
		t.Fatalf("%v after %v", err, streams[id])
	}
	close(release)
	if err := c.Pump(streams, nil, func() bool { return streams[id].Ended }); err != nil {
		t.Fatalf("%v after %v", err, streams[id])
	}
}

// TestEngineSmallResponseNotStarved opens 8 streams of 4 MB on one
// connection whose window the client gives back 64 KiB at a time, then
// asks for 200 bytes: the small response must come before the large ones
// have sent another MiB (the line of queue.go), not after them.
func TestEngineSmallResponseNotStarved(t *testing.T) {
	h := http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		if r.URL.Path == "/small" {
			w.Write(bytes.Repeat([]byte("s"), 200))
			return
		}
		chunk := bytes.Repeat([]byte("b"), 128<<10)
		for range 32 {
			if _, err := w.Write(chunk); err != nil {
				return
			}
		}
	})
	p := startEngine(t, h, Config{})
	c, err := h2client.Dial(p.addr(), h2client.Options{StreamWindow: 16 << 20})
	if err != nil {
		t.Fatal(err)
	}
	defer c.Close()
	c.SetReadDeadline(time.Now().Add(20 * time.Second))
	streams := map[uint32]*h2client.Stream{}
	for range 8 {
		id, err := c.Get("/big")
		if err != nil {
			t.Fatal(err)
		}
		streams[id] = &h2client.Stream{}
	}
	var got, credited int64 = 0, 65535
	credit := func() error {
		// give the connection window back as it is used (Credit on
		// stream 0 gives it twice: as the connection's and as "the
		// stream's")
		for credited-got < 32<<10 {
			if err := c.Credit(0, 32<<10); err != nil {
				return err
			}
			credited += 64 << 10
		}
		return nil
	}
	pump := func(done func() bool) {
		t.Helper()
		err := c.Pump(streams, func(id uint32, st *h2client.Stream) error {
			got = 0
			for _, s := range streams {
				got += s.N
			}
			return credit()
		}, done)
		if err != nil {
			t.Fatal(err)
		}
	}
	pump(func() bool { return got >= 2<<20 })
	small, err := c.Get("/small")
	if err != nil {
		t.Fatal(err)
	}
	streams[small] = &h2client.Stream{}
	before := got
	pump(func() bool { return streams[small].Ended })
	if after := got - 200 - before; after > 1<<20 {
		t.Errorf("the 200-byte response came after %d more bytes of the large ones, want at most 1 MiB", after)
	}
}
