package integration

// Security suite, part 2 (see security_test.go): no wrong bytes while
// files change.

import (
	"bytes"
	"errors"
	"fmt"
	"io"
	"maps"
	"math/rand/v2"
	"net/http"
	"os"
	"path/filepath"
	"slices"
	"strconv"
	"strings"
	"sync"
	"sync/atomic"
	"testing"
	"time"
)

// secSettled checks, once nothing has changed for longer than the cache's
// revalidate interval, that every protocol gets exactly each file as it is
// now: its bytes, and the ETag of its current size and modification time
// (or 404 when absent, 403 when unreadable and not root). It returns the
// number of requests sent.
func secSettled(t *testing.T, label string, dir string, files []*secHistory, clients []diffClient, site func(diffClient) diffSite) int {
	n := 0
	for _, h := range files {
		name := filepath.Join(dir, h.name)
		info, statErr := os.Stat(name)
		cur := h.current()
		for _, dc := range clients {
			for _, rangeReq := range []bool{false, true} {
				n++
				r := secFetch(dc, site(dc), "/"+h.name, rangeReq)
				what := fmt.Sprintf("%s: %s GET /%s (range %v) after the changes settled", label, dc.name, h.name, rangeReq)
				if r.doErr != nil || r.bodyErr != nil {
					t.Errorf("%s: %v %v", what, r.doErr, r.bodyErr)
					continue
				}
				want, body := http.StatusOK, cur
				if rangeReq {
					want, body = http.StatusPartialContent, cur[secRangeFrom:secRangeTo+1]
				}
				switch {
				case !h.present:
					want = http.StatusNotFound
				case !h.readable && os.Geteuid() != 0:
					want = http.StatusForbidden
				}
				if r.status != want {
					t.Errorf("%s: status %d, want %d", what, r.status, want)
					continue
				}
				if want != http.StatusOK && want != http.StatusPartialContent {
					continue
				}
				if statErr != nil {
					t.Fatal(statErr)
				}
				etag := fmt.Sprintf(`"%s-%s"`, strconv.FormatInt(info.ModTime().UnixNano(), 36), strconv.FormatInt(info.Size(), 36))
				if got := r.header.Get("Etag"); got != etag || !bytes.Equal(r.body, body) || r.contentLen != int64(len(body)) {
					h.mu.Lock()
					explain := h.explainLocked(r.body, int64(len(cur)-len(cur)), nil)
					h.mu.Unlock()
					t.Errorf("%s: ETag %q (file: %q), Content-Length %d, %d body bytes, want the current %d bytes; %s",
						what, got, etag, r.contentLen, len(r.body), len(body), explain)
				}
			}
		}
	}
	return n
}

// secTally counts outcomes.
type secTally struct {
	requests, ok, torn, aborted, notFound, forbidden, mismatches, settled atomic.Int64
}

