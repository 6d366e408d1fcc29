package h2file

// Reliability suite, parts 3 and 4: nothing leaks, and memory stays
// bounded, when HTTP/2 clients misbehave.
//
// Part 3 (TestLeak*): an in-process Caddy serves h2_file_server over TLS
// HTTP/2, without and with the coalesce listener wrapper. Before each
// scenario the test takes a baseline of open descriptors
// (/proc/self/fd), goroutines and live heap (after runtime.GC); after it,
// with every client connection closed, all three must come back to the
// baseline within a small slack, the descriptors open on the site must
// stay within the cache's max_files, and the wrapper must hold no buffer
// and run no flusher. Scenarios: streams reset mid-body, connections
// closed mid-body, clients that stop giving flow-control credit until
// write_idle_timeout fires, 2,000 concurrent streams with every body
// verified, config reloads every 200 ms under load, and (in a
// subprocess) an exhausted RLIMIT_NOFILE.
//
// Part 4 (TestSlowReaders*): 1,000 streams of 1 MB files on 10
// connections whose client reads nothing, then a trickle; peak heap must
// stay under a bound derived from the configured limits.
//
// Caddy is a process singleton: none of these tests may run in parallel.

import (
	"bytes"
	"context"
	"crypto/sha256"
	"errors"
	"fmt"
	"io"
	"math/rand/v2"
	"net"
	"net/http"
	"net/http/httptrace"
	"os"
	"os/exec"
	"runtime"
	"strconv"
	"strings"
	"sync"
	"sync/atomic"
	"syscall"
	"testing"
	"time"

	"github.com/caddyserver/caddy/v2"
	"github.com/prometheus/client_golang/prometheus/testutil"
	"golang.org/x/net/http2"
)

// ---------------------------------------------------------------- wrapper positions

// lkPosition is a place of the coalesce wrapper in the server's listener
// wrappers.
type lkPosition struct {
	name   string
	layers int // coalesce wrappers in the chain
	// listener_wrappers for these coalesce settings (nil: Caddy's default)
	wrappers func(coalesce map[string]any) []any
}

var (
	lkNone  = lkPosition{name: "none"}
	lkBelow = lkPosition{name: "below", layers: 1, wrappers: func(c map[string]any) []any {
		return []any{c, map[string]any{"wrapper": "tls"}}
	}}
	// Caddy puts tls first when the list does not name it
	lkAbove = lkPosition{name: "above", layers: 1, wrappers: func(c map[string]any) []any {
		return []any{c}
	}}
	lkBoth = lkPosition{name: "both", layers: 2, wrappers: func(c map[string]any) []any {
		return []any{c, map[string]any{"wrapper": "tls"}, c}
	}}
)

// lkWrapperLimits are the coalesce settings these tests configure, so
// that the memory bound can be derived from them.
const (
	lkMaxPending = 64 << 10
	lkMaxTotal   = 16 << 20
)

func lkCoalesce(maxPending int) map[string]any {
	return map[string]any{"wrapper": "coalesce", "max_pending": maxPending, "max_total": lkMaxTotal}
}

// lkNeedWrapper skips a wrapper variant when the module is not there.
func lkNeedWrapper(t *testing.T, pos lkPosition) {
	t.Helper()
	if pos.layers == 0 {
		return
	}
	if _, err := caddy.GetModule("caddy.listeners.coalesce"); err != nil {
		t.Skipf("coalesce listener wrapper not available: %v", err)
	}
}

// ---------------------------------------------------------------- site

// ---------------------------------------------------------------- Caddy

// lkStart starts Caddy serving root with h2_file_server (cache settings
// as given), the coalesce wrapper at pos and the extra server fields.
func lkStart(t *testing.T, root string, cache map[string]any, pos lkPosition, server map[string]any) *testServer {
	t.Helper()
	var extra map[string]any
	if cache != nil {
		extra = map[string]any{"cache": cache}
	}
	sc := siteConfig{handlers: []any{h2FileServer(root, extra)}, server: server}
	if pos.layers > 0 {
		sc.wrappers = pos.wrappers(lkCoalesce(lkMaxPending))
	}
	return startSite(t, sc)
}

// lkWarm fetches every file once, so that the cache holds what it will
// hold during the scenarios before the baseline is taken.
func lkWarm(t *testing.T, s *testServer, files ...[]siteFile) {
	t.Helper()
	for _, set := range files {
		for _, f := range set {
			if err := fetchFile(context.Background(), s.H2, s.URL, f); err != nil {
				t.Fatalf("warm-up: %v", err)
			}
		}
	}
	s.closeClients()
}

// ---------------------------------------------------------------- measuring

// lkSnap is a measurement of the process.
type lkSnap struct {
	fds, siteFDs, goroutines int
	heapAlloc, heapInuse     uint64 // after two collections (the second empties sync.Pools' victim caches)
	chunksOut                int64  // coalesce chunks taken from the pool and not given back
}

func lkMeasure(t *testing.T, root string) lkSnap {
	t.Helper()
	runtime.GC()
	runtime.GC()
	var ms runtime.MemStats
	runtime.ReadMemStats(&ms)
	return lkSnap{
		fds:        openFDs(t),
		siteFDs:    fdsOpenOn(t, root),
		goroutines: runtime.NumGoroutine(),
		heapAlloc:  ms.HeapAlloc,
		heapInuse:  ms.HeapInuse,
		chunksOut:  coalesceChunksOut.Load(),
	}
}

