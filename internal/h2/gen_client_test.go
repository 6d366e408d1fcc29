package h2

import (
	"bytes"
	"crypto/sha256"
	"crypto/tls"
	"encoding/binary"
	"fmt"
	"hash"
	"sync"
	"time"

	"github.com/h2file/caddy-h2file/internal/harness/h2client"
	"golang.org/x/net/http2"
	"golang.org/x/net/http2/hpack"
)

// The client side of the generative differential test: one connection
// that plays a scenario (gen_scenario_test.go) against one server, its
// streams concurrently, gives window back as the scenario's policies say,
// and records what the server sent on each stream (genRun). It keeps the
// rules a legal client keeps: it respects the server's windows, opens
// streams in order, sends nothing on a stream after its own RST_STREAM,
// and stops a stream's request body once the server has reset it (but
// for Lag frames, the ones a real client has in flight).

// genQuiet is how long a connection whose streams have not all ended
// may be silent before they count as stalled: every pause in a scenario
// is a few tens of milliseconds (more under the race detector).
var genQuiet = map[bool]time.Duration{false: 3 * time.Second, true: 5 * time.Second}[genRace]

// genWindow is one receive window of the client: what the server may
// still send (avail), and what the policy refills it to (base).
type genWindow struct {
	base, avail int64
	late        bool // a late refill is scheduled
}

// genRun is what happened on one stream.
type genRun struct {
	plan    *genStreamPlan
	id      uint32
	opened  bool
	sendWin int64 // the server's window for the request body
	recv    genWindow

	seed   uint64 // of the body that must come
	status string
	info   []string // 1xx responses
	header []string // regular fields but Date, sorted
	trail  []string // trailers, sorted
	n      int64    // body bytes received
	sha    hash.Hash
	badAt  int64  // offset of the first wrong body byte, or -1
	end    string // "END_STREAM", "RST_STREAM <code>", "closed", "unprocessed", or "" (not ended)
	after  []string
	// the client's doings
	clientRST  bool // the client reset it before it ended
	serverRST  bool // a RST_STREAM came
	sent       int64
	trailsSent bool // request trailers sent
}

func (r *genRun) ended() bool { return r.end != "" }

// genConn is a connection playing a scenario.
type genConn struct {
	sc       *genScenario
	run      uint64 // genResult.run
	tc       *tls.Conn
	deadline time.Time

	wmu  sync.Mutex // the writing side: fr, henc, hbuf
	fr   *http2.Framer
	henc *hpack.Encoder
	hbuf bytes.Buffer

	mu          sync.Mutex
	cond        *sync.Cond
	runs        []*genRun
	byID        map[uint32]*genRun
	peerInitial int64 // the server's SETTINGS_INITIAL_WINDOW_SIZE
	connSend    int64
	connRecv    genWindow
	goAways     []string // GOAWAY codes received
	errGoAway   string   // the code of a GOAWAY with an error, once one came
	goAwayLast  uint32
	gone        bool // the connection is closed (either side)
	closedByUs  bool
	pingAcked   bool
	violations  []string
	frames      int
	lastActive  time.Time // when the last frame came, or request DATA went (an upload of 1-byte frames is not a stall)
	timers      []*time.Timer
	dribble     int // WINDOW_UPDATEs sent of less than 1 KiB
}

// genResult is what one server did with a scenario.
type genResult struct {
	server     string
	run        uint64 // genRunSeq's number, for the handlers' records (gen_reads_test.go)
	err        error
	runs       []*genRun
	goAways    []string
	closedByUs bool
	violations []string
	stalled    []string
	dribble    int
}

