package h2

import (
	"bytes"
	"errors"
	"fmt"
	"net/http"
	"os"
	"runtime"
	"strings"
	"testing"
	"time"

	"golang.org/x/net/http2"
	"golang.org/x/net/http2/hpack"

	"github.com/h2file/caddy-h2file/internal/harness"
	"github.com/h2file/caddy-h2file/internal/harness/h2client"
)

// TestSendingWithoutReading: a client that never reads, and goes on
// sending DATA on a stream that was reset, is given each frame's
// connection window back at once (the bytes are discarded). It can send
// for ever if it assumes the WINDOW_UPDATEs it never reads, and each one
// waits in the server's batch behind a write that cannot finish. The
// engine must keep its batch within maxBacklog of answers and close the
// connection, not let it grow until send_timeout (it grew by 13 bytes for
// every 4 KiB received: 1.3 MB by 400 MB, and on). x/net's outcome is
// logged: it closes at 10,000 queued control frames, or stops reading.
func TestSendingWithoutReading(t *testing.T) {
	p := startPair(t, http.HandlerFunc(diffHandler), Config{})
	const limit = 600 << 20
	bound := maxBatch + maxBacklog + 64 // and the one answer that crosses it
	largest := 0
	sent, err := sendWithoutReading(p.addr(), limit, func() error {
		largest = max(largest, p.engine.largestBatch())
		if largest > bound {
			return fmt.Errorf("the engine's batch holds %d bytes, more than %d", largest, bound)
		}
		return nil
	})
	// The client's write can time out after the engine closed the
	// connection: under load (two test packages at once, -race), the
	// client's socket, which reads nothing into a 4 KiB buffer, was
	// reset on the client's side at 6-8 MB (the engine's write got
	// "connection reset by peer", and it closed), and the client's write
	// then waited out its deadline. What must not happen is a timeout
	// while the engine still holds the connection: it stopped reading.
	closed := errors.Is(err, os.ErrDeadlineExceeded) && harness.Poll(5*time.Second, func() error {
		if n := p.engine.Conns(); n > 0 {
			return fmt.Errorf("%d connections", n)
		}
		return nil
	}) == nil
	if err == nil || (errors.Is(err, os.ErrDeadlineExceeded) && !closed) || errors.Is(err, errBatchGrew) {
		if errors.Is(err, os.ErrDeadlineExceeded) {
			buf := make([]byte, 4<<20)
			t.Logf("goroutines:\n%s", buf[:runtime.Stack(buf, true)])
		}
		t.Fatalf("engine: after %d MB sent without reading a frame: %v", sent>>20, err)
	}
	if closed {
		t.Logf("engine: the client's write timed out after %d MB, and the engine had closed the connection", sent>>20)
	}
	t.Logf("engine: closed after %d MB sent, its batch at most %d bytes: %v", sent>>20, largest, err)

	sent, err = sendWithoutReading(strings.TrimPrefix(p.xnetURL, "https://"), limit, nil)
	t.Logf("x/net: after %d MB sent: %v", sent>>20, err)
}

var errBatchGrew = errors.New("the batch grew past its bound")

// largestBatch is the size of the largest batch among s's connections.
func (s *Server) largestBatch() int {
	s.mu.Lock()
	conns := make([]*conn, 0, len(s.conns))
	for c := range s.conns {
		conns = append(conns, c)
	}
	s.mu.Unlock()
	n := 0
	for _, c := range conns {
		c.mu.Lock()
		n = max(n, len(c.batch.buf))
		c.mu.Unlock()
	}
	return n
}

// sendWithoutReading fills the socket with a 64 MB response it does
// not read, then opens POSTs that declare no body and sends up to limit
// bytes of DATA on them in 4 KiB frames, 512 KiB a stream: the first
// resets its stream (more than its Content-Length), and the server
// discards the others and gives their window back at once, a
// WINDOW_UPDATE each, behind a write that cannot finish. It returns what it sent and the write error that
// stopped it (os.ErrDeadlineExceeded: the server stopped reading), or
// what probe, called after each write, returned; or nil.
func sendWithoutReading(addr string, limit int, probe func() error) (int, error) {
	tc, raw, err := h2client.DialTLS(addr)
	if err != nil {
		return 0, err
	}
	defer tc.Close()
	// a small receive buffer, so that the response fills the sockets'
	// buffers before the DATA starts (what they hold of the answers is
	// not the server's memory)
	raw.SetReadBuffer(4096)
	var buf bytes.Buffer
	fr := http2.NewFramer(&buf, nil)
	buf.WriteString(http2.ClientPreface)
	fr.WriteSettings(http2.Setting{ID: http2.SettingInitialWindowSize, Val: 1 << 24})
	fr.WriteWindowUpdate(0, 1<<30)
	var hb bytes.Buffer
	enc := hpack.NewEncoder(&hb)
	header := func(id uint32, fields []hpack.HeaderField, end bool) {
		hb.Reset()
		for _, f := range fields {
			enc.WriteField(f)
		}
		fr.WriteHeaders(http2.HeadersFrameParam{StreamID: id, BlockFragment: hb.Bytes(), EndHeaders: true, EndStream: end})
	}
	header(1, reqFields("GET", "/bytes?n=64000000&w=1000000"), true)
	if _, err := tc.Write(buf.Bytes()); err != nil {
		return 0, err
	}
	time.Sleep(time.Second)
	frame := make([]byte, 4096)
	sent := 0
	for id := uint32(3); sent < limit; id += 2 {
		// a POST that declares no body, reset at its first DATA, then
		// DATA within the window the stream had (what a client may have
		// in flight: not a flood), on a new stream every 512 KiB
		buf.Reset()
		header(id, append(reqFields("POST", "/bytes?n=0"), hpack.HeaderField{Name: "content-length", Value: "0"}), false)
		for range 128 {
			fr.WriteData(id, false, frame)
		}
		// a server that no longer reads stops the client here
		tc.SetWriteDeadline(time.Now().Add(5 * time.Second))
		n, err := tc.Write(buf.Bytes())
		sent += n
		if err != nil {
			return sent, err
		}
		if probe != nil {
			if err := probe(); err != nil {
				return sent, fmt.Errorf("%w: %v", errBatchGrew, err)
			}
		}
	}
	return sent, nil
}
