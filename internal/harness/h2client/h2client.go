// Package h2client is a raw HTTP/2 client connection over TLS, driven
// frame by frame, for tests of clients that misbehave: reset, stall, stop
// reading, vanish. Only tests import it.
package h2client

import (
	"bytes"
	"crypto/tls"
	"fmt"
	"hash"
	"io"
	"net"
	"sync"
	"sync/atomic"
	"testing"
	"time"

	"golang.org/x/net/http2"
	"golang.org/x/net/http2/hpack"

	"github.com/h2file/caddy-h2file/internal/harness"
)

// Conn is an HTTP/2 client connection over TLS, frame by frame.
type Conn struct {
	addr string
	tcp  *net.TCPConn
	tls  *tls.Conn
	fr   *http2.Framer

	goAwayAt atomic.Int64  // when Drain read a GOAWAY (Unix nanoseconds), or 0
	acked    chan struct{} // closed when Drain has acknowledged the server's first SETTINGS
	ackOnce  sync.Once

	wmu  sync.Mutex // guards the writing side of fr, enc and hbuf
	enc  *hpack.Encoder
	hbuf bytes.Buffer
	next uint32 // next stream ID
}

// Options are the flow-control settings of a client connection.
type Options struct {
	StreamWindow uint32                    // SETTINGS_INITIAL_WINDOW_SIZE; 0: the default, 65,535
	ZeroWindow   bool                      // SETTINGS_INITIAL_WINDOW_SIZE 0 (StreamWindow ignored)
	ConnWindow   uint32                    // connection-level credit granted at once, beyond the default
	Reader       func(io.Reader) io.Reader // wraps the reading side (to throttle it)
}

// Dial connects to addr with ALPN h2 (any certificate), sends the
// preface and SETTINGS, and grants o's credit.
func Dial(addr string, o Options) (*Conn, error) {
	tc, raw, err := DialTLS(addr)
	if err != nil {
		return nil, err
	}
	c := &Conn{addr: addr, tcp: raw, tls: tc, next: 1, acked: make(chan struct{})}
	var r io.Reader = tc
	if o.Reader != nil {
		r = o.Reader(tc)
	}
	c.fr = http2.NewFramer(tc, r)
	c.fr.ReadMetaHeaders = hpack.NewDecoder(4096, nil)
	c.enc = hpack.NewEncoder(&c.hbuf)
	if _, err := io.WriteString(tc, http2.ClientPreface); err != nil {
		tc.Close()
		return nil, err
	}
	var settings []http2.Setting
	switch {
	case o.ZeroWindow:
		settings = append(settings, http2.Setting{ID: http2.SettingInitialWindowSize, Val: 0})
	case o.StreamWindow > 0:
		settings = append(settings, http2.Setting{ID: http2.SettingInitialWindowSize, Val: o.StreamWindow})
	}
	err = c.fr.WriteSettings(settings...)
	if err == nil && o.ConnWindow > 0 {
		err = c.fr.WriteWindowUpdate(0, o.ConnWindow)
	}
	if err != nil {
		tc.Close()
		return nil, err
	}
	return c, nil
}

// DialTLS connects to addr over TCP and TLS with ALPN h2 (any
// certificate, a 60 s deadline for everything) and fails unless h2 was
// negotiated; it returns the TLS connection and the TCP one under it.
func DialTLS(addr string) (*tls.Conn, *net.TCPConn, error) {
	raw, err := net.DialTimeout("tcp", addr, 10*time.Second)
	if err != nil {
		return nil, nil, err
	}
	cfg := harness.InsecureTLS()
	cfg.NextProtos = []string{"h2"}
	tc := tls.Client(raw, cfg)
	tc.SetDeadline(time.Now().Add(60 * time.Second))
	if err := tc.Handshake(); err != nil {
		raw.Close()
		return nil, nil, fmt.Errorf("TLS handshake: %w", err)
	}
	if p := tc.ConnectionState().NegotiatedProtocol; p != "h2" {
		tc.Close()
		return nil, nil, fmt.Errorf("ALPN negotiated %q, want h2", p)
	}
	return tc, raw.(*net.TCPConn), nil
}

