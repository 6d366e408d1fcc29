package h2

import (
	"bufio"
	"bytes"
	"context"
	"crypto/tls"
	"errors"
	"io"
	"net"
	"net/http"
	"sync"
	"sync/atomic"
	"time"

	"go.uber.org/zap"
	"golang.org/x/net/http2"
	"golang.org/x/net/http2/hpack"

	"github.com/h2file/caddy-h2file/internal/h2/wire"
)

var (
	errServerClosed = errors.New("h2: server closed")
	errClientGone   = errors.New("h2: client disconnected")
	errStreamClosed = errors.New("h2: stream closed")
)

// conn is one HTTP/2 connection. Its serve goroutine reads and handles
// every frame the client sends; frames to the client are appended to a
// batch under mu by whichever goroutine has them (a handler, or the
// serve goroutine), and the batch is written by whichever of them finds
// no write under way (batch.go). There is no serve-loop goroutine
// between a handler and the socket.
type conn struct {
	srv          *Server
	cfg          *Config
	nc           net.Conn
	baseCtx      context.Context
	remoteAddr   string
	tlsState     *tls.ConnectionState
	br           *bufio.Reader
	fr           *http2.Framer
	headerBlocks headerBlockReader // reads fr's header blocks (metaframe.go)
	canon        headerCanon
	flood        floodMeter // between br and fr (flood.go)

	// owned by the serve goroutine
	sawFirstSettings bool
	unackedSettings  int

	mu sync.Mutex
	// guarded by mu
	streams           map[uint32]*stream
	maxClientStreamID uint32
	sendWindow        int64 // the client's connection-level window for our DATA
	sendHigh          int64 // the largest it has been (flood.go)
	sendSmall         int64 // sent in small frames, not given back (flood.go)
	closedUnrefunded  int64 // DATA sent on closed streams the client may still give back (flood.go)
	peerInitialWindow int64
	peerMaxFrameSize  int
	inflow            inflow // the connection-level window we give the client
	henc              *hpack.Encoder
	hbuf              bytes.Buffer
	keys              []string // reused to sort a header's keys
	batch             batch
	inWrite           bool        // a goroutine is writing a batch (mu released)
	writeDeadline     time.Time   // the socket's, set by the writing goroutine (batch.go)
	flushPending      bool        // a deferred flush is due (deferred.go)
	flushListed       bool        // on the flusher's list
	deadlinesWatched  atomic.Bool // on deadlineWatch's list (deadlines.go)
	waitq             []*stream   // handlers in line for the connection's window and room (queue.go)
	first             *stream     // the first in line
	queueSeq          uint64      // counts the streams put in line
	incrementalNext   bool        // an incremental stream is first next, at one urgency
	priorityAware     bool        // the client showed it knows RFC 9218 (priority.go)
	viaIntermediary   bool        // a request came through a proxy
	earlyPriority     struct {    // a PRIORITY_UPDATE for a stream not yet open
		id uint32
		p  priority
	}
	pendingStreams []*stream // streams with bytes buffered ahead (pending.go)
	pendingTotal   int       // their bytes
	roomCond       sync.Cond // handlers waiting for room in the batch
	roomWaiters    int       // how many wait on roomCond (waitRoomLocked)
	dispatching    bool      // in dispatchLocked (queue.go)
	recentResets   recentResets
	closed         bool
	closeErr       error
	goingAway      bool
	goAwayCode     http2.ErrCode
	curHandlers    int
	unstarted      []*stream
	closeTimer     *time.Timer
	idleTimer      *time.Timer // IdleTimeout's (onIdleTimeout)
	idleSince      time.Time   // when the last stream closed, or the connection began
}

