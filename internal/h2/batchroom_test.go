package h2

import (
	"bytes"
	"context"
	"errors"
	"fmt"
	"net"
	"net/http"
	"os"
	"strings"
	"testing"
	"time"

	"golang.org/x/net/http2"
	"golang.org/x/net/http2/hpack"

	"github.com/h2file/caddy-h2file/internal/harness"
)

// TestHeadersWaitingForRoomWokenByReset: a handler whose response
// headers wait for room in the batch (the client reads nothing, the
// socket is stuck, another stream filled the batch) is woken when its
// stream is reset at its write deadline, and its write fails then, not
// when the socket frees (here never: no WriteProgressTimeout) or the
// connection closes. (x/net's handler would wait too: its stream closes
// once its RST_STREAM is written.)
func TestHeadersWaitingForRoomWokenByReset(t *testing.T) {
	const deadline = 200 * time.Millisecond
	var s *Server
	waited := make(chan error, 1)
	s = NewServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		if r.URL.Path == "/fill" {
			w.Write(make([]byte, 4*maxBatch)) // until the batch is full
			return
		}
		if err := harness.Poll(10*time.Second, func() error {
			if n := s.largestBatch(); n < maxBatch {
				return fmt.Errorf("the batch holds %d bytes", n)
			}
			return nil
		}); err != nil {
			waited <- err
			return
		}
		rc := http.NewResponseController(w)
		rc.SetWriteDeadline(time.Now().Add(deadline))
		start := time.Now()
		w.WriteHeader(http.StatusOK)
		err := rc.Flush()
		if err == nil {
			err = errors.New("no error")
		}
		waited <- fmt.Errorf("after %v: %w", time.Since(start).Round(time.Millisecond), err)
	}), Config{})

	p := newPipePeer(t, s, 16<<20) // the client reads nothing
	p.get(1, "/fill")
	p.get(3, "/headers")
	p.send(t)

	select {
	case err := <-waited:
		if !errors.Is(err, os.ErrDeadlineExceeded) {
			t.Errorf("the response headers' write, reset at its deadline: %v; want a deadline error", err)
		} else if testing.Verbose() {
			t.Logf("the response headers' write: %v", err)
		}
	case <-time.After(deadline + 5*time.Second):
		t.Errorf("the response headers' write still waits for room %v after its stream's write deadline", 5*time.Second)
	}
}

// TestLargeHeaderBlockIsNotABacklog: a response header block larger than
// the batch's room (here about 390 KB after HPACK, behind 200 KiB of
// another stream's DATA, while a write is under way) is the handler's,
// not answers the reading goroutine piled up behind a client that does
// not read: the client's next PING is answered once it reads, as x/net's
// server answers it. The block counted toward the backlog bound, and the
// PING closed the connection, with no GOAWAY and every stream with it.
func TestLargeHeaderBlockIsNotABacklog(t *testing.T) {
	var s *Server
	headersIn := make(chan error, 1)
	s = NewServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		if r.URL.Path == "/fill" {
			w.Write(make([]byte, 200<<10))
			w.(http.Flusher).Flush()
			return
		}
		headersIn <- harness.Poll(10*time.Second, func() error {
			if n := s.largestBatch(); n < 200<<10 {
				return fmt.Errorf("the batch holds %d bytes", n)
			}
			return nil
		})
		w.Header().Set("X-Big", strings.Repeat("h", 500<<10))
		w.WriteHeader(http.StatusOK)
		w.(http.Flusher).Flush()
		<-r.Context().Done()
	}), Config{})

	p := newPipePeer(t, s, 200<<10) // the client reads nothing yet
	p.send(t)
	// the server's SETTINGS in a write that cannot finish, so that what
	// the handlers add stays in the batch
	if err := harness.Poll(10*time.Second, func() error {
		if !s.writeUnderWay() {
			return errors.New("no write under way")
		}
		return nil
	}); err != nil {
		t.Fatal(err)
	}
	p.get(1, "/fill")
	p.get(3, "/big")
	p.send(t)
	if err := harness.Recv(t, headersIn, "the /big handler"); err != nil {
		t.Fatal(err)
	}
	if err := harness.Poll(10*time.Second, func() error {
		if n := s.largestBatch(); n <= maxBatch+maxBacklog {
			return fmt.Errorf("the batch holds %d bytes", n)
		}
		return nil
	}); err != nil {
		t.Fatal(err)
	}
	p.fw.WritePing(false, [8]byte{1})
	p.send(t)
	fr := http2.NewFramer(nil, p.cli)
	var seen []string
	for {
		f, err := fr.ReadFrame()
		if err != nil {
			t.Fatalf("after %d frames (%v ...): %v; want the PING's ACK", len(seen), seen[:min(len(seen), 4)], err)
		}
		if p, ok := f.(*http2.PingFrame); ok && p.IsAck() {
			return
		}
		if _, ok := f.(*http2.GoAwayFrame); ok {
			t.Fatalf("GOAWAY after %d frames; want the PING's ACK", len(seen))
		}
		seen = append(seen, f.Header().Type.String())
	}
}

// writeUnderWay reports whether one of s's connections is writing its
// batch.
func (s *Server) writeUnderWay() bool {
	s.mu.Lock()
	conns := make([]*conn, 0, len(s.conns))
	for c := range s.conns {
		conns = append(conns, c)
	}
	s.mu.Unlock()
	for _, c := range conns {
		c.mu.Lock()
		w := c.inWrite
		c.mu.Unlock()
		if w {
			return true
		}
	}
	return false
}

// pipePeer is a raw client of s on a net.Pipe, which buffers nothing:
// what the client does not read, the server cannot write. Its frames
// gather in out until send.
type pipePeer struct {
	cli  net.Conn
	out  bytes.Buffer
	fw   *http2.Framer
	hbuf bytes.Buffer
	enc  *hpack.Encoder
}

// newPipePeer serves s on a new pipe, and gathers the client preface,
// SETTINGS_INITIAL_WINDOW_SIZE window and a connection window of 16 MiB.
func newPipePeer(t *testing.T, s *Server, window uint32) *pipePeer {
	srv, cli := net.Pipe()
	t.Cleanup(func() { cli.Close() })
	cli.SetDeadline(time.Now().Add(20 * time.Second))
	go s.ServeConn(context.Background(), srv)
	p := &pipePeer{cli: cli}
	p.fw = http2.NewFramer(&p.out, nil)
	p.enc = hpack.NewEncoder(&p.hbuf)
	p.out.WriteString(http2.ClientPreface)
	p.fw.WriteSettings(http2.Setting{ID: http2.SettingInitialWindowSize, Val: window})
	p.fw.WriteWindowUpdate(0, 16<<20)
	return p
}

// get gathers a GET of path on stream id.
func (p *pipePeer) get(id uint32, path string) {
	p.hbuf.Reset()
	for _, f := range reqFields("GET", path) {
		p.enc.WriteField(f)
	}
	p.fw.WriteHeaders(http2.HeadersFrameParam{StreamID: id, BlockFragment: p.hbuf.Bytes(), EndStream: true, EndHeaders: true})
}

// send writes what was gathered: the server's reader reads it all,
// whatever the server writes.
func (p *pipePeer) send(t *testing.T) {
	t.Helper()
	if _, err := p.cli.Write(p.out.Bytes()); err != nil {
		t.Fatal(err)
	}
	p.out.Reset()
}
