package h2

import (
	"errors"
	"io"
	"sync/atomic"
	"time"

	"golang.org/x/net/http2"
)

// The flood defence: a connection that sends too many frames that give
// the server work and the client nothing gets GOAWAY (ENHANCE_YOUR_CALM)
// and is closed, whatever their kind (CVE-2019-9512 ping, -9514 reset,
// -9515 settings and -9518 empty-frame floods, CVE-2019-9513 priority
// churn, CVE-2024-27316 CONTINUATION floods with empty fragments,
// CVE-2019-9511 data dribble through tiny WINDOW_UPDATEs, CVE-2023-44487
// rapid reset and CVE-2025-8671 server-provoked resets). Frames are
// counted, not bytes, and not what happens to be queued: the same frames,
// with no response between them, trip it at the same frame, however fast
// the server is.
//
// Useful work earns credit: each response the server sends earns
// floodResponseCredit frames, and the count drains by one a second. A
// WINDOW_UPDATE that gives back what the client received is not counted
// (noteWindowUpdate). A connection is cut when its count passes
// floodLimit; credit and time are taken only then, time never below
// zero, and a connection holds at most floodMaxCredit.

const (
	// floodLimit is how many frames of no use a connection may send
	// beyond the credit it earned. A browser sends a few at the start (its
	// SETTINGS, a WINDOW_UPDATE, RFC 7540 PRIORITY frames) and a few per
	// request (PRIORITY_UPDATE, RST_STREAM when it cancels one).
	floodLimit = 1000
	// floodResponseCredit is the credit a response earns.
	floodResponseCredit = 4
	// floodSmallIncrement is the WINDOW_UPDATE increment under which it
	// counts. Clients give back what they read in steps of 4 KiB (Go) or
	// half their window (browsers, curl).
	floodSmallIncrement = 1024
	// floodSmallWindow is the window from which small WINDOW_UPDATEs that
	// give back small frames are not counted: a client that keeps its
	// window below it asks for small frames.
	floodSmallWindow = 4 * floodSmallIncrement
	// floodMaxCredit bounds the credit a connection holds.
	floodMaxCredit = 64 * floodLimit
	// floodSmallFragment is the size under which a header block fragment
	// that does not end the block counts: clients cut header blocks at
	// their frame size.
	floodSmallFragment = 1024
)

// errFlood ends the reading of a connection found flooding.
var errFlood = errors.New("h2: too many frames that do no work")

// floodMeter counts a connection's frames of no use. It sits between the
// connection's reader and the Framer, where it sees every frame's header
// (the CONTINUATION frames of a header block too, which the Framer
// merges before the connection sees them), and is told of the rest by
// the connection's serve goroutine, which owns it; credit comes from any
// goroutine.
type floodMeter struct {
	r       io.Reader
	hdr     [9]byte
	hdrN    int    // bytes of hdr read
	left    uint32 // payload bytes of the current frame not read yet
	count   int
	decayed time.Time // when the count last drained by the time passed
	tripped string    // what the frame that tripped it was; "" until then
	off     bool      // the connection is ending for an error: nothing is counted

	credit atomic.Int64
}

func (m *floodMeter) init(r io.Reader) {
	m.r = r
	m.decayed = time.Now()
}

// Read reads from the connection, noting the frame headers that pass;
// once the meter has tripped it fails with errFlood.
func (m *floodMeter) Read(p []byte) (int, error) {
	if m.tripped != "" {
		return 0, errFlood
	}
	n, err := m.r.Read(p)
	if !m.off {
		m.scan(p[:n])
	}
	return n, err
}

// scan follows the frames in p, the next bytes read.
func (m *floodMeter) scan(p []byte) {
	for len(p) > 0 {
		if m.left > 0 {
			k := min(uint32(len(p)), m.left)
			m.left -= k
			p = p[k:]
			continue
		}
		k := copy(m.hdr[m.hdrN:], p)
		m.hdrN += k
		p = p[k:]
		if m.hdrN < len(m.hdr) {
			return
		}
		m.hdrN = 0
		m.left = uint32(m.hdr[0])<<16 | uint32(m.hdr[1])<<8 | uint32(m.hdr[2])
		typ, flags := http2.FrameType(m.hdr[3]), http2.Flags(m.hdr[4])
		if (typ == http2.FrameHeaders || typ == http2.FrameContinuation) &&
			!flags.Has(http2.FlagHeadersEndHeaders) && m.left < floodSmallFragment {
			m.add("small header block fragment")
		}
	}
}

