package h2

import (
	"bytes"
	"crypto/sha256"
	"errors"
	"fmt"
	"io"
	"net/http"
	"os"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/h2file/caddy-h2file/internal/harness/h2client"
)

// Flow control through the engine: small windows, write deadlines,
// send-ahead, the line for the connection, deferred END_STREAM.

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

// getRaw opens a raw client connection to p with o's windows and sends a
// GET of path; the connection closes when the test ends.
func getRaw(t *testing.T, p *pair, o h2client.Options, path string) (*h2client.Conn, uint32, map[uint32]*h2client.Stream) {
	t.Helper()
	c, err := h2client.Dial(p.addr(), o)
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(c.Close)
	id, err := c.Get(path)
	if err != nil {
		t.Fatal(err)
	}
	c.SetReadDeadline(time.Now().Add(5 * time.Second))
	return c, id, map[uint32]*h2client.Stream{id: {}}
}

// getMany opens n streams on c, each a GET of path.
func getMany(t *testing.T, c *h2client.Conn, path string, n int) map[uint32]*h2client.Stream {
	t.Helper()
	streams := make(map[uint32]*h2client.Stream, n)
	for range n {
		id, err := c.Get(path)
		if err != nil {
			t.Fatal(err)
		}
		streams[id] = &h2client.Stream{}
	}
	return streams
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
	c, id, streams := getRaw(t, startEngine(t, h, Config{}), h2client.Options{}, "/")
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
	c, id, streams := getRaw(t, startEngine(t, h, Config{}), h2client.Options{StreamWindow: 16384}, "/")
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
// asks for 200 bytes: once its handler writes them, the small response
// must come before the large ones have sent another 2 MiB (streams
// without a priority take turns in queue.go's line), not after them (28
// MB when they are served one after another). Ahead of it there can be
// up to 8 turns of 32 KiB, a batch being written and one being filled
// (256 KiB each) and the client's credit: about 1 MiB; 256 KiB is usual.
// The count starts when the handler runs, from all the client had
// credited by then: a loaded machine (CI runs packages side by side) can
// take milliseconds to read the request and start its handler, and the
// large streams may use the window meanwhile (2.5 MB once), which says
// nothing about the line.
func TestEngineSmallResponseNotStarved(t *testing.T) {
	smallRuns := make(chan struct{})
	h := http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		if r.URL.Path == "/small" {
			body := bytes.Repeat([]byte("s"), 200)
			close(smallRuns)
			w.Write(body)
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
	streams := getMany(t, c, "/big", 8)
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
	// no credit is given until the handler runs, so the large streams
	// can have sent at most what was credited
	select {
	case <-smallRuns:
	case <-time.After(10 * time.Second):
		t.Fatal("the handler of /small did not run within 10 s")
	}
	before := credited
	pump(func() bool { return streams[small].Ended })
	if after := got - 200 - before; after > 2<<20 {
		t.Errorf("the 200-byte response came after %d more bytes of the large ones, want at most 2 MiB", after)
	}
}

// TestEngineLineNeverStalls sends 32 bodies of 1 MB at once on one
// connection, in 64 KiB writes as Caddy's idle-timeout writer makes them,
// to a client that reads slowly, several rounds: the writers wait in line
// for room in the batch, and one that writes the batch itself may be
// handed its turn during that write. A wake-up lost there stalled every
// writer behind it until their write deadline (seen in the bench: 1 MB
// files, 8 x 32 streams).
func TestEngineLineNeverStalls(t *testing.T) {
	h := http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		chunk := bytes.Repeat([]byte("l"), 64<<10)
		w.Header().Set("Content-Length", fmt.Sprint(16*len(chunk)))
		for range 16 {
			if _, err := w.Write(chunk); err != nil {
				return
			}
		}
	})
	p := startEngine(t, h, Config{})
	slow := func(r io.Reader) io.Reader { return &slowReader{r: r} }
	c, err := h2client.Dial(p.addr(), h2client.Options{StreamWindow: 16 << 20, ConnWindow: 1 << 30, Reader: slow})
	if err != nil {
		t.Fatal(err)
	}
	defer c.Close()
	for round := range 4 {
		streams := getMany(t, c, "/", 32)
		c.SetReadDeadline(time.Now().Add(10 * time.Second))
		ended := func() bool {
			for _, s := range streams {
				if !s.Ended && !s.Reset {
					return false
				}
			}
			return true
		}
		if err := c.Pump(streams, nil, ended); err != nil {
			t.Fatalf("round %d: %v", round, err)
		}
		for id, s := range streams {
			if s.Reset || s.N != 1<<20 {
				t.Fatalf("round %d: stream %d: %d bytes, reset %v", round, id, s.N, s.Reset)
			}
		}
	}
}

// slowReader reads at most 4 KiB at a time, pausing every 64 KiB, so that
// the server's socket writes wait for it.
type slowReader struct {
	r    io.Reader
	read int
}

func (s *slowReader) Read(p []byte) (int, error) {
	n, err := s.r.Read(p[:min(len(p), 4<<10)])
	s.read += n
	if s.read >= 64<<10 {
		s.read = 0
		time.Sleep(50 * time.Microsecond)
	}
	return n, err
}

// TestEngineSendTimeout checks WriteProgressTimeout: a client that asks
// for a large body and stops reading has its connection closed once a
// socket write has waited that long, which fails the handler's write and
// frees the connection; without it, the handler is still blocked.
func TestEngineSendTimeout(t *testing.T) {
	for _, timeout := range []time.Duration{300 * time.Millisecond, 0} {
		wrote := make(chan error, 1)
		h := http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
			chunk := make([]byte, 1<<20)
			for range 256 {
				if _, err := w.Write(chunk); err != nil {
					wrote <- err
					return
				}
			}
			wrote <- nil
		})
		timeoutsBefore := ReadStats().SendTimeouts
		p := startEngine(t, h, Config{WriteProgressTimeout: timeout})
		c, err := h2client.Dial(p.addr(), h2client.Options{StreamWindow: 1 << 30, ConnWindow: 1 << 30})
		if err != nil {
			t.Fatal(err)
		}
		if _, err := c.Get("/"); err != nil {
			t.Fatal(err)
		}
		// the client reads nothing from here on
		select {
		case err := <-wrote:
			if timeout == 0 {
				t.Fatalf("without a send timeout, the handler's write returned (%v) while the client read nothing", err)
			}
			if err == nil {
				t.Fatal("256 MB written to a client that reads nothing")
			}
			// gone at once: closing the TLS connection itself would wait
			// up to 5 s to send close_notify to a client that reads
			// nothing (crypto/tls's own deadline)
			deadline := time.Now().Add(2 * time.Second)
			for p.engine.Conns() > 0 && time.Now().Before(deadline) {
				time.Sleep(10 * time.Millisecond)
			}
			if n := p.engine.Conns(); n > 0 {
				t.Errorf("%d connections still served 2 s after the send timeout failed the handler's write", n)
			}
			if ReadStats().SendTimeouts == timeoutsBefore {
				t.Error("the send timeout was not counted (Stats.SendTimeouts)")
			}
		case <-time.After(3 * time.Second):
			if timeout != 0 {
				t.Fatalf("the handler's write still blocked 3 s after the client stopped reading, send timeout %v", timeout)
			}
		}
		c.Close()
	}
}
