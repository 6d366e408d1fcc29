package integration

// Reliability suite, part 3: nothing leaks when HTTP/2 clients misbehave
// (the measuring is in leak_test.go): streams reset mid-body, connections
// closed mid-body, clients that stop giving flow-control credit until
// write_idle_timeout fires, 2,000 concurrent streams with every body
// verified, config reloads every 200 ms under load.

import (
	"bytes"
	"crypto/sha256"
	"fmt"
	"sync/atomic"
	"testing"
	"time"

	"golang.org/x/net/http2"

	"github.com/h2file/caddy-h2file/internal/harness"
	"github.com/h2file/caddy-h2file/internal/harness/caddysite"
	"github.com/h2file/caddy-h2file/internal/harness/h2client"
)

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
	// held open by the cache (larger than small_file_max, 256 KiB)
	big := harness.WriteSiteFiles(t, root, "big", 24, func(i int) int { return 1<<20 + i*4099 })
	medium := harness.WriteSiteFiles(t, root, "medium", 16, func(i int) int { return int(defaultSmallFileMax) + 6_000 + i*6_007 })
	// kept in memory (once they are older than the cache's settle time)
	small := harness.WriteSiteFiles(t, root, "small", 40, func(i int) int { return 200 + i*1_499 })

	for _, pos := range []lkPosition{lkNone, lkBoth, lkEngine} {
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
					s.CloseClients()
					lkCheckReleased(t, pos.name+"/"+name, root, base, lkMaxFiles)
				})
			}
			scenario("reset_mid_body", nil, func(t *testing.T) { lkResetMidBody(t, s, big, medium) })
			scenario("close_mid_body", nil, func(t *testing.T) { lkCloseMidBody(t, s, big) })
			scenario("2000_streams", func(t *testing.T) { lkWriteIdleTimeoutOff(t, s) }, func(t *testing.T) { lkManyStreams(t, s, small, medium) })
			scenario("reload_under_load", nil, func(t *testing.T) { lkReloadUnderLoad(t, s, pos, small, medium, big) })
			// last: it leaves write_idle_timeout configured
			scenario("stalled_reader_timeout", func(t *testing.T) {
				if err := s.Reconfigure(func(server, _ map[string]any) { server["write_idle_timeout"] = lkWriteIdleTimeout.String() }); err != nil {
					t.Fatal(err)
				}
			}, func(t *testing.T) { lkStalledReader(t, s, big) })

			// everything the cache held is closed once Caddy is gone
			caddysite.StopCaddy(t)
			deadline := time.Now().Add(15 * time.Second)
			for harness.FDsOpenOn(t, root) != 0 && time.Now().Before(deadline) {
				time.Sleep(50 * time.Millisecond)
			}
			if n := harness.FDsOpenOn(t, root); n != 0 {
				t.Errorf("%d descriptors still open on the site after Caddy stopped", n)
			}
		})
	}
}