// Slack allowed over the baseline after a scenario. Once both ends have
// closed a connection its descriptors are gone: none may stay (the cache's
// descriptors on the site are checked against max_files instead). A
// server connection that stays open keeps a descriptor and at least two
// goroutines (x/net's serve loop and frame reader), a stream its handler
// goroutine; two goroutines of slack absorb stragglers of the runtime and
// Caddy. The heap slack is a few MiB: a request that stays reachable
// (http.Request, Caddy's replacer and vars, x/net's stream state,
// h2_file_server's body buffer: tens of KiB) for each stream of the
// scenarios with hundreds or thousands of streams exceeds it.
const (
	lkFDSlack        = 0
	lkGoroutineSlack = 2
	lkHeapSlack      = 6 << 20
)

func lkMiB(b uint64) float64 { return float64(b) / (1 << 20) }

// lkWrapperBuffered is the memory the coalesce wrappers of the process
// hold in buffers now (their metric, kept with each chunk taken and
// given back).
func lkWrapperBuffered() float64 { return testutil.ToFloat64(coalesceStats.buffered) }

// lkCheckReleased waits (up to 10 s) for descriptors, goroutines and the
// wrappers' buffers and flushers to come back to base, then checks them
// and the live heap, and that at most maxSiteFDs descriptors stay open on
// the site (the cache's bound).
func lkCheckReleased(t *testing.T, what, root string, base lkSnap, maxSiteFDs int) lkSnap {
	t.Helper()
	deadline := time.Now().Add(15 * time.Second)
	var after lkSnap
	for {
		// descriptors on the site are the cache's, checked against its
		// bound below; all others must come back to the baseline
		settled := openFDs(t)-fdsOpenOn(t, root) <= base.fds-base.siteFDs+lkFDSlack &&
			runtime.NumGoroutine() <= base.goroutines+lkGoroutineSlack &&
			coalesceFlushers.Load() == 0 && lkWrapperBuffered() == 0 && coalesceChunksOut.Load() == base.chunksOut
		if settled {
			after = lkMeasure(t, root)
			if after.heapAlloc <= base.heapAlloc+lkHeapSlack {
				break
			}
		}
		if time.Now().After(deadline) {
			after = lkMeasure(t, root)
			break
		}
		time.Sleep(50 * time.Millisecond)
	}
	t.Logf("%s: baseline -> after: fds %d -> %d (on the site %d -> %d), goroutines %d -> %d, live heap %.1f -> %.1f MiB, heap in use %.1f -> %.1f MiB",
		what, base.fds, after.fds, base.siteFDs, after.siteFDs, base.goroutines, after.goroutines,
		lkMiB(base.heapAlloc), lkMiB(after.heapAlloc), lkMiB(base.heapInuse), lkMiB(after.heapInuse))
	if other, baseOther := after.fds-after.siteFDs, base.fds-base.siteFDs; other > baseOther+lkFDSlack {
		t.Errorf("%s: %d descriptors open besides the site's, baseline %d (+%d allowed)\n%s", what, other, baseOther, lkFDSlack, describeFDs())
	}
	if after.siteFDs > maxSiteFDs {
		t.Errorf("%s: %d descriptors open on the site, the cache keeps at most %d", what, after.siteFDs, maxSiteFDs)
	}
	if after.goroutines > base.goroutines+lkGoroutineSlack {
		t.Errorf("%s: %d goroutines, baseline %d (+%d allowed)\n%s", what, after.goroutines, base.goroutines, lkGoroutineSlack, goroutineDump())
	}
	if after.heapAlloc > base.heapAlloc+lkHeapSlack {
		t.Errorf("%s: live heap %.1f MiB, baseline %.1f MiB (+%.0f MiB allowed)", what, lkMiB(after.heapAlloc), lkMiB(base.heapAlloc), lkMiB(lkHeapSlack))
	}
	if n, b, c := coalesceFlushers.Load(), lkWrapperBuffered(), coalesceChunksOut.Load(); n != 0 || b != 0 || c != base.chunksOut {
		t.Errorf("%s: coalesce wrapper still has %d flushers running, %v bytes in buffers and %d chunks out (baseline %d)", what, n, b, c, base.chunksOut)
	}
	return after
}

// lkEachConn runs f for conns connections at once and reports their errors.
func lkEachConn(t *testing.T, conns int, f func(i int) error) {
	t.Helper()
	errs := make([]error, conns)
	var wg sync.WaitGroup
	for i := range conns {
		wg.Go(func() { errs[i] = f(i) })
	}
	wg.Wait()
	for i, err := range errs {
		if err != nil {
			t.Errorf("connection %d: %v", i, err)
		}
	}
}

// ---------------------------------------------------------------- part 3: no leaks

// Cache settings of the leak scenarios: fewer entries than big files, so
// that files are evicted while streams still read them (the path where a
// lost reference would leave a descriptor open for good).
const lkMaxFiles = 16

func lkLeakCache() map[string]any {
	return map[string]any{"max_files": lkMaxFiles, "max_memory": 4 << 20}
}

