package coalesce

import (
	"sync/atomic"

	"github.com/h2file/caddy-h2file/internal/h2/wire"
)

// Peer is what a coalescing connection above TLS learns, from the
// first frames an HTTP/2 client sends after its preface, of how many bytes
// the server may send before it must wait for a WINDOW_UPDATE: the initial
// stream window (SETTINGS_INITIAL_WINDOW_SIZE) and the connection window
// (65,535 plus the WINDOW_UPDATEs for stream 0 before the first request).
// Body writes grow only where both are large (see growLimit): measured
// with one stream, writes of 262000 bytes were 12% slower than 16 KB ones
// with 64 KB client windows and 9% slower with 256 KB windows, and 10%
// faster with 1 MB windows.
//
// Only the client's opening frames are looked at; later SETTINGS and
// WINDOW_UPDATEs are not (a client that shrinks its windows later still
// gets correct responses, only larger writes).
type Peer struct {
	known  atomic.Bool  // set once stream and conn hold the client's values
	stream atomic.Int64 // initial stream window
	conn   atomic.Int64 // connection window before the first request

	// sending counts the response bodies the connection's streams are
	// sending with grown writes, which share their budget (see StartBody)
	sending atomic.Int32
}

// NewPeer returns the windows of a client whose opening frames announced
// an initial stream window of stream bytes and a connection window of conn
// bytes.
func NewPeer(stream, conn int64) *Peer {
	p := new(Peer)
	p.stream.Store(stream)
	p.conn.Store(conn)
	p.known.Store(true)
	return p
}

// Sending returns how many bodies StartBody counts now.
func (w *Peer) Sending() int32 { return w.sending.Load() }

// StartBody counts one more response body being sent with grown writes on
// the connection, and returns how many are, this one included; EndBody
// undoes it. The body writer shares its largest write among them.
func (w *Peer) StartBody() int32 { return w.sending.Add(1) }

// EndBody counts a body that StartBody counted as sent.
func (w *Peer) EndBody() { w.sending.Add(-1) }

// SmallestWindow returns the smaller of the two windows, and false if the
// client's opening frames were not seen (nil: not an HTTP/2 connection
// above TLS; or they did not fit peerScanMax).
func (w *Peer) SmallestWindow() (int64, bool) {
	if w == nil || !w.known.Load() {
		return 0, false
	}
	return min(w.stream.Load(), w.conn.Load()), true
}

// peerScanMax is how many bytes after the preface are looked at for
// the client's opening SETTINGS and WINDOW_UPDATE frames.
const peerScanMax = 512

// peerScanner reads the client's opening frames from the bytes the
// connection hands on, as they pass.
type peerScanner struct {
	buf     [peerScanMax]byte
	n       int
	settled bool // the scan is over
}

// feed looks at p, the next bytes the client sent, and reports whether the
// scan is over (then w is known, or will never be).
func (s *peerScanner) feed(w *Peer, p []byte) bool {
	if s.settled {
		return true
	}
	s.n += copy(s.buf[s.n:], p)
	stream, conn := int64(wire.DefaultWindow), int64(wire.DefaultWindow)
	sawSettings := false
	for off := 0; s.n-off >= wire.FrameHeaderLen; {
		h := wire.ParseFrameHeader(s.buf[off:])
		settings := h.Type == wire.FrameSettings && h.StreamID == 0
		windowUpdate := h.Type == wire.FrameWindowUpdate && h.StreamID == 0
		if !settings && !windowUpdate && h.Type != wire.FramePriority { // PRIORITY says nothing of windows
			// the first request (or anything else): the opening is over
			if sawSettings {
				w.stream.Store(stream)
				w.conn.Store(conn)
				w.known.Store(true)
			}
			s.settled = true
			return true
		}
		end := off + wire.FrameHeaderLen + int(h.Length)
		if end > s.n {
			break // not all here yet
		}
		payload := s.buf[off+wire.FrameHeaderLen : end]
		switch {
		case settings && h.Flags&wire.FlagAck == 0 && len(payload)%6 == 0:
			sawSettings = true
			if v, ok := wire.Setting(payload, wire.SettingInitialWindowSize); ok {
				stream = int64(v)
			}
		case windowUpdate:
			if inc, ok := wire.WindowIncrement(payload); ok {
				conn += int64(inc)
			}
		}
		off = end
	}
	if s.n == len(s.buf) {
		s.settled = true // too much opening: unknown
	}
	return s.settled
}