// (a) Clients reset every stream with RST_STREAM CANCEL after its first
// DATA frame; the connection must go on serving whole files.
func lkResetMidBody(t *testing.T, s *caddysite.Server, big, medium []harness.SiteFile) {
	const conns, perConn = 4, 25
	lkEachConn(t, conns, func(ci int) error {
		// stream windows smaller than the big files (the smallest is 1 MiB:
		// a window of exactly its size let the whole of it arrive before
		// the client read its first DATA frame), large enough for the check
		c, streams, err := h2client.DialStreams(s.Addr, h2client.Options{StreamWindow: 1 << 19, ConnWindow: 1 << 30}, big, ci*perConn, perConn)
		if err != nil {
			return err
		}
		defer c.Close()
		resetting := perConn
		err = c.Pump(streams, func(id uint32, st *h2client.Stream) error {
			switch {
			case st.RSTSent:
			case st.Ended || st.Reset:
				return fmt.Errorf("stream ended before the client reset it: %v", st)
			case st.N > 0:
				st.RSTSent = true
				resetting--
				return c.RST(id, http2.ErrCodeCancel)
			}
			return nil
		}, func() bool { return resetting == 0 })
		if err != nil {
			return fmt.Errorf("resetting streams: %w", err)
		}
		for _, st := range streams {
			if st.Status != "200" || st.N == 0 || st.N >= st.File.Size {
				return fmt.Errorf("want 200 and part of the body before the reset: %v", st)
			}
		}
		// the same connection still serves whole files, byte for byte
		f := medium[ci%len(medium)]
		id, err := c.Get(f.Path)
		if err != nil {
			return err
		}
		check := &h2client.Stream{File: f, Sum: sha256.New()}
		streams[id] = check
		if err := c.Pump(streams, nil, func() bool { return check.Ended || check.Reset }); err != nil {
			return fmt.Errorf("after the resets: %w", err)
		}
		if !check.Complete() {
			return fmt.Errorf("after the resets: %v", check)
		}
		return nil
	})
}

