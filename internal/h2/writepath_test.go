package h2

import (
	"bytes"
	"context"
	"fmt"
	"io"
	"net"
	"net/http"
	"strconv"
	"sync"
	"testing"

	"go.uber.org/zap"
	"go.uber.org/zap/zaptest/observer"
	"golang.org/x/net/http2"
)

// The write path's rule, through clients whose windows are smaller than
// the response: bytes buffered ahead of the window go out before
// anything that ends the stream (END_STREAM on DATA, on trailers).

// patternBody is n bytes whose value depends on their offset, so that a
// missing or moved range shows.
func patternBody(n int) []byte {
	b := make([]byte, n)
	for i := range b {
		b[i] = byte(i*7 + i>>8 + i>>16)
	}
	return b
}

// trailerBodyHandler writes n bytes of patternBody in flushed writes of
// w, then a trailer: declared in the Trailer header (decl=1) or set with
// the "Trailer:" prefix.
func trailerBodyHandler(w http.ResponseWriter, r *http.Request) {
	q := r.URL.Query()
	n, _ := strconv.Atoi(q.Get("n"))
	chunk, _ := strconv.Atoi(q.Get("w"))
	declared := q.Get("decl") == "1"
	if declared {
		w.Header().Set("Trailer", "X-Sum")
	}
	body := patternBody(n)
	for len(body) > 0 {
		k := min(len(body), max(chunk, 1))
		if _, err := w.Write(body[:k]); err != nil {
			return
		}
		w.(http.Flusher).Flush()
		body = body[k:]
	}
	v := "n=" + strconv.Itoa(n)
	if declared {
		w.Header().Set("X-Sum", v)
	} else {
		w.Header().Set(http.TrailerPrefix+"X-Sum", v)
	}
}

// TestTrailersAfterBufferedBody fetches bodies of 1 byte to 8 MiB with a
// trailer, in flushed writes, through clients whose stream windows are
// 65,535 and 16,384 bytes, from the engine and from x/net's server: every
// byte must come, then the trailer. The engine once sent the trailers
// while the last bytes were still buffered ahead of the window, and
// dropped them: a short body with a clean end.
func TestTrailersAfterBufferedBody(t *testing.T) {
	sizes := []int{1, 16383, 16384, 65535, 65536, 100_000, 1 << 20, 8 << 20}
	if testing.Short() {
		sizes = sizes[:7]
	}
	for _, window := range []uint32{65535, 16384} {
		p := startPair(t, http.HandlerFunc(trailerBodyHandler), Config{})
		tr := p.client.Transport.(*http.Transport)
		tr.HTTP2 = &http.HTTP2Config{MaxReceiveBufferPerStream: int(window), MaxReceiveBufferPerConnection: 1 << 20}
		var wg sync.WaitGroup
		for _, n := range sizes {
			for _, w := range []int{n, 64 << 10, 16384 - 9} {
				for _, decl := range []string{"1", "0"} {
					path := fmt.Sprintf("/?n=%d&w=%d&decl=%s", n, w, decl)
					wg.Go(func() {
						for _, server := range []struct{ name, url string }{{"engine", p.engineURL}, {"x/net", p.xnetURL}} {
							if err := checkTrailerBody(p.client, server.url+path, n); err != nil {
								t.Errorf("window %d, %s: %s: %v", window, server.name, path, err)
							}
						}
					})
				}
			}
		}
		wg.Wait()
	}
}

// checkTrailerBody GETs url and checks its body is patternBody(n) and its
// trailer says n.
func checkTrailerBody(client *http.Client, url string, n int) error {
	resp, err := client.Get(url)
	if err != nil {
		return err
	}
	defer resp.Body.Close()
	got, err := io.ReadAll(resp.Body)
	if err != nil {
		return fmt.Errorf("after %d bytes: %w", len(got), err)
	}
	want := patternBody(n)
	if !bytes.Equal(got, want) {
		at := 0
		for at < min(len(got), len(want)) && got[at] == want[at] {
			at++
		}
		return fmt.Errorf("body of %d bytes, want %d (first difference at %d)", len(got), n, at)
	}
	if v := resp.Trailer.Get("X-Sum"); v != "n="+strconv.Itoa(n) {
		return fmt.Errorf("trailer X-Sum %q, want %q", v, "n="+strconv.Itoa(n))
	}
	return nil
}

// TestEndWithBytesBufferedAheadResets: were END_STREAM ever to go into
// the batch with bytes of the stream still buffered ahead (a bug of the
// engine's: writeBody sends them first), the stream is reset with
// INTERNAL_ERROR and the bug logged, rather than the body cut short with a
// clean end, or a panic from the handler's end, outside its recover,
// stopping the process.
func TestEndWithBytesBufferedAheadResets(t *testing.T) {
	core, logs := observer.New(zap.ErrorLevel)
	s := NewServer(http.NotFoundHandler(), Config{Logger: zap.New(core)})
	srv, cli := net.Pipe()
	defer cli.Close()
	c := newConn(s, context.Background(), srv)
	defer c.closeNow(errServerClosed)
	ctx, cancel := context.WithCancel(context.Background())
	st := new(stream)
	c.mu.Lock()
	c.maxClientStreamID = 1
	c.newStreamLocked(st, 1, true, priority{}, ctx, cancel)
	c.bufferAheadLocked(st, []byte("buffered ahead"))
	c.batch.ensure()
	before := len(c.batch.buf)
	c.appendEndLocked(st, nil)
	frames := bytes.Clone(c.batch.buf[before:])
	closed := st.closed
	c.mu.Unlock()
	fr := http2.NewFramer(nil, bytes.NewReader(frames))
	f, err := fr.ReadFrame()
	if rst, ok := f.(*http2.RSTStreamFrame); err != nil || !ok || rst.ErrCode != http2.ErrCodeInternal {
		t.Errorf("frame after the end: %v (%v); want RST_STREAM INTERNAL_ERROR alone", f, err)
	}
	if f, err := fr.ReadFrame(); err != io.EOF {
		t.Errorf("another frame: %v (%v)", f, err)
	}
	if !closed || ctx.Err() == nil {
		t.Errorf("stream closed %v, context %v; want both ended", closed, ctx.Err())
	}
	if logs.Len() != 1 {
		t.Errorf("%d errors logged; want 1", logs.Len())
	}
}