// TestLeakScenarios runs the misbehaving-client scenarios against Caddy
// without and with the coalesce wrapper (below and above TLS at once).
func TestLeakScenarios(t *testing.T) {
	root := t.TempDir()
	// held open by the cache (larger than small_file_max, 64 KiB)
	big := writeSiteFiles(t, root, "big", 24, func(i int) int { return 1<<20 + i*4099 })
	medium := writeSiteFiles(t, root, "medium", 16, func(i int) int { return 70_000 + i*6_007 })
	// kept in memory (once they are older than the cache's settle time)
	small := writeSiteFiles(t, root, "small", 40, func(i int) int { return 200 + i*1_499 })

	for _, pos := range []lkPosition{lkNone, lkBoth} {
		t.Run(pos.name, func(t *testing.T) {
			lkNeedWrapper(t, pos)
			// Caddy's write idle timer (write_idle_timeout) is armed once
			// more when a handler returns (IdleTimeoutWriter.HandlerDone),
			// and x/net's serve loop may arm it after the stream has
			// closed: the timer then keeps the stream and its connection
			// reachable until it fires, a minute by default. A short
			// timeout lets the heap come back to the baseline in seconds.
			s := lkStart(t, root, lkLeakCache(), pos, map[string]any{"write_idle_timeout": lkWriteIdleTimeoutDefault.String()})
			scenario := func(name string, setup func(t *testing.T), run func(t *testing.T)) {
				t.Run(name, func(t *testing.T) {
					if setup != nil {
						setup(t)
					}
					lkWarm(t, s, big, medium, small)
					base := lkMeasure(t, root)
					run(t)
					s.closeClients()
					lkCheckReleased(t, pos.name+"/"+name, root, base, lkMaxFiles)
				})
			}
			scenario("reset_mid_body", nil, func(t *testing.T) { lkResetMidBody(t, s, big, medium) })
			scenario("close_mid_body", nil, func(t *testing.T) { lkCloseMidBody(t, s, big) })
			scenario("2000_streams", nil, func(t *testing.T) { lkManyStreams(t, s, small, medium) })
			scenario("reload_under_load", nil, func(t *testing.T) { lkReloadUnderLoad(t, s, pos, small, medium, big) })
			// last: it leaves write_idle_timeout configured
			scenario("stalled_reader_timeout", func(t *testing.T) {
				if err := s.reconfigure(func(server, _ map[string]any) { server["write_idle_timeout"] = lkWriteIdleTimeout.String() }); err != nil {
					t.Fatal(err)
				}
			}, func(t *testing.T) { lkStalledReader(t, s, big) })

			// everything the cache held is closed once Caddy is gone
			stopCaddy(t)
			deadline := time.Now().Add(15 * time.Second)
			for fdsOpenOn(t, root) != 0 && time.Now().Before(deadline) {
				time.Sleep(50 * time.Millisecond)
			}
			if n := fdsOpenOn(t, root); n != 0 {
				t.Errorf("%d descriptors still open on the site after Caddy stopped", n)
			}
		})
	}
}

// (a) Clients reset every stream with RST_STREAM CANCEL after its first
// DATA frame; the connection must go on serving whole files.
func lkResetMidBody(t *testing.T, s *testServer, big, medium []siteFile) {
	const conns, perConn = 4, 25
	lkEachConn(t, conns, func(ci int) error {
		// windows smaller than the big files, large enough for the check
		c, err := dialH2(s.Addr, h2DialOpts{streamWindow: 1 << 20, connWindow: 1 << 30})
		if err != nil {
			return err
		}
		defer c.close()
		streams, err := c.getEach(big, ci*perConn, perConn)
		if err != nil {
			return err
		}
		resetting := perConn
		err = c.pump(streams, func(id uint32, st *h2Stream) error {
			switch {
			case st.rstSent:
			case st.ended || st.reset:
				return fmt.Errorf("stream ended before the client reset it: %v", st)
			case st.n > 0:
				st.rstSent = true
				resetting--
				return c.rst(id, http2.ErrCodeCancel)
			}
			return nil
		}, func() bool { return resetting == 0 })
		if err != nil {
			return fmt.Errorf("resetting streams: %w", err)
		}
		for _, st := range streams {
			if st.status != "200" || st.n == 0 || st.n >= st.file.size {
				return fmt.Errorf("want 200 and part of the body before the reset: %v", st)
			}
		}
		// the same connection still serves whole files, byte for byte
		f := medium[ci%len(medium)]
		id, err := c.get(f.path)
		if err != nil {
			return err
		}
		check := &h2Stream{file: f, sum: sha256.New()}
		streams[id] = check
		if err := c.pump(streams, nil, func() bool { return check.ended || check.reset }); err != nil {
			return fmt.Errorf("after the resets: %w", err)
		}
		if !check.complete() {
			return fmt.Errorf("after the resets: %v", check)
		}
		return nil
	})
}

// (b) Clients close the TCP connection mid-body: half with TLS
// close_notify and FIN, half with a TCP reset.
func lkCloseMidBody(t *testing.T, s *testServer, big []siteFile) {
	const conns, perConn = 8, 12
	lkEachConn(t, conns, func(ci int) error {
		c, err := dialH2(s.Addr, h2DialOpts{streamWindow: 2 << 20, connWindow: 1 << 30})
		if err != nil {
			return err
		}
		streams, err := c.getEach(big, ci*perConn, perConn)
		if err != nil {
			c.close()
			return err
		}
		var total int64
		err = c.pump(streams, func(_ uint32, st *h2Stream) error {
			if st.ended || st.reset {
				return fmt.Errorf("stream ended before the client closed: %v", st)
			}
			if st.status != "200" {
				return fmt.Errorf("want 200: %v", st)
			}
			return nil
		}, func() bool {
			total = 0
			for _, st := range streams {
				total += st.n
			}
			return total >= 512<<10
		})
		if ci%2 == 0 {
			c.close()
		} else {
			c.abort()
		}
		if err != nil {
			return fmt.Errorf("before closing, after %d bytes: %w", total, err)
		}
		return nil
	})
}