// DialStreams is Dial, then getEach; the connection is closed if
// that fails.
func DialStreams(addr string, o Options, files []harness.SiteFile, first, n int) (*Conn, map[uint32]*Stream, error) {
	c, err := Dial(addr, o)
	if err != nil {
		return nil, nil, err
	}
	streams, err := c.GetEach(files, first, n)
	if err != nil {
		c.Close()
		return nil, nil, err
	}
	return c, streams, nil
}

// GetEach opens n streams, each a GET of the next of files (cycling from
// index first), and returns them by stream ID.
func (c *Conn) GetEach(files []harness.SiteFile, first, n int) (map[uint32]*Stream, error) {
	streams := make(map[uint32]*Stream, n)
	for i := range n {
		f := files[(first+i)%len(files)]
		id, err := c.Get(f.Path)
		if err != nil {
			return nil, err
		}
		streams[id] = &Stream{File: f}
	}
	return streams, nil
}

// Get opens a stream with a GET of path and returns its ID.
func (c *Conn) Get(path string) (uint32, error) {
	return c.Open(path, true)
}

// Open opens a stream with a GET of path, ending the stream (no body to
// follow) if endStream, with more header fields after the pseudo-headers,
// and returns its ID.
func (c *Conn) Open(path string, endStream bool, fields ...[2]string) (uint32, error) {
	c.wmu.Lock()
	defer c.wmu.Unlock()
	id := c.next
	c.next += 2
	head := [][2]string{{":method", "GET"}, {":scheme", "https"}, {":authority", c.addr}, {":path", path}}
	return id, c.writeHeadersLocked(id, endStream, append(head, fields...))
}

// WriteHeaders sends one HEADERS frame on stream id (a trailer section,
// on a stream already open) with exactly these fields.
func (c *Conn) WriteHeaders(id uint32, endStream bool, fields ...[2]string) error {
	c.wmu.Lock()
	defer c.wmu.Unlock()
	return c.writeHeadersLocked(id, endStream, fields)
}

func (c *Conn) writeHeadersLocked(id uint32, endStream bool, fields [][2]string) error {
	c.hbuf.Reset()
	for _, f := range fields {
		c.enc.WriteField(hpack.HeaderField{Name: f[0], Value: f[1]})
	}
	return c.fr.WriteHeaders(http2.HeadersFrameParam{StreamID: id, BlockFragment: c.hbuf.Bytes(), EndStream: endStream, EndHeaders: true})
}

// WriteData sends one DATA frame on stream id.
func (c *Conn) WriteData(id uint32, endStream bool, p []byte) error {
	c.wmu.Lock()
	defer c.wmu.Unlock()
	return c.fr.WriteData(id, endStream, p)
}

// Batch frames what write writes (any frame, legal or not) and sends it
// all in one write: the way to send frames faster than one system call
// each. Header blocks come from block, in the order they are sent.
func (c *Conn) Batch(write func(fr *http2.Framer, block BlockFunc) error) error {
	c.wmu.Lock()
	defer c.wmu.Unlock()
	var buf bytes.Buffer
	fr := http2.NewFramer(&buf, nil)
	fr.AllowIllegalWrites = true
	if err := write(fr, c.blockLocked); err != nil {
		return err
	}
	_, err := c.tls.Write(buf.Bytes())
	return err
}

// BlockFunc returns the next stream ID and the header block of a GET of
// path on it, with more fields after the pseudo-headers, HPACK-encoded by
// the connection's encoder: blocks must be sent in the order they are
// made.
type BlockFunc func(path string, fields ...[2]string) (uint32, []byte)

func (c *Conn) blockLocked(path string, fields ...[2]string) (uint32, []byte) {
	id := c.next
	c.next += 2
	c.hbuf.Reset()
	head := [][2]string{{":method", "GET"}, {":scheme", "https"}, {":authority", c.addr}, {":path", path}}
	for _, f := range append(head, fields...) {
		c.enc.WriteField(hpack.HeaderField{Name: f[0], Value: f[1]})
	}
	return id, bytes.Clone(c.hbuf.Bytes())
}

