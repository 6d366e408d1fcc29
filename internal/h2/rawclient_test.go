package h2

import (
	"bytes"
	"crypto/tls"
	"errors"
	"fmt"
	"io"
	"net"
	"slices"
	"sync"
	"syscall"
	"time"

	"github.com/h2file/caddy-h2file/internal/harness/h2client"
	"golang.org/x/net/http2"
	"golang.org/x/net/http2/hpack"
)

// This file is the client side of the raw-frame differential tests
// (rawdiff_test.go): a connection that writes whatever frames a script
// asks for, legal or not, and a reader that sums up what the server
// answers in a form that two servers can be compared by.

const (
	// rawQuiet is how long a connection must have been silent before a
	// script's run ends (when the server neither closed it nor sent
	// GOAWAY).
	rawQuiet = 300 * time.Millisecond
	// rawWait bounds each wait of a script, and the wait for the streams
	// it opened to end.
	rawWait = 5 * time.Second
	// rawCloseWait bounds the wait for the server to close the connection
	// after its GOAWAY (both servers close one second after it).
	rawCloseWait = 3 * time.Second
	// rawFrag is the size of the header block fragments a script sends.
	rawFrag = 16384
)

// rawOpen is how a script's connection starts: by default the preface,
// a SETTINGS with a large stream window, a large connection window, and
// the ACK of the server's SETTINGS once it has come.
type rawOpen struct {
	badPreface bool            // a wrong preface, then nothing
	noSettings bool            // no SETTINGS after the preface (nor window)
	settings   []http2.Setting // the client's SETTINGS; nil: rawDefaultSettings
	noAck      bool            // never ACK the server's SETTINGS
	decoderMax *uint32         // the HPACK table size the client's decoder allows
	noWindow   bool            // no connection window added (else 1 GiB)
}

var rawDefaultSettings = []http2.Setting{{ID: http2.SettingInitialWindowSize, Val: 4 << 20}}

// rawConn is one client connection of a script.
type rawConn struct {
	tc *tls.Conn

	// the writing side, owned by the script's goroutine: frames are
	// framed into wbuf and written together by flush
	wbuf   bytes.Buffer
	fr     *http2.Framer
	hbuf   bytes.Buffer
	henc   *hpack.Encoder
	pingN  uint64
	opened map[uint32]bool // streams the client sent HEADERS on
	maxID  uint32          // the highest of them
	reset  map[uint32]bool // streams the client reset

	mu sync.Mutex
	// guarded by mu
	sum      *rawSummary
	lastRead time.Time
	gone     bool // the connection closed (or the client's reader failed)
	goAway   bool // GOAWAY received
	goAwayAt time.Time
	goAwayNo bool // the last GOAWAY was NO_ERROR
	stopped  bool // the run is over: later events are not recorded
	maxRead  uint32
	dec      *hpack.Decoder

	// the client's receive windows, loosely: the server must send no
	// more DATA than the largest windows the client ever gave
	initialMax int64            // the largest SETTINGS_INITIAL_WINDOW_SIZE sent
	connGrant  int64            // 65,535 and every WINDOW_UPDATE on stream 0
	grant      map[uint32]int64 // WINDOW_UPDATE per stream
	connGot    int64            // DATA received (with padding)
	got        map[uint32]int64
}

// rawDial connects to addr, starts the reader and opens the connection
// as o says.
func rawDial(addr string, o rawOpen) (*rawConn, error) {
	tc, _, err := h2client.DialTLS(addr)
	if err != nil {
		return nil, err
	}
	c := &rawConn{
		tc:         tc,
		opened:     make(map[uint32]bool),
		reset:      make(map[uint32]bool),
		sum:        newRawSummary(),
		lastRead:   time.Now(),
		maxRead:    16384,
		initialMax: 65535,
		connGrant:  65535,
		grant:      make(map[uint32]int64),
		got:        make(map[uint32]int64),
	}
	c.fr = http2.NewFramer(&c.wbuf, nil)
	c.fr.AllowIllegalWrites = true
	c.henc = hpack.NewEncoder(&c.hbuf)
	c.dec = hpack.NewDecoder(4096, nil)
	if o.decoderMax != nil {
		c.dec.SetAllowedMaxDynamicTableSize(*o.decoderMax)
	}
	settings := o.settings
	if settings == nil {
		settings = rawDefaultSettings
	}
	go c.read()

	if o.badPreface {
		c.tc.Write([]byte("PRI * HTTP/2.0\r\n\r\nXX\r\n\r\n"))
		return c, nil
	}
	c.wbuf.WriteString(http2.ClientPreface)
	if !o.noSettings {
		c.settings(settings...)
		if !o.noWindow {
			c.windowUpdate(0, 1<<30)
		}
	}
	c.flush()
	if o.noSettings {
		return c, nil
	}
	if !o.noAck {
		c.waitFor("the server's SETTINGS", func() bool { return c.sum.settings != "" })
		c.settingsAck()
	}
	// x/net queues its connection WINDOW_UPDATE behind the write of its
	// SETTINGS, and sends nothing queued once it has sent a GOAWAY for an
	// error: a script that starts with an error would make the update's
	// arrival a matter of timing. The PING's ACK comes after it.
	c.sync()
	return c, nil
}