// stop stops the counting, once the connection is ending for an error
// (GOAWAY sent): the Framer may then have read a frame's header and not
// its payload, and the meter no longer knows where frames start.
func (m *floodMeter) stop() { m.off = true }

// add counts one frame of no use, of kind what. Past floodLimit, the
// time passed drains the count (down to zero), then the credit earned
// meanwhile is taken (what is left of it is kept, as a count below zero,
// at most floodMaxCredit).
func (m *floodMeter) add(what string) {
	m.count++
	if m.count <= floodLimit || m.tripped != "" || m.off {
		return
	}
	now := time.Now()
	// time drains what was counted, and is not saved up; credit is
	m.count = max(m.count-int(now.Sub(m.decayed)/time.Second), 0)
	m.decayed = now
	m.count = max(m.count-int(m.credit.Swap(0)), -floodMaxCredit)
	if m.count > floodLimit {
		m.tripped = what
	}
}

// earn adds n frames of credit.
func (m *floodMeter) earn(n int64) {
	if m.credit.Load() < floodMaxCredit {
		m.credit.Add(n)
	}
}

// noteFrame counts f if it is of no use: a frame that asks for work
// (an answer, a change of state) and brings no request, no body and no
// window for a response.
func (c *conn) noteFrame(f http2.Frame) {
	switch f := f.(type) {
	case *http2.DataFrame:
		if len(f.Data()) == 0 && !f.StreamEnded() {
			c.flood.add("empty DATA")
		}
	case *http2.SettingsFrame:
		c.flood.add("SETTINGS")
	case *http2.PingFrame:
		c.flood.add("PING")
	case *http2.PriorityFrame:
		c.flood.add("PRIORITY")
	case *http2.PriorityUpdateFrame:
		c.flood.add("PRIORITY_UPDATE")
	case *http2.RSTStreamFrame:
		c.flood.add("RST_STREAM")
	case *http2.GoAwayFrame:
		c.flood.add("GOAWAY")
	case *http2.UnknownFrame:
		c.flood.add("unknown frame type")
	}
}

// noteWindowUpdate counts a WINDOW_UPDATE of inc for a window (the
// connection's or a stream's) that is now window, was at most high, and
// had small of the server's DATA sent in frames under
// floodSmallIncrement not given back yet: one that raises a window with
// nothing to give back, and one that gives less than
// floodSmallIncrement back, unless it gives back those small frames of
// a window of floodSmallWindow or more. A client dribbling its window a
// byte at a time (CVE-2019-9511) is counted for every small frame it
// makes the server cut; one that gives back each frame as it reads it
// costs nothing, however small the frames its window has come to be
// sent in (two streams sharing a connection window of 64 KB cut it into
// pieces that cycle as small frames, for x/net's server too).
func (c *conn) noteWindowUpdate(window int64, high, small *int64, inc uint32) {
	n := int64(inc)
	refund := n <= *small && *high >= floodSmallWindow
	if (n < floodSmallIncrement && !refund) || window >= *high {
		c.flood.add("WINDOW_UPDATE")
	}
	if n <= *small {
		*small -= n
	}
	*high = max(*high, window+n)
	*small = min(*small, *high-(window+n)) // no more than is still out
}

// noteDataSent notes k bytes of DATA sent in one frame on st, for
// noteWindowUpdate.
func (c *conn) noteDataSent(st *stream, k int) {
	if k < floodSmallIncrement {
		st.sendSmall += int64(k)
		c.sendSmall += int64(k)
	}
}

// noteClosedWindowUpdate counts a WINDOW_UPDATE of inc for a closed
// stream unless it gives back what closed streams were sent and the
// client had not given back yet (closedUnrefunded): a client that reads
// a response after its end refunds it then.
func (c *conn) noteClosedWindowUpdate(inc uint32) {
	if int64(inc) >= floodSmallIncrement && int64(inc) <= c.closedUnrefunded {
		c.closedUnrefunded -= int64(inc)
		return
	}
	c.flood.add("WINDOW_UPDATE")
}

// endFlood ends a connection whose meter tripped: GOAWAY
// (ENHANCE_YOUR_CALM), then discardUntilClosed.
func (c *conn) endFlood() {
	stats.floods.Add(1)
	c.logDebug("flood of frames that do no work: "+c.flood.tripped, errFlood)
	c.goAway(http2.ErrCodeEnhanceYourCalm)
	c.discardUntilClosed()
}