// runGen plays sc on a new connection to addr; it returns once every
// stream ended (or the deadline passed) and the connection is closed.
func runGen(server, addr string, sc *genScenario, wait time.Duration) *genResult {
	res := &genResult{server: server, run: genRunSeq.Add(1)}
	tc, _, err := h2client.DialTLS(addr)
	if err != nil {
		res.err = err
		return res
	}
	c := &genConn{sc: sc, run: res.run, tc: tc, deadline: time.Now().Add(wait), byID: make(map[uint32]*genRun),
		peerInitial: 65535, connSend: 65535, lastActive: time.Now()}
	c.cond = sync.NewCond(&c.mu)
	c.connRecv = genWindow{base: 65535 + int64(sc.ConnGrant), avail: 65535 + int64(sc.ConnGrant)}
	c.fr = http2.NewFramer(tc, nil)
	c.henc = hpack.NewEncoder(&c.hbuf)
	tc.SetWriteDeadline(c.deadline.Add(time.Second))
	for i := range sc.Streams {
		sp := &sc.Streams[i]
		seed, _, _ := sp.expect()
		c.runs = append(c.runs, &genRun{plan: sp, id: uint32(2*i + 1), badAt: -1, sha: sha256.New(), seed: seed})
	}

	settings := []http2.Setting{{ID: http2.SettingInitialWindowSize, Val: sc.Window}}
	if sc.FrameSize != 0 {
		settings = append(settings, http2.Setting{ID: http2.SettingMaxFrameSize, Val: sc.FrameSize})
	}
	if sc.TableSize >= 0 {
		settings = append(settings, http2.Setting{ID: http2.SettingHeaderTableSize, Val: uint32(sc.TableSize)})
	}
	if sc.MaxConc >= 0 {
		settings = append(settings, http2.Setting{ID: http2.SettingMaxConcurrentStreams, Val: uint32(sc.MaxConc)})
	}
	c.write(func() {
		tc.Write([]byte(http2.ClientPreface))
		c.fr.WriteSettings(settings...)
		if sc.ConnGrant > 0 {
			c.fr.WriteWindowUpdate(0, sc.ConnGrant)
		}
	})
	readerDone := make(chan struct{})
	go func() { defer close(readerDone); c.read() }()
	// the waits below are woken by frames, and by this tick for deadlines
	tick := time.NewTicker(20 * time.Millisecond)
	tickDone := make(chan struct{})
	go func() {
		for {
			select {
			case <-tick.C:
				c.cond.Broadcast()
			case <-tickDone:
				return
			}
		}
	}()
	if sc.CloseMs > 0 {
		t := time.AfterFunc(time.Duration(sc.CloseMs)*time.Millisecond, func() {
			c.mu.Lock()
			c.closedByUs = true
			c.mu.Unlock()
			tc.Close()
		})
		defer t.Stop()
	}

	var streams sync.WaitGroup
	c.open(&streams)
	c.mu.Lock()
	for !c.gone && time.Now().Before(c.deadline) && time.Since(c.lastActive) < genQuiet && !c.allEnded() {
		c.cond.Wait()
	}
	quiet := time.Since(c.lastActive).Round(time.Millisecond)
	if !c.gone && c.allEnded() {
		// a PING: what the server did in answer to the frames before it
		// (a GOAWAY for an error, a flood's ENHANCE_YOUR_CALM) comes first
		c.mu.Unlock()
		c.write(func() { c.fr.WritePing(false, [8]byte{'g', 'e', 'n'}) })
		c.mu.Lock()
		for !c.gone && !c.pingAcked && time.Now().Before(c.deadline) {
			c.cond.Wait()
		}
		if !c.gone && !c.pingAcked {
			res.stalled = append(res.stalled, "no ACK of the last PING")
		}
	}
	for _, r := range c.runs {
		if r.opened && !r.ended() && !r.clientRST && !c.gone {
			res.stalled = append(res.stalled, fmt.Sprintf("stream %d neither ended nor was reset (%d body bytes of %s received, nothing for %v)",
				r.id, r.n, genWant(r.plan), quiet))
			r.end = "stalled"
		}
	}
	for _, t := range c.timers {
		t.Stop()
	}
	c.mu.Unlock()
	tc.Close()
	<-readerDone
	tick.Stop()
	close(tickDone)
	c.cond.Broadcast()
	streams.Wait()

	c.mu.Lock()
	defer c.mu.Unlock()
	res.runs, res.goAways, res.closedByUs, res.violations, res.dribble = c.runs, c.goAways, c.closedByUs, c.violations, c.dribble
	return res
}

// genWant describes how much body stream plan sp must get.
func genWant(sp *genStreamPlan) string {
	if _, n, clean := sp.expect(); clean {
		return fmt.Sprint(n)
	}
	return "a reset"
}

func (c *genConn) allEnded() bool {
	for _, r := range c.runs {
		if r.opened && !r.ended() && !r.clientRST {
			return false
		}
	}
	return true
}

// write runs fn with the writing side of the connection; a write error
// is left to the reader to see.
func (c *genConn) write(fn func()) {
	c.wmu.Lock()
	defer c.wmu.Unlock()
	fn()
}

// open opens the scenario's streams in order, each then going on by
// itself on a goroutine of streams.
func (c *genConn) open(streams *sync.WaitGroup) {
	for i, r := range c.runs {
		sp := r.plan
		if c.sc.GoAwayAfter == i {
			c.write(func() { c.fr.WriteGoAway(0, http2.ErrCodeNo, nil) })
			return
		}
		if sp.DelayMs > 0 {
			time.Sleep(time.Duration(sp.DelayMs) * time.Millisecond)
		}
		c.mu.Lock()
		if c.gone {
			c.mu.Unlock()
			return
		}
		r.opened = true
		r.sendWin = c.peerInitial
		r.recv = genWindow{base: int64(c.sc.Window), avail: int64(c.sc.Window)}
		c.mu.Unlock()
		fields := []string{":method", sp.Method, ":scheme", "https", ":authority", "localhost", ":path", sp.path(),
			"x-gen-rec", genRecKey(c.run, r.id)}
		if sp.CL && sp.Upload > 0 {
			fields = append(fields, "content-length", fmt.Sprint(sp.Upload))
		}
		if sp.Trailers {
			fields = append(fields, "trailer", "x-req-t")
		}
		body := sp.Upload > 0 || sp.Trailers
		c.write(func() {
			if sp.Prio != "" && !sp.PrioLate {
				c.fr.WriteRawFrame(0x10, 0, 0, append(binary.BigEndian.AppendUint32(nil, r.id), sp.Prio...))
			}
			c.writeBlock(r.id, !body, hfs(fields...))
			if sp.Prio != "" && sp.PrioLate {
				c.fr.WriteRawFrame(0x10, 0, 0, append(binary.BigEndian.AppendUint32(nil, r.id), sp.Prio...))
			}
		})
		if sp.RST == genRSTAfterMs {
			t := time.AfterFunc(time.Duration(sp.RSTArg)*time.Millisecond, func() { c.reset(r) })
			c.mu.Lock()
			c.timers = append(c.timers, t)
			c.mu.Unlock()
		}
		if body {
			streams.Go(func() { c.upload(r) })
		}
	}
}

