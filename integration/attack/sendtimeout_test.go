package attack

import (
	"fmt"
	"regexp"
	"strconv"
	"strings"
	"sync"
	"testing"
	"time"

	"golang.org/x/net/http2"

	"github.com/h2file/caddy-h2file/internal/harness"
	"github.com/h2file/caddy-h2file/internal/harness/caddysite"
	"github.com/h2file/caddy-h2file/internal/harness/h2client"
)

// idleSendTimeout is the engine's send_timeout in TestNeverReadingIsFreed,
// and freeWithin how soon after the requests its process must be back to
// what it held before them.
const idleSendTimeout, freeWithin = 2 * time.Second, 20 * time.Second

// TestNeverReadingIsFreed measures what the engine's send_timeout gains
// (issue 20): 4 connections ask for 100 copies each of the 8 MB file and
// never read. Stock Caddy (Go's HTTP/2 server, which under Caddy has no
// connection-level write deadline) keeps them, their handler goroutines
// and their memory for as long as the client holds them; the engine, with
// send_timeout 2s, closes each once a socket write to it has waited that
// long. The client finds out by writing a PING every 250 ms: a write to
// a connection the server closed fails. The test fails if the engine
// has not closed all 4 within send_timeout + 4 s, or if 20 s after the
// requests its process still has their sockets, more than 30 goroutines
// over its count before them (its idle handler goroutines exit 5 s after
// their last request) or 4 MiB more heap in use. Stock's figures 8 s
// after the requests are logged beside the engine's. One run here: stock
// kept all 4 connections, 411 more goroutines and 16.5 MiB more heap for
// as long as the client held them; the engine closed them after 2.25 s
// and was back to its goroutines and heap of before 7.3 s after the
// requests (while they were held, it had 42 MiB more heap: the write
// buffers of 400 streams, within send.MaxGrownBytes).
func TestNeverReadingIsFreed(t *testing.T) {
	bin := caddyToAttack(t)
	st := newSite(t)
	engine := []any{map[string]any{"wrapper": "coalesce"}, map[string]any{"wrapper": "tls"},
		map[string]any{"wrapper": "h2_engine", "send_timeout": idleSendTimeout.String()}}
	for _, srv := range []served{
		{name: "stock", handler: fileServer, reference: true},
		{name: "engine", handler: h2FileServer, wrappers: engine},
	} {
		p := caddysite.StartProcess(t, bin, caddysite.Config{Handlers: []any{srv.handler(st.root)}, Wrappers: srv.wrappers})
		for range 20 {
			if err := harness.FetchFile(t.Context(), p.H2, p.URL, st.small); err != nil {
				t.Fatalf("%s: %v", srv.name, err)
			}
		}
		p.H2.CloseIdleConnections()
		time.Sleep(200 * time.Millisecond)
		base := sampleProcess(t, p)
		held := holdUnread(t, p.Addr, st.large.Path, 4, 100)
		opened := time.Now()
		time.Sleep(time.Second)
		peak := sampleProcess(t, p)
		// stock: what it holds 8 s on; the engine: how long until it is
		// back where it was (its idle handler goroutines exit 5 s after
		// the connections close)
		after, freed := sampleProcess(t, p), false
		for {
			freed = after.sockets <= base.sockets && after.goroutines <= base.goroutines+30 && after.heapMiB <= base.heapMiB+4
			if srv.reference && time.Since(opened) >= 8*time.Second || !srv.reference && (freed || time.Since(opened) >= freeWithin) {
				break
			}
			time.Sleep(500 * time.Millisecond)
			after = sampleProcess(t, p)
		}
		took := time.Since(opened)
		closed := held.stop()
		t.Logf("%s: before %v; 1 s after the requests %v; %v after %v; connections the server closed: %s",
			srv.name, base, peak, took.Round(100*time.Millisecond), after, closed)
		if srv.reference {
			continue
		}
		if len(closed.after) != 4 {
			t.Errorf("engine: %d of 4 connections that never read were closed (send_timeout %v)", len(closed.after), idleSendTimeout)
		}
		for _, d := range closed.after {
			if d > idleSendTimeout+4*time.Second {
				t.Errorf("engine: a connection that never read was closed after %v, send_timeout %v", d, idleSendTimeout)
			}
		}
		if !freed {
			t.Errorf("engine: %v after the requests, %v; before them %v", took, after, base)
		}
	}
}