// (c) Clients read frames but never give flow-control credit, so every
// handler blocks on its stream's window; write_idle_timeout (1s here)
// must make the server reset the streams and release everything.
// write_idle_timeout of the leak scenarios, and of the stalled-reader one.
const (
	lkWriteIdleTimeoutDefault = 6 * time.Second
	lkWriteIdleTimeout        = time.Second
)

func lkStalledReader(t *testing.T, s *testServer, big []siteFile) {
	const timeout = lkWriteIdleTimeout
	const conns, perConn = 4, 25
	lkEachConn(t, conns, func(ci int) error {
		// the default stream window (65,535 bytes) and a connection window
		// that never runs out
		c, err := dialH2(s.Addr, h2DialOpts{connWindow: 1 << 30})
		if err != nil {
			return err
		}
		defer c.close()
		streams, err := c.getEach(big, ci*perConn, perConn)
		if err != nil {
			return err
		}
		start := time.Now()
		ended := 0
		err = c.pump(streams, func(_ uint32, st *h2Stream) error {
			if st.ended {
				return fmt.Errorf("stream ended cleanly although its window ran out: %v", st)
			}
			if st.reset {
				ended++
			}
			return nil
		}, func() bool { return ended == perConn })
		if err != nil {
			return fmt.Errorf("after %v: %w", time.Since(start).Round(time.Millisecond), err)
		}
		for _, st := range streams {
			// the server gave up: a reset, after sending what the window
			// allowed, and not before the write had stalled for about the
			// timeout (the deadline is set when the blocked write starts,
			// a little before its last frame goes out: a quarter of the
			// timeout is allowed for that on a loaded machine)
			stalled := st.resetAt.Sub(st.lastData)
			if st.status != "200" || st.n != 65535 || !st.reset || st.code != http2.ErrCodeInternal ||
				stalled < timeout/4 || stalled > 10*timeout {
				return fmt.Errorf("want 200, 65535 bytes, RST_STREAM INTERNAL_ERROR about %v after the last DATA: %v, %v after the last DATA",
					timeout, st, stalled.Round(time.Millisecond))
			}
		}
		return nil
	})
}

// (d) 20 connections with 100 concurrent streams each, of small files
// (served from memory) and medium ones (from cached descriptors), every
// body checked byte for byte.
func lkManyStreams(t *testing.T, s *testServer, small, medium []siteFile) {
	const conns, perConn = 20, 100
	var bytesRead atomic.Int64
	start := time.Now()
	lkEachConn(t, conns, func(ci int) error {
		c, err := dialH2(s.Addr, h2DialOpts{streamWindow: 1 << 22, connWindow: 1 << 30})
		if err != nil {
			return err
		}
		defer c.close()
		streams := map[uint32]*h2Stream{}
		for i := range perConn {
			set := small
			if i%2 == 1 {
				set = medium
			}
			f := set[(ci*perConn+i)%len(set)]
			id, err := c.get(f.path)
			if err != nil {
				return err
			}
			streams[id] = &h2Stream{file: f, sum: sha256.New()}
		}
		done := 0
		err = c.pump(streams, func(_ uint32, st *h2Stream) error {
			if st.reset {
				return fmt.Errorf("stream reset: %v", st)
			}
			if st.ended {
				done++
				bytesRead.Add(st.n)
				if !st.complete() {
					return fmt.Errorf("wrong response: %v (content matches: %v)", st, bytes.Equal(st.sum.Sum(nil), st.file.sum[:]))
				}
			}
			return nil
		}, func() bool { return done == perConn })
		if err != nil {
			return fmt.Errorf("after %d of %d streams: %w", done, perConn, err)
		}
		return nil
	})
	t.Logf("%d streams on %d connections: %.1f MiB verified in %v", conns*perConn, conns,
		lkMiB(uint64(bytesRead.Load())), time.Since(start).Round(time.Millisecond))
}