// read reads the server's frames and sums them up until the connection
// ends or the run is over.
func (c *rawConn) read() {
	fr := http2.NewFramer(io.Discard, c.tc)
	fr.ReadMetaHeaders = c.dec
	fr.MaxHeaderListSize = 64 << 20
	for {
		c.mu.Lock()
		fr.SetMaxReadFrameSize(c.maxRead)
		c.mu.Unlock()
		f, err := fr.ReadFrame()
		c.mu.Lock()
		if c.stopped {
			c.mu.Unlock()
			return
		}
		c.lastRead = time.Now()
		if err != nil {
			c.gone = true
			if isConnEnd(err) {
				c.sum.conn = append(c.sum.conn, "closed")
			} else {
				c.sum.conn = append(c.sum.conn, "client read error: "+err.Error())
			}
			c.mu.Unlock()
			return
		}
		if _, settings := f.(*http2.SettingsFrame); c.goAway && !c.goAwayNo && !settings {
			// x/net writes nothing after it but an ACK it owed already
			c.sum.conn = append(c.sum.conn, fmt.Sprintf("%v on stream %d after GOAWAY for an error", f.Header().Type, f.Header().StreamID))
		}
		c.sum.add(f)
		if df, ok := f.(*http2.DataFrame); ok {
			c.checkWindows(df)
		}
		if ga, ok := f.(*http2.GoAwayFrame); ok {
			c.goAway = true
			c.goAwayAt = time.Now()
			c.goAwayNo = ga.ErrCode == http2.ErrCodeNo
		}
		c.mu.Unlock()
	}
}

// checkWindows records DATA beyond the windows the client gave.
func (c *rawConn) checkWindows(f *http2.DataFrame) {
	n := int64(f.Length)
	c.connGot += n
	c.got[f.StreamID] += n
	if c.connGot > c.connGrant {
		c.sum.conn = append(c.sum.conn, fmt.Sprintf("DATA on stream %d beyond the connection window", f.StreamID))
	}
	if c.got[f.StreamID] > c.initialMax+c.grant[f.StreamID] {
		c.sum.conn = append(c.sum.conn, fmt.Sprintf("DATA on stream %d beyond its window", f.StreamID))
	}
}

// isConnEnd reports whether err means the server closed the connection:
// an orderly close, or a reset (the server closing with client bytes
// unread makes the kernel send RST, which is the same end).
func isConnEnd(err error) bool {
	return errors.Is(err, io.EOF) || errors.Is(err, io.ErrUnexpectedEOF) || errors.Is(err, net.ErrClosed) ||
		errors.Is(err, syscall.ECONNRESET) || errors.Is(err, syscall.EPIPE)
}

// flush writes the frames framed so far, in one write. A write error is
// ignored: the server may have closed the connection, which the reader
// records.
func (c *rawConn) flush() {
	if c.wbuf.Len() == 0 {
		return
	}
	c.tc.Write(c.wbuf.Bytes())
	c.wbuf.Reset()
}

// The frames a script writes; each is framed into the buffer, written by
// the next flush, wait, sleep, sync or the script's end.

func (c *rawConn) settings(s ...http2.Setting) {
	c.mu.Lock()
	for _, st := range s {
		switch st.ID {
		case http2.SettingInitialWindowSize:
			c.initialMax = max(c.initialMax, int64(st.Val))
		case http2.SettingMaxFrameSize:
			if st.Val >= 16384 && st.Val < 1<<24 {
				c.maxRead = max(c.maxRead, st.Val)
			}
		}
	}
	c.mu.Unlock()
	c.fr.WriteSettings(s...)
}

