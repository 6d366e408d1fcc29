package integration

import (
	"bytes"
	"crypto/tls"
	"fmt"
	"io"
	"net/http"
	"sync"
	"testing"
	"time"

	"golang.org/x/net/http2"
	"golang.org/x/net/http2/hpack"

	"github.com/h2file/caddy-h2file/internal/harness/caddysite"
	"github.com/h2file/caddy-h2file/internal/harness/h2client"
)

// TestEngineIgnoresFramesAfterReset uploads to a route whose
// request_body max_size (1 KB) is below the upload's Content-Length:
// Caddy answers 413 without reading the body, and the server resets the
// stream (RST_STREAM NO_ERROR) to stop the upload. The upload's DATA (and
// trailers) that were in flight then still arrive; here they are sent
// once the 413 has come, as they would arrive from a client farther away.
// RFC 9113 §5.1: frames on a stream the server reset are ignored, and
// count against the connection window only. Through Go's server every
// upload gets its 413 and the connection serves on (a PING is answered);
// the engine must do the same.
func TestEngineIgnoresFramesAfterReset(t *testing.T) {
	routes := []any{winRoute("/limited", map[string]any{"handler": "request_body", "max_size": 1024}, staticResponse("read", ""))}
	winEachServer(t, routes, func(t *testing.T, s *caddysite.Server, engine bool) {
		for _, p := range refusedPatterns {
			t.Run(p.name, func(t *testing.T) {
				got := refusedUpload(t, s.Addr, p)
				switch {
				case got == "":
				case p.rfcOnly && !engine:
					t.Logf("Go's server too: %s", got)
				default:
					t.Error(got)
				}
			})
		}
	})
}

// refusedPattern is how a client uploads after its uploads are refused.
type refusedPattern struct {
	name     string
	uploads  int           // uploads on one connection, one after the other
	size     int           // each upload's body (its Content-Length), sent after the 413
	frame    int           // the size of its DATA frames
	pause    time.Duration // between DATA frames
	trailers bool          // trailers end each upload, after its DATA
	// rfcOnly: Go's server fails it too, and only the engine is held to
	// RFC 9113 §5.1. x/net answers a HEADERS frame on a stream it has
	// closed with GOAWAY PROTOCOL_ERROR (server.go:1911, v0.60.0) once its
	// RST_STREAM is written, as it is by the time trailers sent after the
	// 413 come.
	rfcOnly bool
}

var refusedPatterns = []refusedPattern{
	{name: "1 MiB in 16 KiB frames", uploads: 1, size: 1 << 20, frame: 16 << 10},
	{name: "1 MiB in 1 KiB frames", uploads: 1, size: 1 << 20, frame: 1 << 10},
	{name: "20 uploads of 1 MiB in 16 KiB frames", uploads: 20, size: 1 << 20, frame: 16 << 10},
	{name: "256 KiB in 256-byte frames, 1 ms apart", uploads: 1, size: 256 << 10, frame: 256, pause: time.Millisecond},
	{name: "trailers after 16 KiB", uploads: 1, size: 16 << 10, frame: 16 << 10, trailers: true, rfcOnly: true},
}

// refusedUpload runs p on a new connection and says what went wrong
// ("" if nothing): an upload that did not get its 413, or a connection
// that did not survive the uploads.
func refusedUpload(t *testing.T, addr string, p refusedPattern) string {
	c := winDial(t, addr, 65535, 0)
	body := make([]byte, max(p.frame, 1))
	start := time.Now()
	var statuses []string
	for range p.uploads {
		id, err := c.request(http.MethodPost, "/limited", false, [2]string{"content-length", fmt.Sprint(p.size)})
		if err != nil {
			return fmt.Sprintf("sending the request: %v", err)
		}
		r := c.response(id, 10*time.Second)
		statuses = append(statuses, r.status)
		if r.status != "413" {
			return fmt.Sprintf("upload %d: status %q, ended by %s (%s); want 413", len(statuses), r.status, r.end, c.resets())
		}
		for sent := 0; sent < p.size; sent += p.frame {
			n := min(p.frame, p.size-sent)
			if err := c.data(id, body[:n], sent+n == p.size && !p.trailers); err != nil {
				return fmt.Sprintf("upload %d, after %d bytes: %v", len(statuses), sent, err)
			}
			time.Sleep(p.pause)
		}
		if p.trailers {
			if err := c.trailers(id, [2]string{"x-checksum", "0"}); err != nil {
				return fmt.Sprintf("upload %d, trailers: %v", len(statuses), err)
			}
		}
	}
	if err := c.ping(); err != nil {
		return fmt.Sprintf("PING after the uploads: %v", err)
	}
	// read what the server sent back, until it answers the PING
	deadline := time.Now().Add(10 * time.Second)
	for {
		f, err := c.nextFrame(deadline)
		switch {
		case err != nil:
			return fmt.Sprintf("no answer to a PING after the uploads: %v (%s)", err, c.resets())
		case f.typ == http2.FrameGoAway:
			return fmt.Sprintf("uploads refused with 413: %d, then %v (%s); want the frames after the reset ignored and the PING answered",
				len(statuses), f, c.resets())
		case f.typ == http2.FramePing && f.ack:
			t.Logf("uploads refused with 413: %d in %v; %s", len(statuses), time.Since(start).Round(time.Millisecond), c.resets())
			return ""
		}
	}
}