// writeBlock writes a header block (HEADERS, then CONTINUATION frames
// when it is over 16 KiB); the caller holds wmu.
func (c *genConn) writeBlock(id uint32, end bool, fields []hpack.HeaderField) {
	c.hbuf.Reset()
	for _, f := range fields {
		c.henc.WriteField(f)
	}
	b := c.hbuf.Bytes()
	first := b[:min(len(b), 16384)]
	b = b[len(first):]
	c.fr.WriteHeaders(http2.HeadersFrameParam{StreamID: id, BlockFragment: first, EndStream: end, EndHeaders: len(b) == 0})
	for len(b) > 0 {
		frag := b[:min(len(b), 16384)]
		b = b[len(frag):]
		c.fr.WriteContinuation(id, len(b) == 0, frag)
	}
}

// reset sends RST_STREAM on r unless it has ended or was reset.
func (c *genConn) reset(r *genRun) {
	c.wmu.Lock()
	defer c.wmu.Unlock()
	c.mu.Lock()
	if r.ended() || r.clientRST || c.gone {
		c.mu.Unlock()
		return
	}
	r.clientRST = true
	c.mu.Unlock()
	c.cond.Broadcast()
	c.fr.WriteRSTStream(r.id, http2.ErrCode(r.plan.RSTCode))
}

// writeUnlessReset runs fn, which writes a frame of r's request, unless
// the client has reset r: the check and the write are one step under
// the write lock, so that no frame of r follows the client's own
// RST_STREAM (a client's error: trailers after it earned a GOAWAY
// PROTOCOL_ERROR from both servers, when the reset's timer fired between
// the check and the write, generator seed 404).
func (c *genConn) writeUnlessReset(r *genRun, fn func()) {
	c.wmu.Lock()
	defer c.wmu.Unlock()
	c.mu.Lock()
	reset := r.clientRST
	c.mu.Unlock()
	if !reset {
		fn()
	}
}

// upload sends r's request body and trailers, within the server's
// windows.
func (c *genConn) upload(r *genRun) {
	sp := r.plan
	seed := genUploadSeed(sp.Shape.Seed)
	buf := make([]byte, max(1, sp.Chunk))
	lag := sp.Lag
	for off := 0; off < sp.Upload; {
		c.mu.Lock()
		for {
			stop := c.gone || r.clientRST || time.Now().After(c.deadline) || (r.serverRST && lag <= 0)
			if stop {
				c.mu.Unlock()
				return
			}
			if min(r.sendWin, c.connSend) > 0 {
				break
			}
			if r.serverRST { // no window will come
				c.mu.Unlock()
				return
			}
			c.cond.Wait()
		}
		if r.serverRST {
			lag--
		}
		k := int(min(int64(sp.Upload-off), int64(len(buf)), r.sendWin, c.connSend))
		r.sendWin -= int64(k)
		c.connSend -= int64(k)
		c.mu.Unlock()
		p := buf[:k]
		genFill(seed, int64(off), p)
		off += k
		end := off == sp.Upload && !sp.Trailers
		c.writeUnlessReset(r, func() { c.fr.WriteData(r.id, end, p) })
		c.mu.Lock()
		r.sent = int64(off)
		c.lastActive = time.Now()
		c.mu.Unlock()
		if sp.RST == genRSTAfterPut && off >= sp.RSTArg {
			c.reset(r)
			return
		}
		if sp.PingPong {
			c.mu.Lock()
			for r.n < int64(off) && !r.ended() && !c.gone && !r.clientRST && time.Now().Before(c.deadline) {
				c.cond.Wait()
			}
			c.mu.Unlock()
		}
		if sp.PaceMs > 0 {
			time.Sleep(time.Duration(sp.PaceMs) * time.Millisecond)
		}
	}
	if !sp.Trailers {
		return
	}
	c.mu.Lock()
	stop := c.gone || r.clientRST || (r.serverRST && lag <= 0)
	r.trailsSent = !stop
	c.mu.Unlock()
	if !stop {
		c.writeUnlessReset(r, func() { c.writeBlock(r.id, true, hfs("x-req-t", "t-"+fmt.Sprint(sp.Upload))) })
	}
}
