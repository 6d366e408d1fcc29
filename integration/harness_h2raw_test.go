package integration

// A raw HTTP/2 client connection, driven frame by frame, for clients that
// misbehave: reset, stall, stop reading, vanish (see harness_test.go).

import (
	"bytes"
	"crypto/tls"
	"fmt"
	"hash"
	"io"
	"net"
	"sync"
	"testing"
	"time"

	"golang.org/x/net/http2"
	"golang.org/x/net/http2/hpack"
)

// h2Conn is an HTTP/2 client connection over TLS, frame by frame.
type h2Conn struct {
	addr string
	tcp  *net.TCPConn
	tls  *tls.Conn
	fr   *http2.Framer

	wmu  sync.Mutex // guards the writing side of fr, enc and hbuf
	enc  *hpack.Encoder
	hbuf bytes.Buffer
	next uint32 // next stream ID
}

// h2DialOpts are the flow-control settings of a client connection.
type h2DialOpts struct {
	streamWindow uint32                    // SETTINGS_INITIAL_WINDOW_SIZE; 0: the default, 65,535
	connWindow   uint32                    // connection-level credit granted at once, beyond the default
	reader       func(io.Reader) io.Reader // wraps the reading side (to throttle it)
}

// dialH2 connects to addr with ALPN h2 (any certificate), sends the
// preface and SETTINGS, and grants o's credit.
func dialH2(addr string, o h2DialOpts) (*h2Conn, error) {
	raw, err := net.DialTimeout("tcp", addr, 10*time.Second)
	if err != nil {
		return nil, err
	}
	cfg := insecureTLS()
	cfg.NextProtos = []string{"h2"}
	tc := tls.Client(raw, cfg)
	tc.SetDeadline(time.Now().Add(60 * time.Second))
	if err := tc.Handshake(); err != nil {
		raw.Close()
		return nil, fmt.Errorf("TLS handshake: %w", err)
	}
	if p := tc.ConnectionState().NegotiatedProtocol; p != "h2" {
		tc.Close()
		return nil, fmt.Errorf("ALPN negotiated %q, want h2", p)
	}
	c := &h2Conn{addr: addr, tcp: raw.(*net.TCPConn), tls: tc, next: 1}
	var r io.Reader = tc
	if o.reader != nil {
		r = o.reader(tc)
	}
	c.fr = http2.NewFramer(tc, r)
	c.fr.ReadMetaHeaders = hpack.NewDecoder(4096, nil)
	c.enc = hpack.NewEncoder(&c.hbuf)
	if _, err := io.WriteString(tc, http2.ClientPreface); err != nil {
		tc.Close()
		return nil, err
	}
	var settings []http2.Setting
	if o.streamWindow > 0 {
		settings = append(settings, http2.Setting{ID: http2.SettingInitialWindowSize, Val: o.streamWindow})
	}
	err = c.fr.WriteSettings(settings...)
	if err == nil && o.connWindow > 0 {
		err = c.fr.WriteWindowUpdate(0, o.connWindow)
	}
	if err != nil {
		tc.Close()
		return nil, err
	}
	return c, nil
}

// dialH2Streams is dialH2, then getEach; the connection is closed if
// that fails.
func dialH2Streams(addr string, o h2DialOpts, files []siteFile, first, n int) (*h2Conn, map[uint32]*h2Stream, error) {
	c, err := dialH2(addr, o)
	if err != nil {
		return nil, nil, err
	}
	streams, err := c.getEach(files, first, n)
	if err != nil {
		c.close()
		return nil, nil, err
	}
	return c, streams, nil
}

// getEach opens n streams, each a GET of the next of files (cycling from
// index first), and returns them by stream ID.
func (c *h2Conn) getEach(files []siteFile, first, n int) (map[uint32]*h2Stream, error) {
	streams := make(map[uint32]*h2Stream, n)
	for i := range n {
		f := files[(first+i)%len(files)]
		id, err := c.get(f.path)
		if err != nil {
			return nil, err
		}
		streams[id] = &h2Stream{file: f}
	}
	return streams, nil
}

// get opens a stream with a GET of path and returns its ID.
func (c *h2Conn) get(path string) (uint32, error) {
	c.wmu.Lock()
	defer c.wmu.Unlock()
	id := c.next
	c.next += 2
	c.hbuf.Reset()
	for _, f := range [][2]string{{":method", "GET"}, {":scheme", "https"}, {":authority", c.addr}, {":path", path}} {
		c.enc.WriteField(hpack.HeaderField{Name: f[0], Value: f[1]})
	}
	err := c.fr.WriteHeaders(http2.HeadersFrameParam{StreamID: id, BlockFragment: c.hbuf.Bytes(), EndStream: true, EndHeaders: true})
	return id, err
}

// rst resets stream id.
func (c *h2Conn) rst(id uint32, code http2.ErrCode) error {
	c.wmu.Lock()
	defer c.wmu.Unlock()
	return c.fr.WriteRSTStream(id, code)
}