func newConn(s *Server, ctx context.Context, nc net.Conn) *conn {
	c := &conn{
		srv:               s,
		cfg:               &s.cfg,
		nc:                nc,
		remoteAddr:        nc.RemoteAddr().String(),
		streams:           make(map[uint32]*stream),
		sendWindow:        wire.DefaultWindow,
		sendHigh:          wire.DefaultWindow,
		peerInitialWindow: wire.DefaultWindow,
		peerMaxFrameSize:  16384,
	}
	c.roomCond.L = &c.mu
	c.baseCtx = context.WithValue(ctx, http.LocalAddrContextKey, nc.LocalAddr())
	if st, ok := nc.(interface{ ConnectionState() tls.ConnectionState }); ok {
		cs := st.ConnectionState()
		c.tlsState = &cs
	}
	c.inflow.init(c.cfg.ConnWindow)
	c.henc = hpack.NewEncoder(&c.hbuf)
	c.br = bufio.NewReaderSize(nc, 16<<10)
	c.flood.init(c.br)
	c.fr = http2.NewFramer(nil, &c.flood)
	c.fr.MaxHeaderListSize = c.cfg.maxHeaderListSize()
	c.headerBlocks.init(c.fr, &c.flood)
	c.fr.SetMaxReadFrameSize(c.cfg.MaxReadFrameSize)
	// the server's SETTINGS are the first frame, before anything a
	// Shutdown may add once the connection is tracked (GOAWAY)
	c.appendSettingsLocked()
	c.unackedSettings++
	if diff := c.cfg.ConnWindow - wire.DefaultWindow; diff > 0 {
		c.batch.appendWindowUpdate(0, uint32(diff))
	}
	return c
}

// serve runs the connection: it sends the server's SETTINGS, reads the
// client preface, then reads and handles frames until the connection
// ends.
func (c *conn) serve() {
	defer c.closeNow(errClientGone)

	c.mu.Lock()
	c.kickLocked() // the SETTINGS newConn batched
	c.mu.Unlock()

	c.nc.SetReadDeadline(time.Now().Add(prefaceTimeout))
	var preface [len(wire.Preface)]byte
	if _, err := io.ReadFull(c.br, preface[:]); err != nil || string(preface[:]) != wire.Preface {
		c.logDebug("reading the client preface", err)
		return
	}
	stats.conns.Add(1)
	if hook := c.srv.onPrefaceRead; hook != nil {
		hook(c)
	}
	if c.cfg.IdleTimeout > 0 {
		c.mu.Lock()
		if !c.closed { // a Close since the preface stopped no timer
			c.idleSince = time.Now()
			c.idleTimer = time.AfterFunc(c.cfg.IdleTimeout, c.onIdleTimeout)
		}
		c.mu.Unlock()
	}
	for {
		if c.flood.tripped != "" {
			c.endFlood()
			return
		}
		f, err := c.headerBlocks.readFrame()
		if errors.Is(err, errFlood) {
			c.endFlood()
			return
		}
		if err != nil {
			if f != nil {
				// a header block that failed opened its stream: a GOAWAY
				// names it, as x/net's does, and after a stream error
				// the frames the client sent on it before it read our
				// RST_STREAM are ignored (RFC 9113 §5.1), not taken for
				// frames on an idle stream, which end the connection
				// (x/net's do)
				c.noteStreamID(f.Header().StreamID)
			}
			if !c.handleReadError(err) {
				return
			}
			continue
		}
		if c.noteFrame(f); c.flood.tripped != "" {
			continue
		}
		if err := c.processFrame(f); err != nil {
			if !c.handleFrameError(f, err) {
				return
			}
		}
	}
}

// discardUntilClosed reads and drops what the client still sends, after
// a GOAWAY with an error, until the connection closes a second later (the
// GOAWAY's read deadline): the GOAWAY is not lost to the reset that
// closing a socket with unread bytes sends.
func (c *conn) discardUntilClosed() { io.Copy(io.Discard, c.br) }

// handleReadError handles an error from the Framer; false ends the
// connection.
func (c *conn) handleReadError(err error) bool {
	if errors.Is(err, http2.ErrFrameTooLarge) {
		// the frame's payload is unread, and with it where the next
		// frame starts: nothing more is read as frames (x/net's reader
		// stops at this error)
		c.flood.stop()
		c.goAway(http2.ErrCodeFrameSize)
		c.discardUntilClosed()
		return false
	}
	if c.handleProtocolError(err) {
		return true
	}
	c.mu.Lock()
	closing := c.goingAway && c.goAwayCode != http2.ErrCodeNo
	c.mu.Unlock()
	if !closing && !isClientGone(err) {
		c.logDebug("reading a frame", err)
	}
	return false
}

// handleFrameError handles what processing f returned; false ends the
// connection.
func (c *conn) handleFrameError(f http2.Frame, err error) bool {
	var ce http2.ConnectionError
	if errors.As(err, &ce) {
		c.noteStreamID(f.Header().StreamID)
	}
	if c.handleProtocolError(err) {
		return true
	}
	c.logDebug("closing the connection", err)
	return false
}

