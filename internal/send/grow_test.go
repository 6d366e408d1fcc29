package send

import (
	"bytes"
	"context"
	"crypto/tls"
	"net"
	"net/http"
	"net/http/httptest"
	"os"
	"path/filepath"
	"slices"
	"sync"
	"testing"

	"github.com/h2file/caddy-h2file/internal/coalesce"
	"github.com/h2file/caddy-h2file/internal/harness"
)

// growRequest is an HTTP/2 GET whose context has the local address a
// connection through the coalesce wrapper above TLS reports, for a client
// with 16 MiB windows, or a plain one.
func growRequest(coalesced bool) *http.Request {
	return windowRequest(coalesced, 16<<20)
}

// windowRequest is growRequest for a client whose smaller window is window
// bytes (0: windows unknown, as below TLS).
func windowRequest(coalesced bool, window int64) *http.Request {
	var addr net.Addr = &net.TCPAddr{IP: net.IPv4(127, 0, 0, 1), Port: 443}
	if coalesced {
		var peer *coalesce.Peer
		if window > 0 {
			peer = coalesce.NewPeer(window, 2*window)
		}
		addr = coalesce.NewAddr(addr, peer)
	}
	r := httptest.NewRequest(http.MethodGet, "https://example.com/f.bin", nil)
	r.Proto, r.ProtoMajor, r.ProtoMinor = "HTTP/2.0", 2, 0
	return r.WithContext(context.WithValue(r.Context(), http.LocalAddrContextKey, addr))
}

// TestBodyWritesGrowWhenCoalesced checks the write sizes of a 1 MB body,
// from a file and from memory: four times write_chunk first, then doubling
// up to maxGrownChunk through the coalesce wrapper, and write_chunk
// throughout without it; and that the bytes are the file's.
func TestBodyWritesGrowWhenCoalesced(t *testing.T) {
	content, f := growTestFile(t, 1_000_000)
	grown := []int{65500, 131000, 262000, 262000, 262000, 17500}
	for _, tc := range []struct {
		desc      string
		coalesced bool
		memory    bool
		want      []int
	}{
		{"file, coalesced", true, false, grown},
		{"memory, coalesced", true, true, grown},
		{"file, plain", false, false, nil},
		{"memory, plain", false, true, nil},
	} {
		t.Run(tc.desc, func(t *testing.T) {
			rec := harness.NewWriteSizeRecorder()
			bw := NewWriter(rec, growRequest(tc.coalesced), DefaultChunkSize)
			body := &Body{file: f, size: int64(len(content))}
			if tc.memory {
				body = &Body{data: content, size: int64(len(content))}
			}
			n, err := bw.ReadFrom(body)
			if err != nil || n != int64(len(content)) {
				t.Fatalf("ReadFrom = %d, %v", n, err)
			}
			if !bytes.Equal(rec.Body.Bytes(), content) {
				t.Fatal("body differs from the file")
			}
			want := tc.want
			if want == nil {
				for left := len(content); left > 0; left -= DefaultChunkSize {
					want = append(want, min(left, DefaultChunkSize))
				}
			}
			if !slices.Equal(rec.Sizes, want) {
				t.Errorf("write sizes %v, want %v", rec.Sizes, want)
			}
			if got := grownBytes.Load(); got != 0 {
				t.Errorf("%d bytes of grown buffers still out", got)
			}
		})
	}
}

// growTestFile writes size random bytes to a settled file and opens it
// for the test.
func growTestFile(t *testing.T, size int) ([]byte, *os.File) {
	t.Helper()
	content := harness.RandomBytes(t, size)
	f, err := os.Open(harness.WriteFile(t, filepath.Join(t.TempDir(), "f.bin"), content))
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { f.Close() })
	return content, f
}

// writeSeries lists the write sizes of a total-byte body: steps, then the
// last step again, the final write cut to what is left.
func writeSeries(total int, steps ...int) []int {
	var sizes []int
	for left, i := total, 0; left > 0; i++ {
		size := min(left, steps[min(i, len(steps)-1)])
		sizes = append(sizes, size)
		left -= size
	}
	return sizes
}

