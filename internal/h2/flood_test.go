package h2

import (
	"bytes"
	"fmt"
	"strings"
	"testing"
	"time"

	"golang.org/x/net/http2"
)

// The flood defence (flood.go), over raw frames: each attack of the
// engine's DoS checklist (ping, SETTINGS, empty DATA and padding floods,
// CONTINUATION floods, PRIORITY churn, rapid reset and server-provoked
// resets, WINDOW_UPDATE dribble and overflow, too many streams, unknown
// frames) ends with GOAWAY ENHANCE_YOUR_CALM from the engine, and each
// legitimate pattern, however long, does not.

// floodFrames is how many frames an attack sends: well past floodLimit,
// well under x/net's 10,000 queued control frames.
const floodFrames = 3000

const goAwayCalm = "GOAWAY ENHANCE_YOUR_CALM"

// floodAttack is one attack: setup, then frame(i) for i < n (n is
// floodFrames unless set), then end.
type floodAttack struct {
	name  string
	open  rawOpen
	n     int
	setup func(c *rawConn)
	frame func(c *rawConn, i int)
	end   func(c *rawConn)
	// xnetCuts says x/net's server ends this attack with ENHANCE_YOUR_CALM
	// too, or may (its limits count handlers waiting, which depends on
	// how fast they return); else it must not, so that the attack shows
	// the defence is the engine's own.
	xnetCuts bool
}

func (a floodAttack) script() rawScript {
	return rawScript{name: a.name, open: a.open, run: func(c *rawConn) {
		if a.setup != nil {
			a.setup(c)
		}
		n := a.n
		if n == 0 {
			n = floodFrames
		}
		for i := range n {
			a.frame(c, i)
			if i%64 == 63 {
				c.flush()
			}
		}
		if a.end != nil {
			a.end(c)
		}
		c.sync()
	}}
}

// id is the client stream of the i-th request.
func id(i int) uint32 { return uint32(2*i + 1) }

// bigBlock is stream 1's GET header block, made large by a field of n
// bytes.
func bigBlock(c *rawConn, n int) []byte {
	return c.block(reqFields("GET", "/bytes?n=5", "x-pad", strings.Repeat("p", n)))
}