// resets counts the RST_STREAM frames read, by code.
func (c *winConn) resets() string {
	c.mu.Lock()
	defer c.mu.Unlock()
	n := map[http2.ErrCode]int{}
	for _, f := range c.got {
		if f.typ == http2.FrameRSTStream {
			n[f.code]++
		}
	}
	return fmt.Sprintf("RST_STREAM by code %v", n)
}

// winFrame is a frame the client read, as the tests look at it.
type winFrame struct {
	at     time.Time
	typ    http2.FrameType
	stream uint32
	end    bool                // END_STREAM
	ack    bool                // SETTINGS or PING acknowledgement
	data   []byte              // DATA payload
	fields []hpack.HeaderField // HEADERS, decoded
	code   http2.ErrCode       // RST_STREAM, GOAWAY
}

func (f winFrame) String() string {
	s := fmt.Sprintf("%v stream %d", f.typ, f.stream)
	switch f.typ {
	case http2.FrameRSTStream, http2.FrameGoAway:
		s += " " + f.code.String()
	case http2.FrameData:
		s += fmt.Sprintf(" %d bytes", len(f.data))
	}
	if f.end {
		s += " END_STREAM"
	}
	return s
}

// winConn is an HTTP/2 client connection over TLS, frame by frame, with
// a stream window of its choosing, for the window suites (here and in
// engine_smallwindows_test.go). A goroutine of its own reads every frame:
// it answers SETTINGS and PING, gives back the credit of DATA frames as
// they come (each at once, or once creditAt bytes are unreturned, as
// nghttp2 does at half its window), and keeps what it read for the test.
// Requests may carry bodies and trailers, sent within the windows the
// server gives. (h2client.Conn sends only GETs and counts what comes
// back; these tests need the bytes, the trailers, and when each came.)
type winConn struct {
	addr string
	tc   *tls.Conn
	fr   *http2.Framer

	mu          sync.Mutex // guards the rest, and the writing side of fr
	cond        sync.Cond  // a frame was read, a window opened, or the reading ended
	got         []winFrame // every frame read, in order
	cursor      int        // the next of got that next returns
	readErr     error      // why the reading ended; nil while it goes on
	settled     bool       // the server's first SETTINGS was read
	initWindow  int64      // the server's SETTINGS_INITIAL_WINDOW_SIZE
	connWindow  int64      // what the server's connection window lets us send
	streamDelta map[uint32]int64
	creditAt    int64            // credit is given back once this much is unreturned; 0: after each frame
	unreturned  map[uint32]int64 // DATA read and not given back yet, by stream (0: the connection)
	enc         *hpack.Encoder
	hbuf        bytes.Buffer
	next        uint32
}

// winDial connects to addr with SETTINGS_INITIAL_WINDOW_SIZE window
// (and the default connection window, 65,535) and returns once the
// server's SETTINGS came; the connection closes when the test ends.
func winDial(t *testing.T, addr string, window uint32, creditAt int64) *winConn {
	t.Helper()
	tc, _, err := h2client.DialTLS(addr)
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { tc.Close() })
	c := &winConn{addr: addr, tc: tc, initWindow: 65535, connWindow: 65535, streamDelta: map[uint32]int64{}, creditAt: creditAt, unreturned: map[uint32]int64{}, next: 1}
	c.cond.L = &c.mu
	c.fr = http2.NewFramer(tc, tc)
	c.fr.ReadMetaHeaders = hpack.NewDecoder(4096, nil)
	c.enc = hpack.NewEncoder(&c.hbuf)
	if _, err := io.WriteString(tc, http2.ClientPreface); err != nil {
		t.Fatal(err)
	}
	if err := c.fr.WriteSettings(http2.Setting{ID: http2.SettingInitialWindowSize, Val: window}); err != nil {
		t.Fatal(err)
	}
	go c.read()
	c.mu.Lock()
	defer c.mu.Unlock()
	for !c.settled && c.readErr == nil {
		c.cond.Wait()
	}
	if c.readErr != nil {
		t.Fatalf("before the server's SETTINGS: %v", c.readErr)
	}
	return c
}