// (e) Config reloads through the admin API every 200 ms while clients
// (HTTP/2 and HTTP/1.1) fetch files and check every byte. Each reload
// changes the cache settings (a new cache; the old one is closed when its
// config is gone) and, with the wrapper, its max_pending (new wrapper
// instances on the same listener). The last reload restores the original
// config.
func lkReloadUnderLoad(t *testing.T, s *testServer, pos lkPosition, small, medium, big []siteFile) {
	orig, err := s.runningConfig()
	if err != nil {
		t.Fatal(err)
	}
	files := append(append(append([]siteFile(nil), small...), medium...), big[:4]...)
	var requests, failures, raced, refused atomic.Int64
	stop := make(chan struct{})
	var wg sync.WaitGroup
	for w := range 8 {
		client, h1, name := s.H2, w >= 6, "HTTP/2"
		if h1 {
			client, name = s.H1, "HTTP/1.1"
		}
		wg.Go(func() {
			rng := rand.New(rand.NewPCG(uint64(w), 7))
			for {
				select {
				case <-stop:
					return
				default:
				}
				var gotConn, reused atomic.Bool
				ctx := httptrace.WithClientTrace(context.Background(), &httptrace.ClientTrace{
					GotConn: func(ci httptrace.GotConnInfo) { gotConn.Store(true); reused.Store(ci.Reused) },
				})
				err := fetchFile(ctx, client, s.URL, files[rng.IntN(len(files))])
				requests.Add(1)
				switch {
				case err == nil:
				case !gotConn.Load():
					// a new connection that failed before the request
					// went out: Caddy resets a few TLS handshakes while it
					// swaps servers, with the stock file_server too
					refused.Add(1)
				case h1 && reused.Load() && lkKeepAliveRace(err):
					// HTTP/1.1's keep-alive race: the old server closed an
					// idle connection as the request went out on it;
					// net/http retries only if nothing was written yet
					raced.Add(1)
				default:
					failures.Add(1)
					t.Errorf("during reloads, %s on a %s connection: %v", name, map[bool]string{true: "reused", false: "new"}[reused.Load()], err)
				}
			}
		})
	}
	reloads := 0
	var reloadErr error
	for i := range 12 {
		time.Sleep(200 * time.Millisecond)
		cfg, err := s.runningConfig()
		if err != nil {
			reloadErr = err
			break
		}
		server, handler := siteServerOf(cfg)
		handler["cache"] = map[string]any{"max_files": 8 + 4*(i%3), "max_memory": 4 << 20}
		if pos.layers > 0 {
			server["listener_wrappers"] = pos.wrappers(lkCoalesce(32<<10 + (i%2)*(32<<10)))
		}
		if err := s.load(cfg); err != nil {
			reloadErr = fmt.Errorf("reload %d: %w", i, err)
			break
		}
		reloads++
	}
	close(stop)
	wg.Wait()
	if reloadErr != nil {
		t.Fatal(reloadErr)
	}
	if err := s.load(orig); err != nil {
		t.Fatalf("restoring the config: %v", err)
	}
	t.Logf("%d reloads, %d requests, %d failed; lost to a reload: %d new connections, %d HTTP/1.1 requests on a keep-alive connection it closed",
		reloads, requests.Load(), failures.Load(), refused.Load(), raced.Load())
	if requests.Load() < 50 || failures.Load() > 0 {
		t.Errorf("%d requests during %d reloads, %d failed; want at least 50, none failed", requests.Load(), reloads, failures.Load())
	}
	// a reload can only catch the connections being opened or reused at
	// that moment, fewer than the 8 clients
	if lost := refused.Load() + raced.Load(); lost > int64(8*reloads) {
		t.Errorf("%d requests lost to %d reloads, more than the 8 clients could have had under way", lost, reloads)
	}
}

// lkKeepAliveRace reports whether err is what a client gets when the
// server closes a keep-alive connection it has just sent a request on.
func lkKeepAliveRace(err error) bool {
	return errors.Is(err, io.EOF) || errors.Is(err, io.ErrUnexpectedEOF) || errors.Is(err, syscall.ECONNRESET)
}

// (f) RLIMIT_NOFILE exhausted while Caddy serves many distinct files:
// every response is 200 with the right bytes or 503 with Retry-After,
// nothing panics, and once descriptors are free again every request
// succeeds. It runs in a subprocess, which lowers its own limit.
func TestLeakOutOfDescriptors(t *testing.T) {
	if name := os.Getenv("LK_EMFILE_CHILD"); name != "" {
		lkEmfileChild(t, name)
		return
	}
	for _, pos := range []lkPosition{lkNone, lkBoth} {
		t.Run(pos.name, func(t *testing.T) {
			lkNeedWrapper(t, pos)
			ctx, cancel := context.WithTimeout(context.Background(), 60*time.Second)
			defer cancel()
			cmd := exec.CommandContext(ctx, os.Args[0], "-test.run=^TestLeakOutOfDescriptors$", "-test.count=1", "-test.v")
			cmd.Env = append(os.Environ(), "LK_EMFILE_CHILD="+pos.name)
			out, err := cmd.CombinedOutput()
			for _, line := range strings.Split(string(out), "\n") {
				if strings.HasPrefix(line, "LK-EMFILE: ") {
					t.Log(strings.TrimPrefix(line, "LK-EMFILE: "))
				}
			}
			tail := out
			if len(tail) > 8000 {
				tail = tail[len(tail)-8000:]
			}
			switch {
			case err != nil:
				t.Fatalf("child failed: %v\n%s", err, tail)
			case !bytes.Contains(out, []byte("LK-EMFILE-CHILD-OK")):
				t.Fatalf("child did not run its checks:\n%s", tail)
			case bytes.Contains(bytes.ToLower(out), []byte("panic")):
				t.Fatalf("child output mentions a panic:\n%s", tail)
			}
		})
	}
}

func lkPositionNamed(t *testing.T, name string) lkPosition {
	for _, p := range []lkPosition{lkNone, lkBelow, lkAbove, lkBoth} {
		if p.name == name {
			return p
		}
	}
	t.Fatalf("unknown wrapper position %q", name)
	return lkPosition{}
}