var floodAttacks = []floodAttack{
	// CVE-2019-9512
	{name: "ping", frame: func(c *rawConn, i int) { c.ping(p8(fmt.Sprintf("p%07d", i))) }},
	// CVE-2019-9515
	{name: "settings", frame: func(c *rawConn, i int) { c.settings() }},
	// CVE-2019-9518, on a request whose body never comes
	{name: "empty_data", setup: func(c *rawConn) { c.req(1, "POST", "/ctx", false) },
		frame: func(c *rawConn, i int) { c.data(1, false, nil) },
		end:   func(c *rawConn) { c.rst(1, http2.ErrCodeCancel) }},
	{name: "padding_only_data", setup: func(c *rawConn) { c.req(1, "POST", "/ctx", false) },
		frame: func(c *rawConn, i int) { c.dataPadded(1, false, nil, []byte{0}) },
		end:   func(c *rawConn) { c.rst(1, http2.ErrCodeCancel) }},
	// CVE-2024-27316: a header block that never grows
	{name: "empty_continuation",
		setup: func(c *rawConn) {
			c.headersFrame(http2.HeadersFrameParam{StreamID: 1, BlockFragment: c.block(reqFields("GET", "/bytes?n=5")), EndStream: true})
		},
		frame: func(c *rawConn, i int) { c.continuation(1, false, nil) },
		end:   func(c *rawConn) { c.continuation(1, true, nil) }},
	// ... or grows a byte a frame
	{name: "one_byte_continuation", n: floodFrames,
		setup: func(c *rawConn) {
			b := bigBlock(c, 2*floodFrames) // Huffman-coded: about 1.5 KiB less
			c.headersFrame(http2.HeadersFrameParam{StreamID: 1, BlockFragment: b[:1], EndStream: true})
			c.hbuf.Reset()
			c.hbuf.Write(b[1:]) // the rest, a byte a frame
		},
		frame: func(c *rawConn, i int) { c.continuation(1, false, c.hbuf.Bytes()[i:i+1]) },
		end:   func(c *rawConn) { c.continuation(1, true, c.hbuf.Bytes()[floodFrames:]) }},
	// CVE-2019-9513
	{name: "priority", frame: func(c *rawConn, i int) {
		c.priority(id(i), http2.PriorityParam{StreamDep: id(i + 1), Weight: uint8(i)})
	}},
	{name: "priority_update", frame: func(c *rawConn, i int) {
		c.rawFrame(http2.FramePriorityUpdate, 0, 0, priorityUpdate(id(i), fmt.Sprintf("u=%d", i%8)))
	}},
	// CVE-2023-44487 and CVE-2019-9514: handlers that would answer only
	// when their stream ends
	{name: "rapid_reset", xnetCuts: true, frame: func(c *rawConn, i int) {
		c.get(id(i), "/ctx")
		c.rst(id(i), http2.ErrCodeCancel)
	}},
	// CVE-2025-8671 ("MadeYouReset"): frames that make the server reset
	// the stream
	{name: "data_after_end_stream", xnetCuts: true, frame: func(c *rawConn, i int) {
		c.get(id(i), "/ctx")
		c.data(id(i), true, []byte{0})
	}},
	{name: "window_overflow", xnetCuts: true, frame: func(c *rawConn, i int) {
		c.get(id(i), "/ctx")
		c.windowUpdate(id(i), 1<<31-1)
	}},
	// streams past SETTINGS_MAX_CONCURRENT_STREAMS, each refused
	{name: "too_many_streams",
		setup: func(c *rawConn) {
			for i := range 250 {
				c.get(id(i), "/ctx")
			}
		},
		frame: func(c *rawConn, i int) { c.get(id(250+i), "/bytes?n=5") },
		end: func(c *rawConn) {
			for i := range 250 {
				c.rst(id(i), http2.ErrCodeCancel)
			}
		}},
	// CVE-2019-9511: a window given a byte at a time, for DATA frames of
	// a byte
	{name: "window_dribble", open: rawOpen{settings: []http2.Setting{{ID: http2.SettingInitialWindowSize, Val: 0}}},
		setup: func(c *rawConn) { c.get(1, "/bytes?n=1000000") },
		frame: func(c *rawConn, i int) { c.windowUpdate(1, 1) },
		end:   func(c *rawConn) { c.rst(1, http2.ErrCodeCancel) }},
	// a connection window raised again and again, with nothing sent
	{name: "window_raise", frame: func(c *rawConn, i int) { c.windowUpdate(0, 1024) }},
	{name: "window_update_closed_stream", setup: func(c *rawConn) { c.get(1, "/bytes?n=5"); c.waitEnd(1) },
		frame: func(c *rawConn, i int) { c.windowUpdate(1, 16384) }},
	// header blocks again and again on a stream the server reset (its
	// RST_STREAM NO_ERROR after answering without reading the body):
	// ignored, as trailers in flight are, but each decoded
	{name: "headers_on_reset_stream",
		setup: func(c *rawConn) { c.req(1, "POST", "/bytes?n=5", false); c.waitEnd(1) },
		frame: func(c *rawConn, i int) { c.headers(1, true, hfs("x-trailer", "1")) }},
	// WINDOW_UPDATEs on a stream the server reset, more than it ever
	// sent: counted as on a stream closed normally
	{name: "window_update_reset_stream",
		setup: func(c *rawConn) { c.req(1, "POST", "/bytes?n=5", false); c.waitEnd(1) },
		frame: func(c *rawConn, i int) { c.windowUpdate(1, 16384) }},
	// DATA on a stream the server reset, past the window the client had
	// on it (1 MiB): each frame is answered with a WINDOW_UPDATE for the
	// connection, and would be without end
	{name: "data_on_reset_stream_past_window", n: 1200,
		setup: func(c *rawConn) { c.req(1, "POST", "/bytes?n=5", false); c.waitEnd(1) },
		frame: func(c *rawConn, i int) { c.data(1, false, make([]byte, 16384)) }},
	// extension frames, which a server must ignore (RFC 9113 §5.5)
	{name: "unknown_frames", frame: func(c *rawConn, i int) { c.rawFrame(0xfa, 0, 0, nil) }},
}