// processSample is what a Caddy process holds at one moment.
type processSample struct {
	sockets, goroutines int
	heapMiB             float64 // Go heap in use after collections
	rssKiB              uint64
}

func (s processSample) String() string {
	return fmt.Sprintf("%d sockets, %d goroutines, heap in use %.1f MiB, RSS %.1f MiB", s.sockets, s.goroutines, s.heapMiB, mib(int64(s.rssKiB)))
}

var (
	goroutineTotal = regexp.MustCompile(`goroutine profile: total (\d+)`)
	heapInUse      = regexp.MustCompile(`(?m)^# HeapInuse = (\d+)$`)
)

// sampleProcess counts p's sockets (from /proc) and goroutines (from the
// admin API's pprof), and reads its heap in use after two collections
// (the heap profile's, gc=1) and its RSS.
func sampleProcess(t *testing.T, p *caddysite.Process) processSample {
	t.Helper()
	var s processSample
	s.sockets = harness.PidFDsMatching(t, strconv.Itoa(p.Cmd.Process.Pid), func(target string) bool { return strings.HasPrefix(target, "socket:") })
	code, body, err := p.API("GET", "/debug/pprof/goroutine?debug=1", nil)
	m := goroutineTotal.FindStringSubmatch(body)
	if err != nil || code != 200 || m == nil {
		t.Fatalf("goroutine profile: %d %v %.200q", code, err, body)
	}
	s.goroutines, _ = strconv.Atoi(m[1])
	// two collections: a sync.Pool keeps what it held through one
	for range 2 {
		code, body, err = p.API("GET", "/debug/pprof/heap?gc=1&debug=1", nil)
	}
	m = heapInUse.FindStringSubmatch(body)
	if err != nil || code != 200 || m == nil {
		t.Fatalf("heap profile: %d %v, no HeapInuse", code, err)
	}
	heap, _ := strconv.ParseFloat(m[1], 64)
	s.heapMiB = heap / (1 << 20)
	s.rssKiB = p.RSSKiB()
	return s
}

// unreadConns are connections that asked for bodies and read nothing.
type unreadConns struct {
	mu     sync.Mutex
	after  []time.Duration // how long each connection the server closed had lived
	done   chan struct{}
	probes sync.WaitGroup
}

// holdUnread opens conns connections with 1 GiB windows, asks for path
// streams times on each, and then never reads; each connection is probed
// with a PING every 250 ms until a write fails (the server closed it) or
// stop is called.
func holdUnread(t *testing.T, addr, path string, conns, streams int) *unreadConns {
	t.Helper()
	u := &unreadConns{done: make(chan struct{})}
	for range conns {
		c, err := h2client.Dial(addr, h2client.Options{StreamWindow: 1 << 30, ConnWindow: 1 << 30})
		if err != nil {
			t.Fatal(err)
		}
		t.Cleanup(c.Close)
		opened := time.Now()
		for range streams {
			if _, err := c.Get(path); err != nil {
				t.Fatal(err)
			}
		}
		u.probes.Go(func() {
			tick := time.NewTicker(250 * time.Millisecond)
			defer tick.Stop()
			for {
				select {
				case <-u.done:
					return
				case <-tick.C:
				}
				err := c.Batch(func(fr *http2.Framer, _ h2client.BlockFunc) error { return fr.WritePing(false, [8]byte{}) })
				if err != nil {
					u.mu.Lock()
					u.after = append(u.after, time.Since(opened))
					u.mu.Unlock()
					return
				}
			}
		})
	}
	return u
}

// closedConns is what stop found.
type closedConns struct{ after []time.Duration }

func (c closedConns) String() string {
	if len(c.after) == 0 {
		return "none"
	}
	parts := make([]string, len(c.after))
	for i, d := range c.after {
		parts[i] = d.Round(10 * time.Millisecond).String()
	}
	return fmt.Sprintf("%d, after %s", len(c.after), strings.Join(parts, ", "))
}

// stop ends the probes and returns how long each connection the server
// closed had lived.
func (u *unreadConns) stop() closedConns {
	close(u.done)
	u.probes.Wait()
	u.mu.Lock()
	defer u.mu.Unlock()
	return closedConns{after: u.after}
}