func (c *rawConn) windowUpdate(id, inc uint32) {
	c.mu.Lock()
	if id == 0 {
		c.connGrant += int64(inc)
	} else {
		c.grant[id] += int64(inc)
	}
	c.mu.Unlock()
	c.fr.WriteWindowUpdate(id, inc)
}

func (c *rawConn) settingsAck()         { c.fr.WriteSettingsAck() }
func (c *rawConn) ping(data [8]byte)    { c.fr.WritePing(false, data) }
func (c *rawConn) pingAck(data [8]byte) { c.fr.WritePing(true, data) }
func (c *rawConn) goAwayFrame(last uint32, code http2.ErrCode) {
	c.fr.WriteGoAway(last, code, nil)
}
func (c *rawConn) priority(id uint32, p http2.PriorityParam) { c.fr.WritePriority(id, p) }
func (c *rawConn) rawFrame(t http2.FrameType, flags http2.Flags, id uint32, payload []byte) {
	c.fr.WriteRawFrame(t, flags, id, payload)
}

func (c *rawConn) rst(id uint32, code http2.ErrCode) {
	c.reset[id] = true
	c.fr.WriteRSTStream(id, code)
}

func (c *rawConn) data(id uint32, end bool, p []byte) { c.fr.WriteData(id, end, p) }

func (c *rawConn) dataPadded(id uint32, end bool, p, pad []byte) {
	c.fr.WriteDataPadded(id, end, p, pad)
}

// block returns fields encoded with the connection's HPACK encoder; the
// block must then be sent, in order, or the server's decoder and this
// encoder disagree.
func (c *rawConn) block(fields []hpack.HeaderField) []byte {
	c.hbuf.Reset()
	for _, f := range fields {
		c.henc.WriteField(f)
	}
	return bytes.Clone(c.hbuf.Bytes())
}

// headersFrame writes one HEADERS frame, and notes the stream as opened.
func (c *rawConn) headersFrame(p http2.HeadersFrameParam) {
	c.noteOpened(p.StreamID)
	c.fr.WriteHeaders(p)
}

func (c *rawConn) continuation(id uint32, end bool, frag []byte) {
	c.fr.WriteContinuation(id, end, frag)
}

func (c *rawConn) noteOpened(id uint32) {
	if id%2 == 1 {
		c.opened[id] = true
		c.maxID = max(c.maxID, id)
	}
}

// headers writes the header block of fields on stream id: a HEADERS
// frame, and CONTINUATION frames when the block is over 16 KiB.
func (c *rawConn) headers(id uint32, endStream bool, fields []hpack.HeaderField) {
	c.sendBlock(id, endStream, c.block(fields))
}

func (c *rawConn) sendBlock(id uint32, endStream bool, b []byte) {
	first := b[:min(len(b), rawFrag)]
	b = b[len(first):]
	c.headersFrame(http2.HeadersFrameParam{StreamID: id, BlockFragment: first, EndStream: endStream, EndHeaders: len(b) == 0})
	for len(b) > 0 {
		frag := b[:min(len(b), rawFrag)]
		b = b[len(frag):]
		c.continuation(id, len(b) == 0, frag)
	}
}

// req writes a request's HEADERS on stream id: method and path on
// localhost, with the regular fields of pairs.
func (c *rawConn) req(id uint32, method, path string, endStream bool, pairs ...string) {
	c.headers(id, endStream, reqFields(method, path, pairs...))
}

func reqFields(method, path string, pairs ...string) []hpack.HeaderField {
	return hfs(append([]string{":method", method, ":scheme", "https", ":authority", "localhost", ":path", path}, pairs...)...)
}

// get writes a GET of path on stream id, ending the stream.
func (c *rawConn) get(id uint32, path string) { c.req(id, "GET", path, true) }

// sleep flushes and sleeps.
func (c *rawConn) sleep(d time.Duration) {
	c.flush()
	time.Sleep(d)
}

// waitFor flushes, then waits until cond (called with c.mu held) holds,
// the connection is gone, or rawWait passes; a timeout is recorded in the
// summary, so that a server that never answers shows in the diff.
func (c *rawConn) waitFor(what string, cond func() bool) {
	c.flush()
	deadline := time.Now().Add(rawWait)
	for {
		c.mu.Lock()
		ok, gone := cond(), c.gone || (c.goAway && !c.goAwayNo)
		if !ok && !gone && time.Now().After(deadline) {
			c.sum.conn = append(c.sum.conn, "timed out waiting for "+what)
			ok = true
		}
		c.mu.Unlock()
		if ok || gone {
			return
		}
		time.Sleep(2 * time.Millisecond)
	}
}