// Flow is what Drain saw.
type Flow struct {
	Frames   int           // frames read
	Resets   int           // RST_STREAM frames
	DataSize int64         // DATA payload bytes
	GoAway   http2.ErrCode // the GOAWAY's code, if one came
	GotAway  bool          // a GOAWAY came
}

// Drain reads and counts frames until the connection fails or closes,
// acknowledging SETTINGS and PING and giving no flow-control credit, and
// returns what it saw and the error that ended it. It keeps reading after
// a GOAWAY, as the server may still send frames of streams below its
// last stream ID.
func (c *Conn) Drain() (Flow, error) {
	var fl Flow
	for {
		frame, err := c.fr.ReadFrame()
		if err != nil {
			return fl, err
		}
		fl.Frames++
		if err := c.acknowledge(frame); err != nil {
			return fl, err
		}
		switch f := frame.(type) {
		case *http2.GoAwayFrame:
			fl.GotAway, fl.GoAway = true, f.ErrCode
			c.goAwayAt.CompareAndSwap(0, time.Now().UnixNano())
		case *http2.DataFrame:
			fl.DataSize += int64(len(f.Data()))
		case *http2.RSTStreamFrame:
			fl.Resets++
		}
	}
}

// acknowledge answers frame if it is a SETTINGS or PING that wants an
// acknowledgement.
func (c *Conn) acknowledge(frame http2.Frame) error {
	c.wmu.Lock()
	defer c.wmu.Unlock()
	switch f := frame.(type) {
	case *http2.SettingsFrame:
		if !f.IsAck() {
			err := c.fr.WriteSettingsAck()
			c.ackOnce.Do(func() { close(c.acked) })
			return err
		}
	case *http2.PingFrame:
		if !f.IsAck() {
			return c.fr.WritePing(true, f.Data)
		}
	}
	return nil
}

// SettingsAcked returns a channel closed once Drain has acknowledged the
// server's first SETTINGS: from then on Drain writes nothing unless the
// server sends PING or SETTINGS again (so a header block can be sent in
// pieces without a frame of Drain's in the middle).
func (c *Conn) SettingsAcked() <-chan struct{} { return c.acked }

// GoAwayAt returns when Drain read the server's first GOAWAY, if it
// has.
func (c *Conn) GoAwayAt() (time.Time, bool) {
	n := c.goAwayAt.Load()
	return time.Unix(0, n), n != 0
}

// RST resets stream id.
func (c *Conn) RST(id uint32, code http2.ErrCode) error {
	c.wmu.Lock()
	defer c.wmu.Unlock()
	return c.fr.WriteRSTStream(id, code)
}

// Credit gives n bytes of flow-control credit back, to the connection
// and to stream id.
func (c *Conn) Credit(id uint32, n int) error {
	c.wmu.Lock()
	defer c.wmu.Unlock()
	if err := c.fr.WriteWindowUpdate(0, uint32(n)); err != nil {
		return err
	}
	return c.fr.WriteWindowUpdate(id, uint32(n))
}

// Close closes the connection.
func (c *Conn) Close() { c.tls.Close() }

// Abort closes the TCP connection with a reset, without TLS close_notify.
func (c *Conn) Abort() {
	c.tcp.SetLinger(0)
	c.tcp.Close()
}

// Stream is what the client saw of one response.
type Stream struct {
	File       harness.SiteFile
	Status     string
	RetryAfter string
	N          int64
	Sum        hash.Hash // nil: not checked
	Ended      bool      // END_STREAM received
	Reset      bool      // RST_STREAM received
	Code       http2.ErrCode
	RSTSent    bool
	LastData   time.Time
	ResetAt    time.Time
}