// TestBodyWritesFollowClientWindows: through the wrapper, HTTP/2 writes
// grow only to a quarter of the client's smaller window, not at all where
// the windows are unknown (below TLS), and HTTP/1.x writes to four times
// write_chunk (see growLimit).
func TestBodyWritesFollowClientWindows(t *testing.T) {
	content, f := growTestFile(t, 600_000)
	grown := func(steps ...int) []int { return writeSeries(len(content), steps...) }
	for _, tc := range []struct {
		desc   string
		window int64
		http1  bool
		want   []int
	}{
		{"64 KB windows", 65535, false, grown(DefaultChunkSize)},
		{"256 KB windows", 256 << 10, false, grown(65500)},
		{"512 KB windows", 512 << 10, false, grown(65500, 131000)},
		{"1 MB windows", 1 << 20, false, grown(65500, 131000, 262000)},
		{"windows unknown", 0, false, grown(DefaultChunkSize)},
		{"HTTP/1.1, no windows", 0, true, grown(65500)},
	} {
		t.Run(tc.desc, func(t *testing.T) {
			r := windowRequest(true, tc.window)
			if tc.http1 {
				r.Proto, r.ProtoMajor, r.ProtoMinor = "HTTP/1.1", 1, 1
			}
			rec := harness.NewWriteSizeRecorder()
			bw := NewWriter(rec, r, DefaultChunkSize)
			if n, err := bw.writeChunks(&Body{file: f, size: int64(len(content))}, int64(len(content))); err != nil || n != int64(len(content)) {
				t.Fatalf("writeChunks = %d, %v", n, err)
			}
			if !bytes.Equal(rec.Body.Bytes(), content) {
				t.Fatal("body differs from the file")
			}
			if !slices.Equal(rec.Sizes, tc.want) {
				t.Errorf("write sizes %v, want %v", rec.Sizes, tc.want)
			}
		})
	}
}

// TestStreamsShareGrownWrites: HTTP/2 bodies sent at once on one
// connection share maxGrownChunk (down to four times write_chunk), each
// counts itself only while it sends, and a medium buffer is counted at its
// own size.
func TestStreamsShareGrownWrites(t *testing.T) {
	content, f := growTestFile(t, 600_000)
	grown := func(steps ...int) []int { return writeSeries(len(content), steps...) }
	for _, tc := range []struct {
		others int32 // bodies the connection sends already
		want   []int
	}{
		{0, grown(65500, 131000, 262000)},
		{1, grown(65500, 131000)},
		{3, grown(65500)},
		{50, grown(65500)},
	} {
		r := windowRequest(true, 16<<20)
		peer := r.Context().Value(http.LocalAddrContextKey).(coalesce.Addr).Peer()
		for range tc.others {
			peer.StartBody()
		}
		var during int32
		var grownDuring int64
		rec := harness.NewWriteSizeRecorder()
		hook := &hookedSizes{WriteSizeRecorder: rec, onWrite: func() {
			during, grownDuring = peer.Sending(), grownBytes.Load()
		}}
		bw := NewWriter(hook, r, DefaultChunkSize)
		if n, err := bw.ReadFrom(&Body{file: f, size: int64(len(content))}); err != nil || n != int64(len(content)) {
			t.Fatalf("ReadFrom = %d, %v", n, err)
		}
		if !bytes.Equal(rec.Body.Bytes(), content) || !slices.Equal(rec.Sizes, tc.want) {
			t.Errorf("%d others: write sizes %v, want %v (body equal: %v)", tc.others, rec.Sizes, tc.want, bytes.Equal(rec.Body.Bytes(), content))
		}
		if during != tc.others+1 || peer.Sending() != tc.others {
			t.Errorf("%d others: %d counted while sending, %d after; want %d, %d", tc.others, during, peer.Sending(), tc.others+1, tc.others)
		}
		if tc.others >= 3 && grownDuring != grownMedium {
			t.Errorf("%d others: %d bytes of grown buffers counted while sending, want one medium buffer (%d)", tc.others, grownDuring, grownMedium)
		}
	}
	if got := grownBytes.Load(); got != 0 {
		t.Errorf("%d bytes of grown buffers still out", got)
	}
}