func lkEmfileChild(t *testing.T, posName string) {
	pos := lkPositionNamed(t, posName)
	root := t.TempDir()
	// many distinct files, most held open by the cache
	files := append(
		writeSiteFiles(t, root, "open", 100, func(i int) int { return 70_000 + i*1_009 }),
		writeSiteFiles(t, root, "mem", 40, func(i int) int { return 100 + i*397 })...)
	s := lkStart(t, root, nil, pos, nil)
	// LK_EMFILE_DEBUG=1: Caddy logs at DEBUG level in the child, which
	// shows why a request failed
	if os.Getenv("LK_EMFILE_DEBUG") != "" {
		cfg, _ := s.runningConfig()
		cfg["logging"].(map[string]any)["logs"].(map[string]any)["default"].(map[string]any)["level"] = "DEBUG"
		if err := s.load(cfg); err != nil {
			t.Fatal(err)
		}
	}
	if err := fetchFile(context.Background(), s.H2, s.URL, files[0]); err != nil { // the client's one connection
		t.Fatal(err)
	}

	var orig syscall.Rlimit
	if err := syscall.Getrlimit(syscall.RLIMIT_NOFILE, &orig); err != nil {
		t.Fatal(err)
	}
	lowered := orig
	lowered.Cur = uint64(openFDsNow() + 64)
	if err := syscall.Setrlimit(syscall.RLIMIT_NOFILE, &lowered); err != nil {
		t.Skipf("cannot lower RLIMIT_NOFILE: %v", err)
	}
	defer syscall.Setrlimit(syscall.RLIMIT_NOFILE, &orig)
	// take every descriptor but a few
	hog := hogDescriptors(t)
	const spare = 4
	for _, f := range hog[len(hog)-spare:] {
		f.Close()
	}
	hog = hog[:len(hog)-spare]

	// tally counts the outcomes of a phase; every failure is counted, and
	// the first few of each phase reported in full
	type tally struct {
		ok, unavailable, failed int
		failures                []string
	}
	const requests = 400
	run := func(phase string, allowUnavailable bool) *tally {
		var mu sync.Mutex
		tl := &tally{}
		var wg sync.WaitGroup
		next := atomic.Int64{}
		for range 48 {
			wg.Go(func() {
				for {
					i := int(next.Add(1)) - 1
					if i >= requests {
						return
					}
					f := files[(i*7)%len(files)]
					status, retryAfter, err := lkFetchOr503(s.H2, s.URL, f)
					var failure string
					switch {
					case err != nil:
						failure = err.Error()
					case status == http.StatusOK:
					case !allowUnavailable:
						failure = fmt.Sprintf("%s: status %d, want 200", f.path, status)
					default:
						if n, err := strconv.Atoi(retryAfter); err != nil || n < minBackoff || n > maxBackoff {
							failure = fmt.Sprintf("%s: 503 with Retry-After %q, want %d to %d seconds", f.path, retryAfter, minBackoff, maxBackoff)
						}
					}
					mu.Lock()
					switch {
					case failure != "":
						tl.failed++
						if len(tl.failures) < 5 {
							tl.failures = append(tl.failures, failure)
						}
					case status == http.StatusOK:
						tl.ok++
					default:
						tl.unavailable++
					}
					mu.Unlock()
				}
			})
		}
		wg.Wait()
		if tl.failed > 0 {
			t.Errorf("%s: %d of %d requests failed; the first: %s", phase, tl.failed, requests, strings.Join(tl.failures, "; "))
		}
		return tl
	}
	evictions := testutil.ToFloat64(fileCacheMetrics.evictions)
	exhausted := run("out of descriptors", true)
	evicted := testutil.ToFloat64(fileCacheMetrics.evictions) - evictions
	fmt.Printf("LK-EMFILE: %s: limit %d, %d free: %d ok, %d 503 with Retry-After, %d failed, %v cached files closed to free descriptors\n",
		posName, lowered.Cur, spare, exhausted.ok, exhausted.unavailable, exhausted.failed, evicted)
	if exhausted.unavailable+exhausted.failed == 0 && evicted == 0 {
		t.Errorf("the descriptor limit was never hit: every request succeeded and no cached file was given back")
	}

	// descriptors free again: every request succeeds, on the old connection
	// and on a new one
	for _, f := range hog {
		f.Close()
	}
	recovered := run("descriptors free again", false)
	if err := fetchFile(context.Background(), newClient(t, "h2", s.Cert.clientTLS()), s.URL, files[len(files)/2]); err != nil {
		t.Errorf("new connection after recovery: %v", err)
	}
	fmt.Printf("LK-EMFILE: %s: descriptors free again: %d of %d ok\n", posName, recovered.ok, requests)
	if recovered.ok != requests {
		t.Errorf("after recovery %d of %d requests succeeded", recovered.ok, requests)
	}
	if !t.Failed() {
		fmt.Println("LK-EMFILE-CHILD-OK")
	}
}

// lkFetchOr503 GETs f: a 200 must have exactly f's bytes; a 503 is
// returned with its Retry-After; an error otherwise.
func lkFetchOr503(c *http.Client, base string, f siteFile) (status int, retryAfter string, err error) {
	resp, err := c.Get(base + f.path)
	if err != nil {
		return 0, "", err
	}
	defer resp.Body.Close()
	h := sha256.New()
	n, err := io.Copy(h, resp.Body)
	if err != nil {
		return 0, "", fmt.Errorf("%s: status %d, reading body after %d bytes: %w", f.path, resp.StatusCode, n, err)
	}
	switch resp.StatusCode {
	case http.StatusOK:
		if n != f.size || !bytes.Equal(h.Sum(nil), f.sum[:]) {
			return 0, "", fmt.Errorf("%s: 200 with %d bytes (want %d), content matches: %v", f.path, n, f.size, bytes.Equal(h.Sum(nil), f.sum[:]))
		}
	case http.StatusServiceUnavailable:
	default:
		return 0, "", fmt.Errorf("%s: status %d, want 200 or 503", f.path, resp.StatusCode)
	}
	return resp.StatusCode, resp.Header.Get("Retry-After"), nil
}

// ---------------------------------------------------------------- part 4: bounded memory

// TestSlowReadersBoundedMemory opens 1,000 streams (10 connections x 100)
// of 1 MB files whose client first reads nothing at all, then a trickle,
// against h2_file_server without the wrapper, with it below TLS and with
// it above TLS. The heap must stay under a bound derived from the
// configured limits, and everything must be released afterwards.
func TestSlowReadersBoundedMemory(t *testing.T) {
	root := t.TempDir()
	files := writeSiteFiles(t, root, "m", 20, func(int) int { return 1_000_000 })
	for _, pos := range []lkPosition{lkNone, lkBelow, lkAbove} {
		t.Run(pos.name, func(t *testing.T) {
			lkNeedWrapper(t, pos)
			lkSlowReaders(t, root, files, pos)
		})
	}
}