// Complete reports whether the stream ended cleanly with the file's bytes.
func (s *Stream) Complete() bool {
	return s.Status == "200" && s.Ended && !s.Reset && s.N == s.File.Size &&
		s.Sum != nil && bytes.Equal(s.Sum.Sum(nil), s.File.Sum[:])
}

// String describes the stream for failure messages.
func (s *Stream) String() string {
	state := "open"
	switch {
	case s.Reset:
		state = "RST_STREAM " + s.Code.String()
	case s.Ended:
		state = "END_STREAM"
	case s.RSTSent:
		state = "reset by the client"
	}
	return fmt.Sprintf("%s: status %q, %d of %d bytes, %s", s.File.Path, s.Status, s.N, s.File.Size, state)
}

// Pump reads frames into streams until done reports true. It
// acknowledges SETTINGS and PING, fails on GOAWAY, and calls onFrame
// after each HEADERS, DATA or RST_STREAM frame of a stream.
func (c *Conn) Pump(streams map[uint32]*Stream, onFrame func(id uint32, s *Stream) error, done func() bool) error {
	for !done() {
		frame, err := c.fr.ReadFrame()
		if err != nil {
			return err
		}
		if err := c.acknowledge(frame); err != nil {
			return err
		}
		var id uint32
		var st *Stream
		switch f := frame.(type) {
		case *http2.GoAwayFrame:
			return fmt.Errorf("GOAWAY %v %q", f.ErrCode, f.DebugData())
		case *http2.MetaHeadersFrame:
			id = f.StreamID
			if st = streams[id]; st != nil {
				st.Status = f.PseudoValue("status")
				for _, hf := range f.RegularFields() {
					if hf.Name == "retry-after" {
						st.RetryAfter = hf.Value
					}
				}
				st.Ended = st.Ended || f.StreamEnded()
			}
		case *http2.DataFrame:
			id = f.StreamID
			if st = streams[id]; st != nil {
				st.N += int64(len(f.Data()))
				st.LastData = time.Now()
				if st.Sum != nil {
					st.Sum.Write(f.Data())
				}
				st.Ended = st.Ended || f.StreamEnded()
			}
		case *http2.RSTStreamFrame:
			id = f.StreamID
			if st = streams[id]; st != nil {
				st.Reset, st.Code, st.ResetAt = true, f.ErrCode, time.Now()
			}
		}
		if id != 0 && st == nil {
			return fmt.Errorf("frame %T for unknown stream %d", frame, id)
		}
		if st != nil && onFrame != nil {
			if err := onFrame(id, st); err != nil {
				return err
			}
		}
	}
	return nil
}

// GetOnce sends one GET over a fresh HTTP/2 connection, frame by frame,
// giving back the credit of every DATA frame like a client that reads
// everything, and returns the stream as it ended. afterBytes is called
// once, when at least trigger bytes of body have arrived (nil: never).
func GetOnce(t *testing.T, addr, path string, trigger int64, afterBytes func()) *Stream {
	t.Helper()
	c, err := Dial(addr, Options{})
	if err != nil {
		t.Fatal(err)
	}
	defer c.Close()
	c.tls.SetDeadline(time.Now().Add(30 * time.Second))
	id, err := c.Get(path)
	if err != nil {
		t.Fatal(err)
	}
	st := &Stream{File: harness.SiteFile{Path: path, Size: -1}}
	last := int64(0)
	err = c.Pump(map[uint32]*Stream{id: st}, func(id uint32, st *Stream) error {
		if n := st.N - last; n > 0 {
			last = st.N
			if err := c.Credit(id, int(n)); err != nil {
				return err
			}
		}
		if afterBytes != nil && st.N >= trigger {
			afterBytes()
			afterBytes = nil
		}
		return nil
	}, func() bool { return st.Ended || st.Reset })
	if err != nil {
		t.Fatalf("reading frames after %d body bytes: %v", st.N, err)
	}
	return st
}

// SetReadDeadline sets the deadline of the connection's reads.
func (c *Conn) SetReadDeadline(t time.Time) error { return c.tls.SetReadDeadline(t) }
