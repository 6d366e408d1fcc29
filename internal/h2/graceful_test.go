package h2

import (
	"bytes"
	"context"
	"net"
	"net/http"
	"strconv"
	"testing"
	"time"

	"golang.org/x/net/http2"
	"golang.org/x/net/http2/hpack"
)

// pipeOutcome is what a pipeGet client saw of stream 1.
type pipeOutcome struct {
	goAway     bool
	goAwayLast uint32
	responded  bool // a HEADERS came
	body       []byte
	ended      bool  // END_STREAM came
	readErr    error // what ended the reading, if not END_STREAM
}

// pipeGet serves s on a net.Pipe, which buffers nothing (what the server
// has not written is exactly what it holds), and GETs path on stream 1
// with SETTINGS_INITIAL_WINDOW_SIZE and a connection window of 16 MiB;
// the client sleeps pace for every byte of DATA it reads. It returns the
// client's end of the pipe and the outcome, sent once stream 1 ended or
// the reading failed.
func pipeGet(t *testing.T, s *Server, path string, pace time.Duration) (net.Conn, <-chan pipeOutcome) {
	t.Helper()
	srv, cli := net.Pipe()
	t.Cleanup(func() { cli.Close() })
	cli.SetDeadline(time.Now().Add(20 * time.Second))
	go s.ServeConn(context.Background(), srv)
	result := make(chan pipeOutcome, 1)
	go func() {
		var o pipeOutcome
		defer func() { result <- o }()
		fr := http2.NewFramer(nil, cli)
		for {
			f, err := fr.ReadFrame()
			if err != nil {
				o.readErr = err
				return
			}
			switch f := f.(type) {
			case *http2.GoAwayFrame:
				o.goAway, o.goAwayLast = true, f.LastStreamID
			case *http2.HeadersFrame:
				o.responded = true
			case *http2.DataFrame:
				o.body = append(o.body, f.Data()...)
				if f.StreamEnded() {
					o.ended = true
					return
				}
				time.Sleep(time.Duration(len(f.Data())) * pace)
			}
		}
	}()
	var hbuf bytes.Buffer
	enc := hpack.NewEncoder(&hbuf)
	for _, f := range reqFields("GET", path) {
		enc.WriteField(f)
	}
	var out bytes.Buffer
	fw := http2.NewFramer(&out, nil)
	out.WriteString(http2.ClientPreface)
	fw.WriteSettings(http2.Setting{ID: http2.SettingInitialWindowSize, Val: 16 << 20})
	fw.WriteSettingsAck()
	fw.WriteWindowUpdate(0, 16<<20)
	fw.WriteHeaders(http2.HeadersFrameParam{StreamID: 1, BlockFragment: hbuf.Bytes(), EndStream: true, EndHeaders: true})
	go cli.Write(out.Bytes()) // the pipe waits for the server's reads
	return cli, result
}

// TestGracefulShutdownSlowReader: a response that ends while a graceful
// shutdown is under way reaches a slow client whole. The close that
// follows a graceful GOAWAY (goAwayTimeout after the last stream) waits
// until the response's last frames are written, as x/net's does. Started
// when END_STREAM entered the batch, it cut what was still to be written:
// here the handler's second batch (about 192 KiB, which enters the batch
// once the first 256 KiB are written) to a client reading 100 KiB a
// second.
func TestGracefulShutdownSlowReader(t *testing.T) {
	t.Parallel() // it waits, about 4.5 s
	const size = 448 << 10
	body := bytes.Repeat([]byte("slow reader "), size/12+1)[:size]
	var s *Server
	shutdown := make(chan error, 1)
	s = NewServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		go func() { shutdown <- s.Shutdown(context.Background()) }()
		// the GOAWAY first: the stream is open, so no close is armed
		time.Sleep(50 * time.Millisecond)
		w.Header().Set("Content-Length", strconv.Itoa(size))
		w.Write(body)
	}), Config{})
	cli, result := pipeGet(t, s, "/slow", time.Second/(100<<10))
	o := <-result
	if !o.goAway || !bytes.Equal(o.body, body) || !o.ended {
		t.Errorf("GOAWAY %v, %d of %d bytes, END_STREAM %v (read error %v); want the GOAWAY, then the whole body",
			o.goAway, len(o.body), size, o.ended, o.readErr)
	}
	cli.Close()
	select {
	case err := <-shutdown:
		if err != nil {
			t.Errorf("Shutdown: %v", err)
		}
	case <-time.After(10 * time.Second):
		t.Error("Shutdown did not return 10 s after the client closed")
	}
}

// TestGracefulShutdownWhileStreamOpens: a graceful GOAWAY that comes
// while the reader is opening a stream (between taking its ID, which the
// GOAWAY then names as the last one served, and registering it) finds no
// stream open and arms the connection's close; the stream is served all
// the same, so the close must wait for it. Its handler takes longer than
// goAwayTimeout: the close armed by the GOAWAY cut it.
func TestGracefulShutdownWhileStreamOpens(t *testing.T) {
	t.Parallel() // it waits, about 1.5 s
	s := NewServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		time.Sleep(goAwayTimeout + 500*time.Millisecond)
		w.Write([]byte("served"))
	}), Config{})
	s.onHeadersUnlocked = func(c *conn) {
		c.startGracefulShutdown()
		// the GOAWAY written, so that its writer finds nothing left
		time.Sleep(50 * time.Millisecond)
	}
	_, result := pipeGet(t, s, "/", 0)
	o := <-result
	if !o.goAway || o.goAwayLast != 1 || string(o.body) != "served" || !o.ended {
		t.Errorf("GOAWAY %v (last stream %d), body %q, END_STREAM %v (read error %v); want GOAWAY naming stream 1, then its response",
			o.goAway, o.goAwayLast, o.body, o.ended, o.readErr)
	}
}

// TestGracefulShutdownBeforeStreamOpens: a graceful GOAWAY that comes
// after the reader has let a new stream's HEADERS through (processFrame)
// but before processHeaders takes its ID (Shutdown, the idle timeout or
// another stream's Connection: close, on another goroutine) names the
// stream before it as the last one served: the stream must not be served
// (RFC 9113 §6.8), since the client may send it again on another
// connection, a POST as well as a GET. It was served.
func TestGracefulShutdownBeforeStreamOpens(t *testing.T) {
	t.Parallel() // it waits, about 1 s
	served := make(chan struct{}, 1)
	s := NewServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		served <- struct{}{}
		w.Write([]byte("served"))
	}), Config{})
	s.onHeadersRead = func(c *conn) { c.startGracefulShutdown() }
	_, result := pipeGet(t, s, "/", 0)
	o := <-result
	if !o.goAway || o.goAwayLast != 0 || o.responded || len(served) != 0 {
		t.Errorf("GOAWAY %v (last stream %d), response %v, handler ran %v; want GOAWAY naming no stream, and stream 1 not served",
			o.goAway, o.goAwayLast, o.responded, len(served) != 0)
	}
	if o.ended || o.readErr == nil {
		t.Errorf("END_STREAM %v, read error %v; want the connection closed", o.ended, o.readErr)
	}
}