// The heap bound of the slow-reader test. What a stream blocked on a
// client that does not read holds on the heap: h2_file_server's chunk
// buffer (16,375 bytes, from chunkPool, held while its Write waits), the
// bufio.Writer x/net gives each response (4 KiB), x/net's stream and
// write request, the http.Request and its context, Caddy's per-request
// replacer, vars and response-writer wrappers: about 25 KiB; allowed 32
// KiB. What a connection holds, counting both ends since the client runs
// in this process: crypto/tls's record buffers in and out, x/net's framer
// read buffer (16 KiB plus) and buffered writer, HPACK tables: allowed
// 256 KiB. The wrapper holds at most twice max_pending per connection
// (see lkWrapperBound), and never more than max_total per wrapper
// instance. The cache holds at most max_memory (the 1 MB files are larger
// than small_file_max, so nothing here).
//
// The test checks two things against the sum of these allowances: the
// live heap after a collection with every stream blocked, which must
// stay within the baseline + the allowances + 4 MiB; and the peak of the
// heap in use, sampled every 50 ms, which must stay within the baseline +
// twice the allowances (the heap in use may be twice the live heap before
// the collector runs, GOGC=100) + 32 MiB (the runtime, the race
// detector's bookkeeping in the heap, the pools).
//
// Measured with -race on 2 cores: 27-28 KiB live per blocked stream
// (26-27 MiB for 1,000, connections included), against 46-47 MiB
// allowed; heap in use peaks 36-51 MiB above the baseline, against
// 115-118 MiB allowed. An implementation that buffered a file per stream
// (1,000 MB), or ignored max_pending and buffered what the server writes
// (up to the 1,000 MB the streams would send), or kept some 20 KiB more
// per stream than today, fails.
const (
	h2StreamAllowance = 32 << 10
	h2ConnAllowance   = 256 << 10
	lkFixedAllowance  = 32 << 20
	lkSlowCacheMemory = 8 << 20
)

// lkWrapperBound is the most the coalesce wrappers may hold in buffers
// with conns connections through each of layers wrappers. As max_pending
// is documented (listener.go), a connection queues at most max_pending
// bytes behind the batch being written, which was queued, so no larger:
// twice max_pending, in whole 16 KiB chunks. Each wrapper instance holds
// no more than max_total in all.
func lkWrapperBound(layers, conns int) uint64 {
	queue := (lkMaxPending + coalesceChunkSize - 1) / coalesceChunkSize * coalesceChunkSize
	perConn := uint64(2 * queue)
	return uint64(layers) * min(uint64(conns)*perConn, lkMaxTotal)
}

// lkSamples are the peaks seen by lkSample.
type lkSamples struct {
	heapInuse, heapAlloc, rssKiB, wrapperBytes uint64
	goroutines, n                              int
}

// lkSample samples the heap, RSS, goroutines and wrapper buffers every
// 50 ms until stop is closed, keeping the peaks.
func lkSample(stop <-chan struct{}) <-chan lkSamples {
	out := make(chan lkSamples, 1)
	go func() {
		var p lkSamples
		tick := time.NewTicker(50 * time.Millisecond)
		defer tick.Stop()
		for {
			var ms runtime.MemStats
			runtime.ReadMemStats(&ms)
			p.heapInuse = max(p.heapInuse, ms.HeapInuse)
			p.heapAlloc = max(p.heapAlloc, ms.HeapAlloc)
			p.rssKiB = max(p.rssKiB, procStatusKiB("VmRSS"))
			p.wrapperBytes = max(p.wrapperBytes, uint64(lkWrapperBuffered()))
			p.goroutines = max(p.goroutines, runtime.NumGoroutine())
			p.n++
			select {
			case <-stop:
				out <- p
				return
			case <-tick.C:
			}
		}
	}()
	return out
}

// lkThrottled lets a connection's reader take at most lkTrickleRate,
// counted in bytes: each Read (of at most 16 KiB) waits until the bytes of
// the previous one are paid for. Counting Reads instead lets through one
// frame per two Reads whatever its size (the framer reads a frame's header
// and its payload apart), and the 100 HEADERS frames the server sends
// first on each connection, one per stream as x/net's scheduler goes
// round the streams, then fill the whole trickle: no DATA arrives.
type lkThrottled struct {
	r    io.Reader
	next time.Time
}

// lkTrickleRate is what a slow reader reads, in bytes per second: 400
// KiB/s, so that no 1 MB stream can end within the 1.5 s trickle.
const lkTrickleRate = 400 << 10

func (t *lkThrottled) Read(p []byte) (int, error) {
	if d := time.Until(t.next); d > 0 {
		time.Sleep(d)
	}
	n, err := t.r.Read(p[:min(len(p), 16<<10)])
	t.next = time.Now().Add(time.Duration(int64(n) * int64(time.Second) / lkTrickleRate))
	return n, err
}

