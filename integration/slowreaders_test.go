package integration

// Reliability suite, part 4: memory stays bounded with 1,000 slow streams
// (see leak_test.go for the suite and its measuring).

import (
	"errors"
	"fmt"
	"io"
	"net"
	"runtime"
	"sync"
	"sync/atomic"
	"testing"
	"time"

	"github.com/h2file/caddy-h2file/internal/coalesce"
	"github.com/h2file/caddy-h2file/internal/harness"
	"github.com/h2file/caddy-h2file/internal/harness/h2client"
	"github.com/h2file/caddy-h2file/internal/send"
)

// TestSlowReadersBoundedMemory opens 1,000 streams (10 connections x 100)
// of 1 MB files whose client first reads nothing at all, then a trickle,
// against h2_file_server without the wrapper, with it below TLS and with
// it above TLS. The heap must stay under a bound derived from the
// configured limits, and everything must be released afterwards.
func TestSlowReadersBoundedMemory(t *testing.T) {
	root := t.TempDir()
	files := harness.WriteSiteFiles(t, root, "m", 20, func(int) int { return 1_000_000 })
	for _, pos := range []lkPosition{lkNone, lkBelow, lkAbove} {
		t.Run(pos.name, func(t *testing.T) {
			lkNeedWrapper(t, pos)
			lkSlowReaders(t, root, files, pos)
		})
	}
}

// The heap bound of the slow-reader test. What a stream blocked on a client
// that does not read holds on the heap: h2_file_server's chunk buffer
// (16,375 bytes, from chunkPool, held while its Write waits), the
// bufio.Writer x/net gives each response (4 KiB), x/net's stream and write
// request, the http.Request and its context, Caddy's per-request replacer,
// vars and response-writer wrappers: about 25 KiB; allowed 32 KiB; a stream
// whose writes grew holds a grown buffer instead, from a budget of
// send.MaxGrownBytes for the whole process, counted apart (the bytes the blocked
// streams hold, at most the budget). What a connection holds, counting both
// ends since the client runs in this process: crypto/tls's record buffers
// in and out, x/net's framer read buffer (16 KiB plus) and buffered writer,
// HPACK tables: allowed 256 KiB. The wrapper holds at most twice
// max_pending per connection (see lkWrapperBound), and never more than
// max_total per wrapper instance. The cache holds at most max_memory (the 1
// MB files are larger than small_file_max, so nothing here).
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
// is documented (coalescer.go), a connection queues at most max_pending
// bytes behind the batch being written, which was queued, so no larger:
// twice max_pending, in whole 16 KiB chunks. Each wrapper instance holds
// no more than max_total in all.
func lkWrapperBound(layers, conns int) uint64 {
	queue := (lkMaxPending + coalesce.ChunkSize - 1) / coalesce.ChunkSize * coalesce.ChunkSize
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
			p.rssKiB = max(p.rssKiB, harness.ProcStatusKiB("VmRSS"))
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

func lkSlowReaders(t *testing.T, root string, files []harness.SiteFile, pos lkPosition) {
	const conns, perConn, streams = 10, 100, 1000
	s := lkStart(t, root, map[string]any{"max_files": 64, "max_memory": lkSlowCacheMemory}, pos, nil)
	lkWarm(t, s, files)
	base := lkMeasure(t, root)
	stop := make(chan struct{})
	peaks := lkSample(stop)

	// every stream may receive its whole file and the connection all of
	// them: only TCP, and the wrapper's limits, hold the server back
	cs := make([]*h2client.Conn, conns)
	throttles := make([]*lkThrottled, conns)
	for i := range cs {
		c, err := h2client.Dial(s.Addr, h2client.Options{
			StreamWindow: 1 << 20, ConnWindow: 1 << 30,
			Reader: func(r io.Reader) io.Reader { throttles[i] = &lkThrottled{r: r}; return throttles[i] },
		})
		if err != nil {
			t.Fatal(err)
		}
		defer c.Abort()
		cs[i] = c
		for j := range perConn {
			if _, err := c.Get(files[(i*perConn+j)%len(files)].Path); err != nil {
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
	// the grown write buffers the blocked streams hold: a budget for the
	// whole process, on top of what each stream may hold
	grownBlocked := send.ReadStats().GrownBytes
	if grownBlocked > send.MaxGrownBytes {
		t.Errorf("grown buffers hold %d bytes, more than their budget of %d", grownBlocked, send.MaxGrownBytes)
	}

	// phase 2: a trickle, lkTrickleRate per connection
	var trickled atomic.Int64
	var headers atomic.Int64
	var wg sync.WaitGroup
	readErrs := make([]error, conns)
	stopAt := time.Now().Add(1500 * time.Millisecond)
	for i, c := range cs {
		c.SetReadDeadline(stopAt)
		wg.Go(func() {
			ids := map[uint32]*h2client.Stream{}
			for j := range perConn {
				ids[uint32(1+2*j)] = &h2client.Stream{File: files[(i*perConn+j)%len(files)]}
			}
			err := c.Pump(ids, func(_ uint32, st *h2client.Stream) error {
				if st.Reset || st.Ended {
					return fmt.Errorf("stream ended during the trickle: %v", st)
				}
				if st.N == 0 {
					headers.Add(1)
				}
				return nil
			}, func() bool { return false })
			var got int64
			for _, st := range ids {
				got += st.N
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
		c.Abort()
	}
	hwm := harness.ProcStatusKiB("VmHWM")

	wrapperBound := lkWrapperBound(pos.layers, conns)
	allowance := streams*h2StreamAllowance + conns*h2ConnAllowance + wrapperBound + lkSlowCacheMemory
	liveBound := base.heapAlloc + allowance + uint64(grownBlocked) + 4<<20
	bound := base.heapInuse + 2*allowance + send.MaxGrownBytes + lkFixedAllowance
	t.Logf("%s: live heap after a collection with all streams blocked: %.1f MiB, %.1f MiB over the baseline (%.1f KiB per stream), of which grown write buffers %.1f MiB; bound %.1f MiB",
		pos.name, lkMiB(liveBlocked), lkMiB(liveBlocked-base.heapAlloc), float64(liveBlocked-base.heapAlloc)/streams/1024, lkMiB(uint64(grownBlocked)), lkMiB(liveBound))
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
	s.CloseClients()
	lkCheckReleased(t, pos.name+" after the slow readers left", root, base, 64)
}