// (b) Clients close the TCP connection mid-body: half with TLS
// close_notify and FIN, half with a TCP reset.
func lkCloseMidBody(t *testing.T, s *caddysite.Server, big []harness.SiteFile) {
	const conns, perConn = 8, 12
	lkEachConn(t, conns, func(ci int) error {
		c, streams, err := h2client.DialStreams(s.Addr, h2client.Options{StreamWindow: 2 << 20, ConnWindow: 1 << 30}, big, ci*perConn, perConn)
		if err != nil {
			return err
		}
		var total int64
		err = c.Pump(streams, func(_ uint32, st *h2client.Stream) error {
			if st.Ended || st.Reset {
				return fmt.Errorf("stream ended before the client closed: %v", st)
			}
			if st.Status != "200" {
				return fmt.Errorf("want 200: %v", st)
			}
			return nil
		}, func() bool {
			total = 0
			for _, st := range streams {
				total += st.N
			}
			return total >= 512<<10
		})
		if ci%2 == 0 {
			c.Close()
		} else {
			c.Abort()
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
// The scenarios' is below lkCheckReleased's 15 s, so that the timer Caddy
// arms when a handler returns has fired before the check gives up
// (2000_streams runs without it: lkWriteIdleTimeoutOff).
const (
	lkWriteIdleTimeoutDefault = 10 * time.Second
	lkWriteIdleTimeout        = time.Second
)

func lkStalledReader(t *testing.T, s *caddysite.Server, big []harness.SiteFile) {
	const timeout = lkWriteIdleTimeout
	const conns, perConn = 4, 25
	lkEachConn(t, conns, func(ci int) error {
		// the default stream window (65,535 bytes) and a connection window
		// that never runs out
		c, streams, err := h2client.DialStreams(s.Addr, h2client.Options{ConnWindow: 1 << 30}, big, ci*perConn, perConn)
		if err != nil {
			return err
		}
		defer c.Close()
		start := time.Now()
		ended := 0
		err = c.Pump(streams, func(_ uint32, st *h2client.Stream) error {
			if st.Ended {
				return fmt.Errorf("stream ended cleanly although its window ran out: %v", st)
			}
			if st.Reset {
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
			stalled := st.ResetAt.Sub(st.LastData)
			if st.Status != "200" || st.N != 65535 || !st.Reset || st.Code != http2.ErrCodeInternal ||
				stalled < timeout/4 || stalled > 10*timeout {
				return fmt.Errorf("want 200, 65535 bytes, RST_STREAM INTERNAL_ERROR about %v after the last DATA: %v, %v after the last DATA",
					timeout, st, stalled.Round(time.Millisecond))
			}
		}
		return nil
	})
}

// lkWriteIdleTimeoutOff turns write_idle_timeout off until the scenario
// ends. 2000_streams checks leaks and bytes, not timeouts, and the time a
// stream among 100 waits for its turn grows with the machine's load: under
// -race beside other packages' tests, a stream of the engine's waited more
// than 10 s for a write of 64 KiB (CI, twice). Under -race the engine
// takes 11.7 s for the scenario where x/net takes 5.5 s (0.93 s and 0.77 s
// without it), and the most another stream's turns sent between two of a
// stream's frames was 5.4 MB against x/net's 1.6 MB: a turn is 32 KiB
// (fairShare) and handed to the handler's goroutine, where x/net sends
// one 16 KiB frame from what handlers queued. The client's 60 s deadline
// still catches a stall.
func lkWriteIdleTimeoutOff(t *testing.T, s *caddysite.Server) {
	set := func(d time.Duration) {
		if err := s.Reconfigure(func(server, _ map[string]any) { server["write_idle_timeout"] = d.String() }); err != nil {
			t.Fatal(err)
		}
	}
	set(-1)
	t.Cleanup(func() { set(lkWriteIdleTimeoutDefault) })
}

// (d) 20 connections with 100 concurrent streams each, of small files
// (served from memory) and medium ones (from cached descriptors), all
// incremental, every body checked byte for byte.
func lkManyStreams(t *testing.T, s *caddysite.Server, small, medium []harness.SiteFile) {
	const conns, perConn = 20, 100
	var bytesRead, strayResets atomic.Int64
	start := time.Now()
	lkEachConn(t, conns, func(ci int) error {
		c, err := h2client.Dial(s.Addr, h2client.Options{StreamWindow: 1 << 22, ConnWindow: 1 << 30})
		if err != nil {
			return err
		}
		defer c.Close()
		streams := map[uint32]*h2client.Stream{}
		for i := range perConn {
			set := small
			if i%2 == 1 {
				set = medium
			}
			f := set[(ci*perConn+i)%len(set)]
			// incremental (RFC 9218): the streams take turns, as a
			// browser's images do; non-incremental ones are sent one
			// after another, and on a loaded machine under -race the
			// last of a connection's 100 waited longer for its turn than
			// write_idle_timeout, which resets it
			id, err := c.Open(f.Path, true, [2]string{"priority", "u=3, i"})
			if err != nil {
				return err
			}
			streams[id] = &h2client.Stream{File: f, Sum: sha256.New()}
		}
		done := 0
		counted := map[uint32]bool{}
		err = c.Pump(streams, func(id uint32, st *h2client.Stream) error {
			if counted[id] {
				// A RST_STREAM after END_STREAM: Caddy arms the write
				// idle timer once more when a handler returns (see
				// TestLeakScenarios), x/net may arm it after the stream
				// has closed, and it resets the closed stream when it
				// fires, write_idle_timeout later (any handler's
				// streams; clients ignore it). The response had already
				// ended whole; a connection busy for longer than the
				// timeout (this one under -race) sees it.
				if !st.Reset || st.Code != http2.ErrCodeInternal {
					return fmt.Errorf("frame after END_STREAM: %v", st)
				}
				strayResets.Add(1)
				return nil
			}
			if st.Reset {
				return fmt.Errorf("stream reset: %v", st)
			}
			if st.Ended {
				counted[id] = true
				done++
				bytesRead.Add(st.N)
				if !st.Complete() {
					return fmt.Errorf("wrong response: %v (content matches: %v)", st, bytes.Equal(st.Sum.Sum(nil), st.File.Sum[:]))
				}
			}
			return nil
		}, func() bool { return done == perConn })
		if err != nil {
			return fmt.Errorf("after %d of %d streams: %w", done, perConn, err)
		}
		return nil
	})
	t.Logf("%d streams on %d connections: %.1f MiB verified in %v (RST_STREAM after END_STREAM: %d)", conns*perConn, conns,
		lkMiB(uint64(bytesRead.Load())), time.Since(start).Round(time.Millisecond), strayResets.Load())
}