// TestFloodAttacks runs each attack against the engine and x/net's
// server: the engine must end it with GOAWAY (ENHANCE_YOUR_CALM) and
// close the connection; x/net's outcome is logged (it has no such
// defence, and must show none where xnetCuts is false).
func TestFloodAttacks(t *testing.T) {
	release := make(chan struct{})
	p := startPair(t, rawHandler(release), Config{})
	t.Cleanup(func() { close(release) })
	engineAddr, xnetAddr := p.addr(), strings.TrimPrefix(p.xnetURL, "https://")
	for _, a := range floodAttacks {
		t.Run(a.name, func(t *testing.T) {
			t.Parallel()
			before := ReadStats().Floods
			got, err := runRawScript("engine", engineAddr, a.script())
			if err != nil {
				t.Fatal(err)
			}
			ref, err := runRawScript("x/net", xnetAddr, a.script())
			if err != nil {
				t.Fatal(err)
			}
			text, refText := strings.Join(got.lines(), "\n"), strings.Join(ref.lines(), "\n")
			if !strings.Contains(text, goAwayCalm) || !strings.Contains(text, "closed") {
				t.Errorf("the engine did not end the attack with %s and a close:\n%s", goAwayCalm, text)
			}
			if ReadStats().Floods == before {
				t.Error("no flood counted")
			}
			if !a.xnetCuts && strings.Contains(refText, goAwayCalm) {
				t.Errorf("x/net ended the attack too: it shows nothing of the engine's defence:\n%s", refText)
			}
			t.Logf("x/net: %s", strings.ReplaceAll(refText, "\n", "; "))
		})
	}
}

// floodLegit are what clients do, on one connection for long: none is
// a flood. Each sends well over floodLimit frames that would count if
// the rule were cruder.
var floodLegit = []rawScript{
	// a browser: a PRIORITY_UPDATE before each request, a third of them
	// cancelled (RST_STREAM) before their response, a PING now and then
	{name: "browser", run: func(c *rawConn) {
		for i := range 3000 {
			c.rawFrame(http2.FramePriorityUpdate, 0, 0, priorityUpdate(id(i), "u=3,i"))
			if i%3 == 2 {
				c.get(id(i), "/ctx")
				c.rst(id(i), http2.ErrCodeCancel)
			} else {
				c.get(id(i), "/bytes?n=100")
			}
			if i%50 == 49 {
				c.sync()
			}
		}
	}},
	// a download whose windows the client gives back a frame at a time,
	// on the stream and the connection
	{name: "refund_every_frame", open: rawOpen{settings: []http2.Setting{{ID: http2.SettingInitialWindowSize, Val: 16384}}},
		run: func(c *rawConn) {
			const frames = 1200
			c.get(1, fmt.Sprintf("/bytes?n=%d", frames*16384))
			for k := 1; k <= frames; k++ {
				c.waitData(1, k*16384)
				c.windowUpdate(1, 16384)
				c.windowUpdate(0, 16384)
			}
			c.waitEnd(1)
		}},
	// a download whose windows (64 KB, the connection's too) the client
	// gives back as it reads, 700 bytes at a time: once the window is
	// in flight in pieces of 700 bytes, the server sends frames of 700
	// bytes, each given back as it comes (two streams sharing a
	// connection window cut it into such pieces)
	{name: "refund_small_frames", open: rawOpen{settings: []http2.Setting{{ID: http2.SettingInitialWindowSize, Val: 65535}}, noWindow: true},
		run: func(c *rawConn) {
			const pieces = 1500
			c.get(1, fmt.Sprintf("/bytes?n=%d", pieces*700))
			for k := 1; k <= pieces; k++ {
				c.waitData(1, k*700)
				c.windowUpdate(1, 700)
				c.windowUpdate(0, 700)
			}
			c.waitEnd(1)
		}},
	// responses sent whole before the client reads them, which it then
	// gives back 4 KiB at a time, on streams already closed (as Go's
	// client does)
	{name: "refund_after_end", run: func(c *rawConn) {
		for i := range 300 {
			c.get(id(i), "/bytes?n=32768")
			c.waitEnd(id(i))
			for range 8 {
				c.windowUpdate(id(i), 4096)
			}
			c.windowUpdate(0, 32768)
		}
	}},
	// uploads answered before their bodies (a 413, a 401): the server
	// resets each stream after its response, and the client, not having
	// read it yet, sends its body, as much as the stream's window allows
	{name: "bodies_after_early_answers", run: func(c *rawConn) {
		for i := range 60 {
			c.req(id(i), "POST", "/bytes?n=5", false)
			c.waitEnd(id(i))
			for range 64 { // the stream's window of 1 MiB
				c.data(id(i), false, make([]byte, 16384))
			}
			c.sync()
		}
	}},
	// a request body sent in frames of a byte, each refunded
	{name: "body_a_byte_a_frame", run: func(c *rawConn) {
		c.req(1, "POST", "/echo", false)
		for i := range 3000 {
			c.data(1, false, []byte{byte(i)})
		}
		c.data(1, true, nil)
		c.waitEnd(1)
	}},
}