// credit gives n bytes of flow-control credit back, to the connection
// and to stream id.
func (c *h2Conn) credit(id uint32, n int) error {
	c.wmu.Lock()
	defer c.wmu.Unlock()
	if err := c.fr.WriteWindowUpdate(0, uint32(n)); err != nil {
		return err
	}
	return c.fr.WriteWindowUpdate(id, uint32(n))
}

func (c *h2Conn) close() { c.tls.Close() }

// abort closes the TCP connection with a reset, without TLS close_notify.
func (c *h2Conn) abort() {
	c.tcp.SetLinger(0)
	c.tcp.Close()
}

// h2Stream is what the client saw of one response.
type h2Stream struct {
	file       siteFile
	status     string
	retryAfter string
	n          int64
	sum        hash.Hash // nil: not checked
	ended      bool      // END_STREAM received
	reset      bool      // RST_STREAM received
	code       http2.ErrCode
	rstSent    bool
	lastData   time.Time
	resetAt    time.Time
}

// complete reports whether the stream ended cleanly with the file's bytes.
func (s *h2Stream) complete() bool {
	return s.status == "200" && s.ended && !s.reset && s.n == s.file.size &&
		s.sum != nil && bytes.Equal(s.sum.Sum(nil), s.file.sum[:])
}

func (s *h2Stream) String() string {
	state := "open"
	switch {
	case s.reset:
		state = "RST_STREAM " + s.code.String()
	case s.ended:
		state = "END_STREAM"
	case s.rstSent:
		state = "reset by the client"
	}
	return fmt.Sprintf("%s: status %q, %d of %d bytes, %s", s.file.path, s.status, s.n, s.file.size, state)
}

// pump reads frames into streams until done reports true. It
// acknowledges SETTINGS and PING, fails on GOAWAY, and calls onFrame
// after each HEADERS, DATA or RST_STREAM frame of a stream.
func (c *h2Conn) pump(streams map[uint32]*h2Stream, onFrame func(id uint32, s *h2Stream) error, done func() bool) error {
	for !done() {
		frame, err := c.fr.ReadFrame()
		if err != nil {
			return err
		}
		var id uint32
		var st *h2Stream
		switch f := frame.(type) {
		case *http2.SettingsFrame:
			if !f.IsAck() {
				c.wmu.Lock()
				err = c.fr.WriteSettingsAck()
				c.wmu.Unlock()
			}
		case *http2.PingFrame:
			if !f.IsAck() {
				c.wmu.Lock()
				err = c.fr.WritePing(true, f.Data)
				c.wmu.Unlock()
			}
		case *http2.GoAwayFrame:
			return fmt.Errorf("GOAWAY %v %q", f.ErrCode, f.DebugData())
		case *http2.MetaHeadersFrame:
			id = f.StreamID
			if st = streams[id]; st != nil {
				st.status = f.PseudoValue("status")
				for _, hf := range f.RegularFields() {
					if hf.Name == "retry-after" {
						st.retryAfter = hf.Value
					}
				}
				st.ended = st.ended || f.StreamEnded()
			}
		case *http2.DataFrame:
			id = f.StreamID
			if st = streams[id]; st != nil {
				st.n += int64(len(f.Data()))
				st.lastData = time.Now()
				if st.sum != nil {
					st.sum.Write(f.Data())
				}
				st.ended = st.ended || f.StreamEnded()
			}
		case *http2.RSTStreamFrame:
			id = f.StreamID
			if st = streams[id]; st != nil {
				st.reset, st.code, st.resetAt = true, f.ErrCode, time.Now()
			}
		}
		if err != nil {
			return err
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

// rawH2Get sends one GET over a fresh HTTP/2 connection, frame by frame,
// giving back the credit of every DATA frame like a client that reads
// everything, and returns the stream as it ended. afterBytes is called
// once, when at least trigger bytes of body have arrived (nil: never).
func rawH2Get(t *testing.T, addr, path string, trigger int64, afterBytes func()) *h2Stream {
	t.Helper()
	c, err := dialH2(addr, h2DialOpts{})
	if err != nil {
		t.Fatal(err)
	}
	defer c.close()
	c.tls.SetDeadline(time.Now().Add(30 * time.Second))
	id, err := c.get(path)
	if err != nil {
		t.Fatal(err)
	}
	st := &h2Stream{file: siteFile{path: path, size: -1}}
	last := int64(0)
	err = c.pump(map[uint32]*h2Stream{id: st}, func(id uint32, st *h2Stream) error {
		if n := st.n - last; n > 0 {
			last = st.n
			if err := c.credit(id, int(n)); err != nil {
				return err
			}
		}
		if afterBytes != nil && st.n >= trigger {
			afterBytes()
			afterBytes = nil
		}
		return nil
	}, func() bool { return st.ended || st.reset })
	if err != nil {
		t.Fatalf("reading frames after %d body bytes: %v", st.n, err)
	}
	return st
}