func lkSlowReaders(t *testing.T, root string, files []siteFile, pos lkPosition) {
	const conns, perConn, streams = 10, 100, 1000
	s := lkStart(t, root, map[string]any{"max_files": 64, "max_memory": lkSlowCacheMemory}, pos, nil)
	lkWarm(t, s, files)
	base := lkMeasure(t, root)
	stop := make(chan struct{})
	peaks := lkSample(stop)

	// every stream may receive its whole file and the connection all of
	// them: only TCP, and the wrapper's limits, hold the server back
	cs := make([]*h2Conn, conns)
	throttles := make([]*lkThrottled, conns)
	for i := range cs {
		c, err := dialH2(s.Addr, h2DialOpts{
			streamWindow: 1 << 20, connWindow: 1 << 30,
			reader: func(r io.Reader) io.Reader { throttles[i] = &lkThrottled{r: r}; return throttles[i] },
		})
		if err != nil {
			t.Fatal(err)
		}
		defer c.abort()
		cs[i] = c
		for j := range perConn {
			if _, err := c.get(files[(i*perConn+j)%len(files)].path); err != nil {
				t.Fatal(err)
			}
		}
	}

	// phase 1: the client reads nothing; every handler starts and blocks
	deadline := time.Now().Add(20 * time.Second)
	for runtime.NumGoroutine() < base.goroutines+streams && time.Now().Before(deadline) {
		time.Sleep(20 * time.Millisecond)
	}
	started := runtime.NumGoroutine() - base.goroutines
	time.Sleep(1500 * time.Millisecond)
	stalled := runtime.NumGoroutine() - base.goroutines
	// what the blocked streams keep reachable
	runtime.GC()
	var ms runtime.MemStats
	runtime.ReadMemStats(&ms)
	liveBlocked := ms.HeapAlloc

	// phase 2: a trickle, lkTrickleRate per connection
	var trickled atomic.Int64
	var headers atomic.Int64
	var wg sync.WaitGroup
	readErrs := make([]error, conns)
	stopAt := time.Now().Add(1500 * time.Millisecond)
	for i, c := range cs {
		c.tls.SetReadDeadline(stopAt)
		wg.Go(func() {
			ids := map[uint32]*h2Stream{}
			for j := range perConn {
				ids[uint32(1+2*j)] = &h2Stream{file: files[(i*perConn+j)%len(files)]}
			}
			err := c.pump(ids, func(_ uint32, st *h2Stream) error {
				if st.reset || st.ended {
					return fmt.Errorf("stream ended during the trickle: %v", st)
				}
				if st.n == 0 {
					headers.Add(1)
				}
				return nil
			}, func() bool { return false })
			var got int64
			for _, st := range ids {
				got += st.n
			}
			trickled.Add(got)
			if got == 0 {
				readErrs[i] = errors.New("no DATA arrived during the trickle")
			}
			var ne net.Error
			if !errors.As(err, &ne) || !ne.Timeout() {
				readErrs[i] = errors.Join(readErrs[i], err)
			}
		})
	}
	wg.Wait()
	close(stop)
	p := <-peaks
	for _, c := range cs {
		c.abort()
	}
	hwm := procStatusKiB("VmHWM")

	wrapperBound := lkWrapperBound(pos.layers, conns)
	allowance := streams*h2StreamAllowance + conns*h2ConnAllowance + wrapperBound + lkSlowCacheMemory
	liveBound := base.heapAlloc + allowance + 4<<20
	bound := base.heapInuse + 2*allowance + lkFixedAllowance
	t.Logf("%s: live heap after a collection with all streams blocked: %.1f MiB, %.1f MiB over the baseline (%.1f KiB per stream), bound %.1f MiB",
		pos.name, lkMiB(liveBlocked), lkMiB(liveBlocked-base.heapAlloc), float64(liveBlocked-base.heapAlloc)/streams/1024, lkMiB(liveBound))
	t.Logf("%s: 1,000 slow streams of 1 MB files on 10 connections, %d samples: heap in use %.1f MiB at baseline, peak %.1f MiB (allocated peak %.1f MiB), bound %.1f MiB; "+
		"peak RSS %.1f MiB (VmHWM %.1f MiB, the whole process over the whole run, the race detector's memory included under -race); goroutines %d at baseline, +%d with all streams blocked, peak %d; "+
		"wrapper buffers peak %.2f MiB (bound %.2f MiB); trickle read %.1f MiB, %d response headers",
		pos.name, p.n, lkMiB(base.heapInuse), lkMiB(p.heapInuse), lkMiB(p.heapAlloc), lkMiB(bound),
		float64(p.rssKiB)/1024, float64(hwm)/1024, base.goroutines, stalled, p.goroutines,
		lkMiB(p.wrapperBytes), lkMiB(wrapperBound), lkMiB(uint64(trickled.Load())), headers.Load())

	for i, err := range readErrs {
		if err != nil {
			t.Errorf("connection %d during the trickle: %v", i, err)
		}
	}
	if started < streams || stalled < streams {
		t.Errorf("only %d handlers started and %d were still blocked after 1.5 s; want all %d", started, stalled, streams)
	}
	if trickled.Load() == 0 {
		t.Errorf("nothing arrived during the trickle")
	}
	if liveBlocked > liveBound {
		t.Errorf("live heap with every stream blocked %.1f MiB exceeds the bound %.1f MiB", lkMiB(liveBlocked), lkMiB(liveBound))
	}
	if p.heapInuse > bound {
		t.Errorf("peak heap in use %.1f MiB exceeds the bound %.1f MiB", lkMiB(p.heapInuse), lkMiB(bound))
	}
	if p.wrapperBytes > wrapperBound {
		t.Errorf("coalesce buffers peaked at %d bytes, more than twice max_pending allows for %d connections through %d wrappers (%d)",
			p.wrapperBytes, conns, pos.layers, wrapperBound)
	}
	s.closeClients()
	lkCheckReleased(t, pos.name+" after the slow readers left", root, base, 64)
}