// handleProtocolError answers a stream error with RST_STREAM (counted by
// the flood meter) and a connection error with GOAWAY, and reports
// whether err was either.
func (c *conn) handleProtocolError(err error) bool {
	var se http2.StreamError
	if errors.As(err, &se) {
		c.flood.add("stream error")
		c.resetStreamID(se.StreamID, se.Code, se)
		return true
	}
	var ce http2.ConnectionError
	if errors.As(err, &ce) {
		c.flood.stop()
		c.logDebug("connection error", err)
		c.goAway(http2.ErrCode(ce))
		return true
	}
	return false
}

// noteStreamID raises the last client stream ID (the one a GOAWAY names)
// to id, for a frame that ended the connection.
func (c *conn) noteStreamID(id uint32) {
	c.mu.Lock()
	defer c.mu.Unlock()
	if id > c.maxClientStreamID && id%2 == 1 {
		c.maxClientStreamID = id
	}
}

// idleLocked reports whether stream id (not 0) was never opened: even
// IDs are the server's, which it never opens (no push), and odd ones past
// the client's last (RFC 9113 §5.1).
func (c *conn) idleLocked(id uint32) bool {
	return id%2 == 0 || id > c.maxClientStreamID
}

// processFrame handles one frame from the client.
func (c *conn) processFrame(f http2.Frame) error {
	if !c.sawFirstSettings {
		if _, ok := f.(*http2.SettingsFrame); !ok {
			return http2.ConnectionError(http2.ErrCodeProtocol)
		}
		c.sawFirstSettings = true
		c.nc.SetReadDeadline(time.Time{})
	}
	c.mu.Lock()
	discard := c.goingAway && (c.goAwayCode != http2.ErrCodeNo || f.Header().StreamID > c.maxClientStreamID)
	if discard {
		// RFC 9113 §6.8: frames of streams past the GOAWAY (or all, after
		// an error) are ignored, but DATA still counts against the
		// connection window, which is given back.
		if df, ok := f.(*http2.DataFrame); ok && !c.discardDataLocked(df.Length) {
			c.mu.Unlock()
			return http2.StreamError{StreamID: df.StreamID, Code: http2.ErrCodeFlowControl}
		}
		c.mu.Unlock()
		return nil
	}
	c.mu.Unlock()

	switch f := f.(type) {
	case *http2.SettingsFrame:
		return c.processSettings(f)
	case *http2.MetaHeadersFrame:
		return c.processHeaders(f)
	case *http2.WindowUpdateFrame:
		return c.processWindowUpdate(f)
	case *http2.PingFrame:
		return c.processPing(f)
	case *http2.DataFrame:
		return c.processData(f)
	case *http2.RSTStreamFrame:
		return c.processResetStream(f)
	case *http2.PriorityFrame:
		if f.StreamID == f.StreamDep {
			return http2.StreamError{StreamID: f.StreamID, Code: http2.ErrCodeProtocol}
		}
		return nil
	case *http2.PriorityUpdateFrame:
		return c.processPriorityUpdate(f)
	case *http2.GoAwayFrame:
		c.startGracefulShutdown()
		return nil
	case *http2.PushPromiseFrame:
		return http2.ConnectionError(http2.ErrCodeProtocol)
	default:
		return nil
	}
}

// goAway sends GOAWAY with code; an error code ends the connection after
// goAwayTimeout (meanwhile frames are read and ignored), NO_ERROR starts
// a graceful shutdown.
func (c *conn) goAway(code http2.ErrCode) {
	c.mu.Lock()
	defer c.mu.Unlock()
	c.goAwayLocked(code)
}

func (c *conn) goAwayLocked(code http2.ErrCode) {
	if c.closed || (c.goingAway && c.goAwayCode != http2.ErrCodeNo) {
		return
	}
	if c.goingAway && code == http2.ErrCodeNo {
		return
	}
	c.goingAway = true
	c.goAwayCode = code
	c.batch.ensure()
	c.batch.buf = wire.AppendGoAway(c.batch.buf, c.maxClientStreamID, wire.ErrCode(code), "")
	if code != http2.ErrCodeNo {
		c.batch.seal()
	}
	c.kickLocked()
	if code != http2.ErrCodeNo {
		c.nc.SetReadDeadline(time.Now().Add(goAwayTimeout))
		c.closeAfterLocked(goAwayTimeout)
		return
	}
	c.closeIfDrainedLocked()
}