func TestWrongBytesUnderMutation(t *testing.T) {
	if testing.Short() {
		t.Skip("hammers files for seconds")
	}
	base := t.TempDir()
	d := diffFixtureDirs{base: base, root: filepath.Join(base, "root"), outside: filepath.Join(base, "outside")}
	if err := os.MkdirAll(d.root, 0o755); err != nil {
		t.Fatal(err)
	}
	type phase struct {
		name       string
		cache      map[string]any
		revalidate time.Duration
		active     time.Duration // changes between two settle checks
		rounds     int
		cfg        *diffConfig
		dir        string
	}
	phases := []*phase{
		{name: "cache_default", cache: map[string]any{}, revalidate: time.Second, active: 3 * time.Second, rounds: 1},
		{name: "revalidate_1ms", cache: map[string]any{"revalidate": "1ms"}, revalidate: time.Millisecond, active: 450 * time.Millisecond, rounds: 6},
	}
	var cfgs []*diffConfig
	for _, p := range phases {
		p.dir = filepath.Join(base, p.name)
		if err := os.MkdirAll(p.dir, 0o755); err != nil {
			t.Fatal(err)
		}
		p.cfg = secCfg("wb_"+p.name, map[string]any{}, map[string]any{"cache": p.cache})
		p.cfg.h2Root = p.dir
		cfgs = append(cfgs, p.cfg)
	}
	diffStartCaddy(t, d, cfgs)
	diffCheckHandlers(t, cfgs)
	clients := diffClients(t)
	for _, dc := range clients {
		dc.c.Timeout = 30 * time.Second // a timeout means a hang
	}
	// how far back a response may reach: the revalidate interval plus
	// scheduling margin for a loaded, -race run
	const margin = 250 * time.Millisecond

	// the oracle must be able to fail
	t.Run("sanity", func(t *testing.T) {
		t0 := time.Now()
		a, b := bytes.Repeat([]byte("a"), 2000), bytes.Repeat([]byte("b"), 2000)
		h := &secHistory{name: "f"}
		h.recordAt(t0, t0, false, a)
		h.recordAt(t0.Add(time.Second), t0.Add(time.Second), false, b)
		res := func(body []byte, etagSize int, at time.Time) secResult {
			return secResult{
				t0: at, t1: at.Add(time.Millisecond), proto: "h2", status: 200, contentLen: int64(len(body)), body: body,
				header: http.Header{"Etag": {fmt.Sprintf(`"%s-%s"`, strconv.FormatInt(at.UnixNano(), 36), strconv.FormatInt(int64(etagSize), 36))}},
			}
		}
		mixed := append(slices.Clone(a[:1000]), b[1000:]...)
		cases := []struct {
			name string
			r    secResult
			want secOutcome
		}{
			{"current version", res(b, 2000, t0.Add(2*time.Second)), secOK},
			{"old version within the window", res(a, 2000, t0.Add(1100*time.Millisecond)), secOK},
			{"old version after the window", res(a, 2000, t0.Add(5*time.Second)), secMismatch},
			{"wrong ETag size", res(b, 1999, t0.Add(2*time.Second)), secMismatch},
			{"two versions mixed, no change in place", res(mixed, 2000, t0.Add(1100*time.Millisecond)), secMismatch},
			{"short body", res(b[:1000], 2000, t0.Add(2*time.Second)), secMismatch},
		}
		short := res(b[:1000], 2000, t0.Add(2*time.Second))
		short.contentLen, short.bodyErr, short.shortCleanH2 = 2000, io.ErrUnexpectedEOF, true
		cases = append(cases, struct {
			name string
			r    secResult
			want secOutcome
		}{"clean short HTTP/2 body", short, secMismatch})
		reset := short
		reset.shortCleanH2, reset.h2StreamErr, reset.bodyErr = false, true, errors.New("stream error: INTERNAL_ERROR")
		cases = append(cases, struct {
			name string
			r    secResult
			want secOutcome
		}{"reset HTTP/2 stream after consistent bytes", reset, secAborted})
		for _, c := range cases {
			if got, why := h.check(c.r, 500*time.Millisecond); got != c.want {
				t.Errorf("%s: outcome %d (%s), want %d", c.name, got, why, c.want)
			}
		}
		// a change in place allows a torn body then, not later
		h.recordAt(t0.Add(3*time.Second), t0.Add(3*time.Second), true, a)
		if got, why := h.check(res(mixed, 2000, t0.Add(3*time.Second)), 500*time.Millisecond); got != secTorn {
			t.Errorf("torn body during a change in place: outcome %d (%s)", got, why)
		}
		if got, _ := h.check(res(mixed, 2000, t0.Add(5*time.Second)), 500*time.Millisecond); got != secMismatch {
			t.Errorf("torn body long after a change in place: outcome %d", got)
		}
		// a change held up between its start and its system call (as a
		// loaded machine does for hundreds of milliseconds): the version
		// before it stays acceptable until the change ended
		slow := &secHistory{name: "slow"}
		slow.recordAt(t0, t0, false, a)
		slow.recordAt(t0.Add(time.Second), t0.Add(2*time.Second), false, b)
		if got, why := slow.check(res(a, 2000, t0.Add(1900*time.Millisecond)), 500*time.Millisecond); got != secOK {
			t.Errorf("old version before a slow change ended: outcome %d (%s)", got, why)
		}
		if got, _ := slow.check(res(a, 2000, t0.Add(3*time.Second)), 500*time.Millisecond); got != secMismatch {
			t.Errorf("old version after a slow change ended and the window: outcome %d", got)
		}
		// zeros past a cut in the window: sendfile's (h1c) documented
		// limitation, never another path's, never before the cut
		c := &secHistory{name: "c"}
		c.recordAt(t0, t0, false, a)
		c.recordAt(t0.Add(time.Second), t0.Add(time.Second), false, a[:1500:1500])
		zeroed, early := slices.Clone(a), slices.Clone(a)
		clear(zeroed[1500:])
		clear(early[1000:])
		for _, z := range []struct {
			body  []byte
			proto string
			want  secOutcome
		}{{zeroed, "h1c", secTorn}, {zeroed, "h1", secMismatch}, {zeroed, "h2", secMismatch}, {early, "h1c", secMismatch}} {
			r := res(z.body, 2000, t0.Add(time.Second))
			r.proto = z.proto
			if got, why := c.check(r, 500*time.Millisecond); got != z.want {
				t.Errorf("%s body zeroed from %d after a cut to 1500: outcome %d (%s), want %d", z.proto, bytes.IndexByte(z.body, 0), got, why, z.want)
			}
		}
	})

	var total secTally
	faults := map[string]int{}
	for _, p := range phases {
		t.Run(p.name, func(t *testing.T) {
			m := &secMutator{t: t, dir: p.dir, rng: rand.New(rand.NewPCG(7, uint64(len(p.name)))), counts: map[string]int{}} //nolint:gosec // test data
			for _, f := range []struct {
				name     string
				inPlace  bool
				min, max int
			}{
				// in memory (small_file_max is 256 KiB), and held open
				{"atomic-small.txt", false, 1100, 8 << 10},
				{"atomic-large.bin", false, 300 << 10, 500 << 10},
				{"inplace-small.txt", true, 1100, 40 << 10},
				{"inplace-medium.bin", true, 200 << 10, 300 << 10}, // across small_file_max
				{"inplace-large.bin", true, 300 << 10, 500 << 10},
			} {
				h := &secHistory{name: f.name, inPlace: f.inPlace, min: f.min, max: f.max, present: true, readable: true}
				c := m.content(h, (f.min+f.max)/2)
				if err := os.WriteFile(filepath.Join(p.dir, f.name), c, 0o644); err != nil {
					t.Fatal(err)
				}
				h.change(false, func() error { return nil }, c)
				m.files = append(m.files, h)
			}
			window := p.revalidate + margin
			var tally secTally
			var reportMu sync.Mutex
			reported := 0
			phaseT0 := time.Now()
			report := func(format string, args ...any) {
				reportMu.Lock()
				defer reportMu.Unlock()
				if reported++; reported <= 20 {
					t.Errorf(format, args...)
				}
			}
			stop := make(chan struct{})
			var wg sync.WaitGroup
			var gate sync.RWMutex // held by the settle checks, to have the server to themselves
			worker := func(dc diffClient, seed uint64) {
				defer wg.Done()
				_, site := p.cfg.sites(dc)
				rng := rand.New(rand.NewPCG(seed, 99)) //nolint:gosec // test
				for {
					select {
					case <-stop:
						return
					default:
					}
					h := m.files[rng.IntN(len(m.files))]
					gate.RLock()
					r := secFetch(dc, site, "/"+h.name, rng.IntN(8) == 0)
					gate.RUnlock()
					outcome, why := h.check(r, window)
					tally.requests.Add(1)
					switch outcome {
					case secOK:
						tally.ok.Add(1)
					case secTorn:
						tally.torn.Add(1)
					case secAborted:
						tally.aborted.Add(1)
					case secNotFound:
						tally.notFound.Add(1)
					case secForbidden:
						tally.forbidden.Add(1)
					case secMismatch:
						tally.mismatches.Add(1)
						report("%s %s GET /%s (range %v) at +%v..+%v: %s\n  status %d, Content-Length %d, ETag %q, Content-Range %q, %d body bytes, errors %v / %v",
							p.name, dc.name, h.name, r.rangeReq, r.t0.Sub(phaseT0), r.t1.Sub(phaseT0), why,
							r.status, r.contentLen, r.header.Get("Etag"), r.header.Get("Content-Range"), len(r.body), r.doErr, r.bodyErr)
					}
				}
			}
			byName := map[string]diffClient{}
			for _, dc := range clients {
				byName[dc.name] = dc
			}
			// 16 HTTP/2 streams, and a few HTTP/1.1 connections with TLS
			// and without (sendfile)
			for i := range 16 {
				wg.Add(1)
				go worker(byName["h2"], uint64(i))
			}
			for i := range 2 {
				wg.Add(2)
				go worker(byName["h1"], uint64(100+i))
				go worker(byName["h1c"], uint64(200+i))
			}
			site := func(dc diffClient) diffSite { _, s := p.cfg.sites(dc); return s }
			// the last round goes on until minRequests were checked (the
			// rate of a loaded, -race run is a fraction of a quiet one's),
			// within maxActive
			const minRequests, maxActive = 200, 30 * time.Second
			for round := range p.rounds {
				deadline := time.Now().Add(p.active)
				more := func() bool {
					return round == p.rounds-1 && tally.requests.Load() < minRequests && time.Since(phaseT0) < maxActive
				}
				for time.Now().Before(deadline) || more() {
					m.step()
					time.Sleep(time.Duration(2+m.rng.IntN(6)) * time.Millisecond)
				}
				// quiet: the cache must catch up within revalidate
				gate.Lock()
				time.Sleep(p.revalidate + margin)
				n := secSettled(t, fmt.Sprintf("%s round %d", p.name, round), p.dir, m.files, clients, site)
				gate.Unlock()
				tally.settled.Add(int64(n))
			}
			close(stop)
			wg.Wait()

			n := 0
			var desc []string
			for _, op := range slices.Sorted(maps.Keys(m.counts)) {
				desc = append(desc, fmt.Sprintf("%s=%d", op, m.counts[op]))
				faults[op] += m.counts[op]
				n += m.counts[op]
			}
			t.Logf("%s: %d requests: %d whole versions, %d torn by a change in place (documented), %d aborted, %d 404, %d 403, %d mismatches; %d settle checks; %d faults injected (%s)",
				p.name, tally.requests.Load(), tally.ok.Load(), tally.torn.Load(), tally.aborted.Load(), tally.notFound.Load(), tally.forbidden.Load(),
				tally.mismatches.Load(), tally.settled.Load(), n, strings.Join(desc, " "))
			if os.Geteuid() == 0 {
				t.Logf("running as root: mode 000 does not stop root's reads, so chmod 000 exercises only the cache's mode check, never a 403")
			}
			if tally.requests.Load() < minRequests {
				t.Errorf("only %d requests", tally.requests.Load())
			}
			if tally.ok.Load() < tally.requests.Load()/4 {
				t.Errorf("only %d of %d responses were whole versions", tally.ok.Load(), tally.requests.Load())
			}
			for _, op := range []string{"truncate", "extend", "append", "rewrite_in_place", "rewrite_resize", "rename_over", "delete", "chmod_000"} {
				if m.counts[op] == 0 {
					t.Errorf("fault %s never injected", op)
				}
			}
			total.requests.Add(tally.requests.Load() + tally.settled.Load())
			total.mismatches.Add(tally.mismatches.Load())
			total.aborted.Add(tally.aborted.Load())
			total.torn.Add(tally.torn.Load())
			total.notFound.Add(tally.notFound.Load())
		})
	}
	n := 0
	for _, c := range faults {
		n += c
	}
	t.Logf("total: %d requests, %d faults injected, %d mismatches, %d aborted, %d torn (documented), %d not found",
		total.requests.Load(), n, total.mismatches.Load(), total.aborted.Load(), total.torn.Load(), total.notFound.Load())
}
