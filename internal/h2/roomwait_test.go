package h2

import (
	"bytes"
	"context"
	"errors"
	"fmt"
	"net"
	"net/http"
	"os"
	"testing"
	"time"

	"golang.org/x/net/http2"
	"golang.org/x/net/http2/hpack"

	"github.com/h2file/caddy-h2file/internal/harness"
)

// TestHeadersWaitingForRoomWokenByReset: a handler whose response
// headers wait for room in the batch (the client reads nothing, the
// socket is stuck, another stream filled the batch) is woken when its
// stream is reset at its write deadline, and its write fails then, as
// x/net's handler's does, not when the socket frees (here never: no
// WriteProgressTimeout) or the connection closes.
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

	srv, cli := net.Pipe() // buffers nothing: the client reads nothing
	t.Cleanup(func() { cli.Close() })
	go s.ServeConn(context.Background(), srv)
	var hbuf bytes.Buffer
	enc := hpack.NewEncoder(&hbuf)
	var out bytes.Buffer
	fw := http2.NewFramer(&out, nil)
	out.WriteString(http2.ClientPreface)
	fw.WriteSettings(http2.Setting{ID: http2.SettingInitialWindowSize, Val: 16 << 20})
	fw.WriteWindowUpdate(0, 16<<20)
	for i, path := range []string{"/fill", "/headers"} {
		hbuf.Reset()
		for _, f := range reqFields("GET", path) {
			enc.WriteField(f)
		}
		fw.WriteHeaders(http2.HeadersFrameParam{StreamID: uint32(2*i + 1), BlockFragment: hbuf.Bytes(), EndStream: true, EndHeaders: true})
	}
	go cli.Write(out.Bytes()) // the pipe waits for the server's reads

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