// TestFloodLegit checks that no legitimate pattern trips the defence:
// the engine answers all of it, and sends no GOAWAY.
func TestFloodLegit(t *testing.T) {
	release := make(chan struct{})
	p := startPair(t, rawHandler(release), Config{})
	t.Cleanup(func() { close(release) })
	for _, s := range floodLegit {
		t.Run(s.name, func(t *testing.T) {
			t.Parallel()
			sum, err := runRawScript("engine", p.addr(), s)
			if err != nil {
				t.Fatal(err)
			}
			text := strings.Join(sum.lines(), "\n")
			if strings.Contains(text, "GOAWAY") || strings.Contains(text, "closed") || strings.Contains(text, "timed out") {
				t.Errorf("a legitimate client was cut off:\n%s", text)
			}
		})
	}
}

// TestFloodMeterScan feeds the meter a sequence of frames cut at every
// byte, and checks that it counts the small header block fragments in
// it whatever the cuts, and nothing else.
func TestFloodMeterScan(t *testing.T) {
	var buf bytes.Buffer
	fr := http2.NewFramer(&buf, nil)
	fr.AllowIllegalWrites = true
	fr.WriteHeaders(http2.HeadersFrameParam{StreamID: 1, BlockFragment: []byte("abc")}) // counts
	fr.WriteContinuation(1, false, nil)                                                 // counts
	fr.WriteContinuation(1, false, make([]byte, floodSmallFragment))                    // large: no
	fr.WriteContinuation(1, true, nil)                                                  // ends the block: no
	fr.WriteData(1, false, make([]byte, 70000))                                         // a payload with frame-like bytes
	fr.WriteHeaders(http2.HeadersFrameParam{StreamID: 3, BlockFragment: []byte("x"), EndHeaders: true})
	fr.WriteContinuation(3, false, []byte{1}) // counts
	wire := buf.Bytes()
	for cut := 1; cut <= 10; cut++ {
		var m floodMeter
		m.init(nil)
		for p := wire; len(p) > 0; {
			k := min(cut, len(p))
			m.scan(p[:k])
			p = p[k:]
		}
		if m.count != 3 || m.left != 0 || m.hdrN != 0 {
			t.Errorf("reads of %d bytes: counted %d (want 3), %d payload bytes and %d header bytes outstanding", cut, m.count, m.left, m.hdrN)
		}
	}
}

// TestFloodCredit checks the arithmetic: credit earned is taken when the
// count passes the limit, what is left of it is kept, and a count past
// the limit with no credit trips.
func TestFloodCredit(t *testing.T) {
	var m floodMeter
	m.init(nil)
	m.earn(500)
	for range floodLimit + 400 {
		m.add("test")
	}
	if m.tripped != "" {
		t.Fatalf("tripped at %d with 500 frames of credit", m.count)
	}
	for range 101 {
		m.add("test")
	}
	if m.tripped != "test" {
		t.Fatalf("not tripped at %d frames with 500 of credit", floodLimit+501)
	}

	// an hour without a check drains the count to zero, not below: time
	// is not saved up
	var old floodMeter
	old.init(nil)
	old.decayed = time.Now().Add(-time.Hour)
	for i := 1; i <= 2*(floodLimit+1); i++ {
		old.add("test")
		if tripped := old.tripped != ""; tripped != (i == 2*(floodLimit+1)) {
			t.Fatalf("an hour-old meter: tripped %v at frame %d, want at frame %d only", tripped, i, 2*(floodLimit+1))
		}
	}
}