// read reads frames until the connection fails or closes.
func (c *winConn) read() {
	for {
		f, err := c.fr.ReadFrame()
		c.mu.Lock()
		if err != nil {
			c.readErr = err
			c.cond.Broadcast()
			c.mu.Unlock()
			return
		}
		wf := winFrame{at: time.Now(), typ: f.Header().Type, stream: f.Header().StreamID}
		switch f := f.(type) {
		case *http2.SettingsFrame:
			wf.ack = f.IsAck()
			if !f.IsAck() {
				if v, ok := f.Value(http2.SettingInitialWindowSize); ok {
					c.initWindow = int64(v)
				}
				c.settled = true
				c.fr.WriteSettingsAck()
			}
		case *http2.PingFrame:
			wf.ack = f.IsAck()
			if !f.IsAck() {
				c.fr.WritePing(true, f.Data)
			}
		case *http2.WindowUpdateFrame:
			if f.StreamID == 0 {
				c.connWindow += int64(f.Increment)
			} else {
				c.streamDelta[f.StreamID] += int64(f.Increment)
			}
		case *http2.DataFrame:
			wf.data, wf.end = bytes.Clone(f.Data()), f.StreamEnded()
			c.creditLocked(0, f.Length)
			if !f.StreamEnded() {
				c.creditLocked(f.StreamID, f.Length)
			}
		case *http2.MetaHeadersFrame:
			wf.fields, wf.end = f.Fields, f.StreamEnded()
		case *http2.RSTStreamFrame:
			wf.code = f.ErrCode
		case *http2.GoAwayFrame:
			wf.code = f.ErrCode
		}
		c.got = append(c.got, wf)
		c.cond.Broadcast()
		c.mu.Unlock()
	}
}

// creditLocked notes n bytes read on stream id (0: the connection) and
// gives back what is unreturned once it reaches creditAt.
func (c *winConn) creditLocked(id, n uint32) {
	c.unreturned[id] += int64(n)
	if k := c.unreturned[id]; k > 0 && k >= c.creditAt {
		c.fr.WriteWindowUpdate(id, uint32(k))
		c.unreturned[id] = 0
	}
}

// nextFrame returns the next frame read, waiting for it until deadline;
// it fails once the reading has ended and every frame was returned, or
// at the deadline.
func (c *winConn) nextFrame(deadline time.Time) (winFrame, error) {
	timer := time.AfterFunc(time.Until(deadline), func() {
		c.mu.Lock()
		c.cond.Broadcast()
		c.mu.Unlock()
	})
	defer timer.Stop()
	c.mu.Lock()
	defer c.mu.Unlock()
	for c.cursor == len(c.got) {
		if c.readErr != nil {
			return winFrame{}, c.readErr
		}
		if !time.Now().Before(deadline) {
			return winFrame{}, fmt.Errorf("no frame within %v", time.Until(deadline).Round(time.Millisecond))
		}
		c.cond.Wait()
	}
	c.cursor++
	return c.got[c.cursor-1], nil
}

// request opens a stream with a request for path, ending it (no body)
// if endStream, with more header fields after the pseudo-headers, and
// returns its ID.
func (c *winConn) request(method, path string, endStream bool, fields ...[2]string) (uint32, error) {
	c.mu.Lock()
	defer c.mu.Unlock()
	id := c.next
	c.next += 2
	head := [][2]string{{":method", method}, {":scheme", "https"}, {":authority", c.addr}, {":path", path}}
	return id, c.writeHeadersLocked(id, endStream, append(head, fields...))
}

// trailers ends stream id with a trailer section.
func (c *winConn) trailers(id uint32, fields ...[2]string) error {
	c.mu.Lock()
	defer c.mu.Unlock()
	return c.writeHeadersLocked(id, true, fields)
}

func (c *winConn) writeHeadersLocked(id uint32, endStream bool, fields [][2]string) error {
	c.hbuf.Reset()
	for _, f := range fields {
		c.enc.WriteField(hpack.HeaderField{Name: f[0], Value: f[1]})
	}
	return c.fr.WriteHeaders(http2.HeadersFrameParam{StreamID: id, BlockFragment: c.hbuf.Bytes(), EndStream: endStream, EndHeaders: true})
}

// data sends p on stream id as one DATA frame, once the server's windows
// allow it (a client that never sends more than it was given).
func (c *winConn) data(id uint32, p []byte, endStream bool) error {
	c.mu.Lock()
	defer c.mu.Unlock()
	n := int64(len(p))
	for c.readErr == nil && (c.connWindow < n || c.initWindow+c.streamDelta[id] < n) {
		c.cond.Wait()
	}
	if c.readErr != nil {
		return fmt.Errorf("waiting for window: %w", c.readErr)
	}
	c.connWindow -= n
	c.streamDelta[id] -= n
	return c.fr.WriteData(id, endStream, p)
}

// ping sends a PING.
func (c *winConn) ping() error {
	c.mu.Lock()
	defer c.mu.Unlock()
	return c.fr.WritePing(false, [8]byte{'w', 'i', 'n'})
}
