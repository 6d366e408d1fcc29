package integration

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
// This file has what the parts share: wrapper positions, starting the
// site, and measuring what the process holds. The scenarios are in
// leak_scenarios_test.go and leak_emfile_test.go, part 4 in
// slowreaders_test.go. Caddy is a process singleton: none of these tests
// may run in parallel.

import (
	"context"
	"runtime"
	"sync"
	"testing"
	"time"

	"github.com/caddyserver/caddy/v2"
	"github.com/prometheus/client_golang/prometheus/testutil"

	"github.com/h2file/caddy-h2file/internal/coalesce"
	"github.com/h2file/caddy-h2file/internal/h2"
	"github.com/h2file/caddy-h2file/internal/harness"
	"github.com/h2file/caddy-h2file/internal/harness/caddysite"
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
	// h2file's own HTTP/2 engine, with coalesce below tls
	lkEngine = lkPosition{name: "engine", layers: 1, wrappers: func(c map[string]any) []any {
		return []any{c, map[string]any{"wrapper": "tls"}, map[string]any{"wrapper": "h2_engine"}}
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

// ---------------------------------------------------------------- Caddy

// lkStart starts Caddy serving root with h2_file_server (cache settings
// as given), the coalesce wrapper at pos and the extra server fields.
func lkStart(t *testing.T, root string, cache map[string]any, pos lkPosition, server map[string]any) *caddysite.Server {
	t.Helper()
	var extra map[string]any
	if cache != nil {
		extra = map[string]any{"cache": cache}
	}
	sc := caddysite.Config{Handlers: []any{caddysite.H2FileServer(root, extra)}, Server: server}
	if pos.layers > 0 {
		sc.Wrappers = pos.wrappers(lkCoalesce(lkMaxPending))
	}
	return caddysite.Start(t, sc)
}

// lkWarm fetches every file once, so that the cache holds what it will
// hold during the scenarios before the baseline is taken.
func lkWarm(t *testing.T, s *caddysite.Server, files ...[]harness.SiteFile) {
	t.Helper()
	for _, set := range files {
		for _, f := range set {
			// A scenario may begin right after a config reload: a
			// connection the old server accepted as it stopped is reset
			// (with the suite's 1 ns grace period, file_server's too), so
			// a warm-up fetch is sent again on a fresh connection, up to
			// three times.
			var err error
			for try := 0; try < 3; try++ {
				if err = harness.FetchFile(context.Background(), s.H2, s.URL, f); err == nil {
					break
				}
				t.Logf("warm-up of %s, try %d: %v", f.Path, try+1, err)
				s.CloseClients()
				time.Sleep(50 * time.Millisecond)
			}
			if err != nil {
				t.Fatalf("warm-up: %v", err)
			}
		}
	}
	s.CloseClients()
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
		fds:        harness.OpenFDs(t),
		siteFDs:    harness.FDsOpenOn(t, root),
		goroutines: runtime.NumGoroutine() - h2.ReadStats().IdleWorkers, // idle engine handler goroutines wait for reuse
		heapAlloc:  ms.HeapAlloc,
		heapInuse:  ms.HeapInuse,
		chunksOut:  coalesce.ReadStats().ChunksOut,
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
func lkWrapperBuffered() float64 { return testutil.ToFloat64(coalesce.Metrics.Buffered) }

// lkCheckReleased waits (up to 15 s) for descriptors, goroutines and the
// wrappers' buffers and flushers to come back to base, then checks them
// and the live heap, and that at most maxSiteFDs descriptors stay open on
// the site (the cache's bound). Every try first closes the idle
// connections of the harness's clients (see harness.CloseIdleClientConns).
func lkCheckReleased(t *testing.T, what, root string, base lkSnap, maxSiteFDs int) lkSnap {
	t.Helper()
	deadline := time.Now().Add(15 * time.Second)
	var after lkSnap
	var flushers, chunksOut int64
	var buffered float64
	for {
		// an HTTP/2 connection that a client's late dial added to its
		// pool after the scenario closed the idle ones is closed here
		harness.CloseIdleClientConns()
		// descriptors on the site are the cache's, checked against its
		// bound below; all others must come back to the baseline. The
		// checks below judge this same sample: a goroutine or descriptor
		// that comes and goes between two samples (a straggler of the
		// runtime or Caddy) must not fail a sample that was settled.
		after = lkMeasure(t, root)
		flushers, buffered, chunksOut = coalesce.ReadStats().Flushers, lkWrapperBuffered(), coalesce.ReadStats().ChunksOut
		settled := after.fds-after.siteFDs <= base.fds-base.siteFDs+lkFDSlack &&
			after.siteFDs <= maxSiteFDs && // a handler still closing its file
			after.goroutines <= base.goroutines+lkGoroutineSlack &&
			after.heapAlloc <= base.heapAlloc+lkHeapSlack &&
			flushers == 0 && buffered == 0 && chunksOut == base.chunksOut
		if settled || time.Now().After(deadline) {
			break
		}
		time.Sleep(50 * time.Millisecond)
	}
	t.Logf("%s: baseline -> after: fds %d -> %d (on the site %d -> %d), goroutines %d -> %d, live heap %.1f -> %.1f MiB, heap in use %.1f -> %.1f MiB",
		what, base.fds, after.fds, base.siteFDs, after.siteFDs, base.goroutines, after.goroutines,
		lkMiB(base.heapAlloc), lkMiB(after.heapAlloc), lkMiB(base.heapInuse), lkMiB(after.heapInuse))
	if other, baseOther := after.fds-after.siteFDs, base.fds-base.siteFDs; other > baseOther+lkFDSlack {
		t.Errorf("%s: %d descriptors open besides the site's, baseline %d (+%d allowed)\n%s", what, other, baseOther, lkFDSlack, harness.DescribeFDs())
	}
	if after.siteFDs > maxSiteFDs {
		t.Errorf("%s: %d descriptors open on the site, the cache keeps at most %d", what, after.siteFDs, maxSiteFDs)
	}
	if after.goroutines > base.goroutines+lkGoroutineSlack {
		t.Errorf("%s: %d goroutines, baseline %d (+%d allowed)\n%s", what, after.goroutines, base.goroutines, lkGoroutineSlack, harness.GoroutineDump())
	}
	if after.heapAlloc > base.heapAlloc+lkHeapSlack {
		t.Errorf("%s: live heap %.1f MiB, baseline %.1f MiB (+%.0f MiB allowed)", what, lkMiB(after.heapAlloc), lkMiB(base.heapAlloc), lkMiB(lkHeapSlack))
	}
	if flushers != 0 || buffered != 0 || chunksOut != base.chunksOut {
		t.Errorf("%s: coalesce wrapper still has %d flushers running, %v bytes in buffers and %d chunks out (baseline %d)", what, flushers, buffered, chunksOut, base.chunksOut)
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