// hookedSizes is a harness.WriteSizeRecorder that calls onWrite on every Write.
type hookedSizes struct {
	*harness.WriteSizeRecorder
	onWrite func()
}

func (w *hookedSizes) Write(p []byte) (int, error) {
	w.onWrite()
	return w.WriteSizeRecorder.Write(p)
}

// blockingWriter blocks every Write until release is closed.
type blockingWriter struct {
	http.ResponseWriter
	started chan struct{}
	release chan struct{}
	once    sync.Once
}

func (w *blockingWriter) Write(p []byte) (int, error) {
	w.once.Do(func() { close(w.started) })
	<-w.release
	return len(p), nil
}

// TestGrownBuffersStayInBudget holds many responses blocked in their second
// write and checks that the grown buffers they hold
// never exceed MaxGrownBytes, that the others go on with write_chunk, and
// that everything is given back.
func TestGrownBuffersStayInBudget(t *testing.T) {
	content, f := growTestFile(t, 2_000_000)
	const streams = 3 * MaxGrownBytes / maxGrownChunk
	release := make(chan struct{})
	var wg sync.WaitGroup
	writers := make([]*blockingWriter, streams)
	for i := range writers {
		// the first write goes through, the second blocks
		first := &countingPass{}
		bwr := &blockingWriter{ResponseWriter: httptest.NewRecorder(), started: make(chan struct{}), release: release}
		first.next = bwr
		writers[i] = bwr
		bw := NewWriter(first, growRequest(true), DefaultChunkSize)
		wg.Add(1)
		go func() {
			defer wg.Done()
			_, _ = bw.ReadFrom(&Body{file: f, size: int64(len(content))})
		}()
	}
	for _, w := range writers {
		<-w.started
	}
	if got := grownBytes.Load(); got > MaxGrownBytes || got <= 0 {
		t.Errorf("grown buffers hold %d bytes with %d blocked streams, want 0 < x <= %d", got, streams, MaxGrownBytes)
	}
	close(release)
	wg.Wait()
	if got := grownBytes.Load(); got != 0 {
		t.Errorf("%d bytes of grown buffers still out after the writes", got)
	}
}

// countingPass lets the first Write through at once and hands the others
// to next.
type countingPass struct {
	next   http.ResponseWriter
	writes int
}

func (w *countingPass) Header() http.Header { return w.next.Header() }
func (w *countingPass) WriteHeader(c int)   { w.next.WriteHeader(c) }
func (w *countingPass) Write(p []byte) (int, error) {
	w.writes++
	if w.writes == 1 {
		return len(p), nil
	}
	return w.next.Write(p)
}

// TestCoalesceConnMarksLocalAddr checks that a coalescing connection's
// local address is marked, keeps the wrapped one's string, and shows
// through crypto/tls, so that handlers see it in both positions.
func TestCoalesceConnMarksLocalAddr(t *testing.T) {
	a, b := net.Pipe()
	defer a.Close()
	defer b.Close()
	c := coalesce.NewConn(a, coalesce.NewLimits(coalesce.DefaultMaxPending, coalesce.DefaultMaxTotal, coalesce.DefaultCloseTimeout))
	got, ok := c.LocalAddr().(coalesce.Addr)
	if !ok {
		t.Fatalf("LocalAddr is %T, want coalesceAddr", c.LocalAddr())
	}
	if got.String() != a.LocalAddr().String() || got.Network() != a.LocalAddr().Network() {
		t.Errorf("LocalAddr %s/%s, want %s/%s", got.Network(), got, a.LocalAddr().Network(), a.LocalAddr())
	}
	// below TLS: what the HTTP server sees is the tls.Conn
	if _, ok := tls.Server(c, &tls.Config{}).LocalAddr().(coalesce.Addr); !ok {
		t.Error("a tls.Conn over a coalescing connection hides the mark")
	}
}