// closeIfDrainedLocked arms the close of a connection going away
// gracefully once it has no stream left and everything batched for it is
// written (the GOAWAY, the last response's end): x/net arms it when its
// writer is idle with no stream open. Armed when the last END_STREAM only
// entered the batch, it would cut what a slow client had still to read of
// the last response. writeBatchesLocked calls it after its last write.
func (c *conn) closeIfDrainedLocked() {
	if c.goingAway && c.goAwayCode == http2.ErrCodeNo && len(c.streams) == 0 && !c.inWrite && len(c.batch.buf) == 0 && !c.closed {
		c.closeAfterLocked(goAwayTimeout)
	}
}

// startGracefulShutdown sends GOAWAY (NO_ERROR): no new stream is
// served, those open finish, then the connection closes.
func (c *conn) startGracefulShutdown() { c.goAway(http2.ErrCodeNo) }

func (c *conn) closeAfterLocked(d time.Duration) {
	if c.closeTimer == nil {
		c.closeTimer = time.AfterFunc(d, func() { c.closeNow(errServerClosed) })
	}
}

// onIdleTimeout ends the connection (GOAWAY) once it has had no open
// stream for IdleTimeout. The timer is not stopped when a stream opens
// nor reset when the last closes (a timer touched per request made the
// runtime rescan the process's timers, see workers.go): it fires, sees
// how long the connection has been idle, and is armed again for the
// rest, at most once per IdleTimeout.
func (c *conn) onIdleTimeout() {
	c.mu.Lock()
	defer c.mu.Unlock()
	if c.closed {
		return
	}
	next := c.cfg.IdleTimeout
	if len(c.streams) == 0 {
		idle := time.Since(c.idleSince)
		if idle >= c.cfg.IdleTimeout {
			c.goAwayLocked(http2.ErrCodeNo)
			return
		}
		next -= idle
	}
	c.idleTimer.Reset(next)
}

// closeNow closes the connection: every stream fails with err, and the
// serve goroutine's next read fails.
func (c *conn) closeNow(err error) {
	c.mu.Lock()
	if c.closed {
		c.mu.Unlock()
		return
	}
	c.closed = true
	c.closeErr = err
	for _, st := range c.streams {
		c.closeStreamLocked(st, errClientGone)
	}
	for _, st := range c.unstarted {
		st.cancel()
	}
	c.unstarted = nil
	if c.idleTimer != nil {
		c.idleTimer.Stop()
	}
	if c.closeTimer != nil {
		c.closeTimer.Stop()
	}
	c.waitq, c.first = nil, nil
	c.roomCond.Broadcast()
	c.mu.Unlock()
	c.nc.Close()
}

func (c *conn) appendSettingsLocked() {
	settings := []http2.Setting{
		{ID: http2.SettingMaxFrameSize, Val: c.cfg.MaxReadFrameSize},
		{ID: http2.SettingMaxConcurrentStreams, Val: c.cfg.MaxConcurrentStreams},
		{ID: http2.SettingMaxHeaderListSize, Val: c.cfg.maxHeaderListSize()},
		{ID: http2.SettingHeaderTableSize, Val: 4096},
		{ID: http2.SettingInitialWindowSize, Val: uint32(c.cfg.StreamWindow)},
		{ID: http2.SettingNoRFC7540Priorities, Val: 1},
	}
	c.batch.appendFrameHeader(6*len(settings), wire.FrameSettings, 0, 0)
	for _, s := range settings {
		c.batch.buf = append(c.batch.buf, byte(s.ID>>8), byte(s.ID), byte(s.Val>>24), byte(s.Val>>16), byte(s.Val>>8), byte(s.Val))
	}
}

func (c *conn) logDebug(what string, err error) {
	if ce := c.cfg.Logger.Check(zap.DebugLevel, "http2 engine: "+what); ce != nil {
		ce.Write(zap.String("remote", c.remoteAddr), zap.Error(err))
	}
}

func isClientGone(err error) bool {
	return errors.Is(err, io.EOF) || errors.Is(err, io.ErrUnexpectedEOF) || errors.Is(err, net.ErrClosed)
}