// waitHeaders waits for a HEADERS frame with a final status on stream id.
func (c *rawConn) waitHeaders(id uint32) {
	c.waitFor(fmt.Sprintf("a response on stream %d", id), func() bool {
		st := c.sum.streams[id]
		return st != nil && (st.final || st.ended)
	})
}

// waitInfo waits for a 1xx HEADERS on stream id.
func (c *rawConn) waitInfo(id uint32) {
	c.waitFor(fmt.Sprintf("a 1xx response on stream %d", id), func() bool {
		st := c.sum.streams[id]
		return st != nil && (st.info || st.final || st.ended)
	})
}

// waitEnd waits for stream id to end (END_STREAM or RST_STREAM).
func (c *rawConn) waitEnd(id uint32) {
	c.waitFor(fmt.Sprintf("the end of stream %d", id), func() bool {
		st := c.sum.streams[id]
		return st != nil && st.ended
	})
}

// waitData waits until n bytes of DATA came on stream id.
func (c *rawConn) waitData(id uint32, n int) {
	c.waitFor(fmt.Sprintf("%d bytes on stream %d", n, id), func() bool {
		st := c.sum.streams[id]
		return st != nil && (st.n >= n || st.ended)
	})
}

// waitGoAway waits for a GOAWAY.
func (c *rawConn) waitGoAway() {
	c.waitFor("GOAWAY", func() bool { return c.goAway })
}

// sync sends a PING and waits for its ACK: the server has then handled
// every frame sent before it (both servers answer a PING on the goroutine
// that reads frames, in order), unless the connection is gone.
func (c *rawConn) sync() {
	c.pingN++
	var data [8]byte
	copy(data[:], fmt.Sprintf("sync%04d", c.pingN))
	c.ping(data)
	want := fmt.Sprintf("PING ACK %q", data[:])
	c.waitFor("the ACK of a PING", func() bool { return slices.Contains(c.sum.conn, want) })
}

// mark records how many DATA bytes stream id has received so far.
func (c *rawConn) mark(label string, id uint32) {
	c.flush()
	c.mu.Lock()
	defer c.mu.Unlock()
	n := 0
	if st := c.sum.streams[id]; st != nil {
		n = st.n
	}
	c.sum.conn = append(c.sum.conn, fmt.Sprintf("%s: stream %d got %d DATA bytes", label, id, n))
}

// markWindow records how much connection window the server has given
// back so far.
func (c *rawConn) markWindow(label string) {
	c.flush()
	c.mu.Lock()
	defer c.mu.Unlock()
	c.sum.conn = append(c.sum.conn, fmt.Sprintf("%s: connection WINDOW_UPDATE so far %d", label, c.sum.connWindow))
}

// settle waits, after the script, until every stream the client opened
// (and did not reset) has ended, then until the connection is closed
// (after a GOAWAY) or has been quiet for rawQuiet; then it stops the
// reader and returns the summary.
func (c *rawConn) settle() *rawSummary {
	c.flush()
	deadline := time.Now().Add(rawWait)
	scriptEnd := time.Now()
	for {
		c.mu.Lock()
		done := c.gone || c.goAway
		if !done {
			done = true
			for id := range c.opened {
				if st := c.sum.streams[id]; !c.reset[id] && (st == nil || !st.ended) {
					done = false
					break
				}
			}
		}
		if !done && time.Now().After(deadline) {
			c.sum.conn = append(c.sum.conn, "timed out waiting for the streams to end")
			done = true
		}
		c.mu.Unlock()
		if done {
			break
		}
		time.Sleep(2 * time.Millisecond)
	}
	for {
		c.mu.Lock()
		var done bool
		switch {
		case c.gone:
			done = true
		case c.goAway:
			if done = time.Since(c.goAwayAt) > rawCloseWait; done {
				c.sum.conn = append(c.sum.conn, "still open 3 s after GOAWAY")
			}
		default:
			done = time.Since(c.lastRead) >= rawQuiet && time.Since(scriptEnd) >= rawQuiet
		}
		if done {
			c.stopped = true
			c.sum.maxID = c.maxID
		}
		c.mu.Unlock()
		if done {
			break
		}
		time.Sleep(5 * time.Millisecond)
	}
	c.tc.Close()
	return c.sum
}
