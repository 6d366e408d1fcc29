package send

import (
	"bytes"
	"errors"
	"fmt"
	"io"
	"io/fs"
	"net/http"
	"net/http/httptest"
	"os"
	"path/filepath"
	"slices"
	"testing"
	"time"

	"github.com/caddyserver/caddy/v2/modules/caddyhttp"

	"github.com/h2file/caddy-h2file/internal/harness"
)

func newTestBodyWriter() (*Writer, *harness.WriteSizeRecorder) {
	rec := harness.NewWriteSizeRecorder()
	return &Writer{ResponseWriterWrapper: &caddyhttp.ResponseWriterWrapper{ResponseWriter: rec}, chunkSize: DefaultChunkSize}, rec
}

// TestBodyWriterChunksServeContent checks that http.ServeContent's copy
// reaches Writer.ReadFrom and leaves as one-TLS-record-sized writes,
// from memory and from a file, for whole bodies and ranges.
func TestBodyWriterChunksServeContent(t *testing.T) {
	content := harness.RandomBytes(t, 100_000)
	name := harness.WriteFile(t, filepath.Join(t.TempDir(), "f.bin"), content)
	f, err := os.Open(name)
	if err != nil {
		t.Fatal(err)
	}
	defer f.Close()

	for _, src := range []struct {
		desc string
		body func() *Body
	}{
		{"memory", func() *Body { return &Body{data: content, size: int64(len(content))} }},
		{"file", func() *Body { return &Body{file: f, size: int64(len(content))} }},
	} {
		for _, rng := range []struct {
			header     string
			start, end int
		}{{"", 0, len(content)}, {"bytes=1000-60000", 1000, 60001}, {"bytes=-10", len(content) - 10, len(content)}} {
			t.Run(fmt.Sprintf("%s %q", src.desc, rng.header), func(t *testing.T) {
				bw, rec := newTestBodyWriter()
				req := httptest.NewRequest(http.MethodGet, "/f.bin", nil)
				if rng.header != "" {
					req.Header.Set("Range", rng.header)
				}
				http.ServeContent(bw, req, "f.bin", time.Time{}, src.body())
				want := content[rng.start:rng.end]
				if !bytes.Equal(rec.Body.Bytes(), want) {
					t.Fatalf("body differs: got %d bytes, want %d", rec.Body.Len(), len(want))
				}
				for i, size := range rec.Sizes {
					last := i == len(rec.Sizes)-1
					if size > DefaultChunkSize || (!last && size != DefaultChunkSize) {
						t.Fatalf("write sizes %v: want chunks of %d and a shorter last one", rec.Sizes, DefaultChunkSize)
					}
				}
				if wantWrites := (len(want) + DefaultChunkSize - 1) / DefaultChunkSize; len(rec.Sizes) != wantWrites {
					t.Fatalf("%d writes, want %d", len(rec.Sizes), wantWrites)
				}
			})
		}
	}
}

// TestBodyWriterPassesOtherReaders checks that readers that are not file
// bodies are copied unchanged through the wrapped writer.
func TestBodyWriterPassesOtherReaders(t *testing.T) {
	bw, rec := newTestBodyWriter()
	n, err := bw.ReadFrom(bytes.NewReader([]byte("plain reader")))
	if err != nil || n != 12 || rec.Body.String() != "plain reader" {
		t.Fatalf("ReadFrom = %d, %v, body %q", n, err, rec.Body.String())
	}
}

// TestBodyWriterReportsTruncation checks that a file shorter than its
// announced size is reported, not passed off as a complete body.
func TestBodyWriterReportsTruncation(t *testing.T) {
	name := harness.WriteFile(t, filepath.Join(t.TempDir(), "short"), harness.RandomBytes(t, 50_000))
	f, err := os.Open(name)
	if err != nil {
		t.Fatal(err)
	}
	defer f.Close()
	body := &Body{file: f, size: 80_000}
	bw, rec := newTestBodyWriter()
	n, err := bw.ReadFrom(&io.LimitedReader{R: body, N: 80_000})
	if err == nil || !body.truncated || n != 50_000 || rec.Body.Len() != 50_000 {
		t.Fatalf("ReadFrom = %d, %v, truncated %v; want 50000 bytes and a truncation error", n, err, body.truncated)
	}
}

// BenchmarkBodyWriter measures sending a body through Writer from
// memory and from a file; the steady state should not allocate.
func BenchmarkBodyWriter(b *testing.B) {
	for _, size := range []int{10_000, 100_000, 1 << 20} {
		content := harness.RandomBytes(b, size)
		name := filepath.Join(b.TempDir(), "f")
		if err := os.WriteFile(name, content, 0o644); err != nil {
			b.Fatal(err)
		}
		f, err := os.Open(name)
		if err != nil {
			b.Fatal(err)
		}
		b.Cleanup(func() { f.Close() })
		for _, src := range []struct {
			desc string
			body Body
		}{{"memory", Body{data: content, size: int64(size)}}, {"file", Body{file: f, size: int64(size)}}} {
			b.Run(fmt.Sprintf("%s/%d", src.desc, size), func(b *testing.B) {
				bw := &Writer{ResponseWriterWrapper: &caddyhttp.ResponseWriterWrapper{ResponseWriter: discardWriter{}}, chunkSize: DefaultChunkSize}
				lr := &io.LimitedReader{}
				body := src.body
				b.SetBytes(int64(size))
				b.ReportAllocs()
				for b.Loop() {
					body.off = 0
					lr.R, lr.N = &body, int64(size)
					if _, err := bw.ReadFrom(lr); err != nil {
						b.Fatal(err)
					}
				}
			})
		}
	}
}

// discardWriter is a ResponseWriter that drops everything.
type discardWriter struct{}

func (discardWriter) Header() http.Header         { return http.Header{} }
func (discardWriter) Write(p []byte) (int, error) { return len(p), nil }
func (discardWriter) WriteHeader(int)             {}

// TestBodyWriterCutWhileRead: a truncate in place that races a read sets
// the size, then zeroes the cut page from the new end, and the read may
// take the old size and copy those zeros, in full (TestWrongBytesUnderMutation
// once got such a body over HTTP/1.1 with TLS, its ETag and length right).
// The zeros, never the file's bytes, must not go out, and the response must
// be reported truncated: for a file that tells its size by Stat, and for
// one that tells it by SizeNow, as the open-file cache's handles do.
func TestBodyWriterCutWhileRead(t *testing.T) {
	content := harness.RandomBytes(t, 3*4096)
	const cut = 2*4096 + 100
	raced := slices.Clone(content)
	clear(raced[cut:])
	for name, file := range map[string]io.ReaderAt{
		"stat":    cutWhileRead{raced: raced, size: cut},
		"sizeNow": cutWhileReadSized{cutWhileRead{raced: raced, size: cut}},
	} {
		body := NewBody(nil, file, int64(len(content)))
		bw, rec := newTestBodyWriter()
		n, err := bw.ReadFrom(&io.LimitedReader{R: &body, N: body.Size()})
		if err == nil || !body.Truncated() || n != cut || !bytes.Equal(rec.Body.Bytes(), content[:cut]) {
			t.Errorf("%s: ReadFrom = %d, %v, truncated %v, %d zero bytes sent; want the %d bytes before the cut and a truncation error",
				name, n, err, body.Truncated(), bytes.Count(rec.Body.Bytes()[min(cut, rec.Body.Len()):], []byte{0}), cut)
		}
	}
}

// cutWhileRead is a file whose read raced a truncate to size: ReadAt
// gives raced, in full, and Stat the size after the cut.
type cutWhileRead struct {
	raced []byte
	size  int64
}

func (f cutWhileRead) ReadAt(p []byte, off int64) (int, error) { return copy(p, f.raced[off:]), nil }
func (f cutWhileRead) Stat() (fs.FileInfo, error)              { return fakeFileInfo{size: f.size}, nil }

// cutWhileReadSized tells the size after the cut by SizeNow only.
type cutWhileReadSized struct{ f cutWhileRead }

func (f cutWhileReadSized) ReadAt(p []byte, off int64) (int, error) { return f.f.ReadAt(p, off) }
func (f cutWhileReadSized) SizeNow() (int64, bool)                  { return f.f.size, true }

// TestFailedWriteClearsStreamDeadline checks that a body write that
// fails on HTTP/2 leaves no write deadline armed, as file_server's copy
// leaves none: through Caddy's idle-timeout writer, which arms one before
// each write, a deadline left on a stream the client has reset is a timer
// that holds the stream for a minute (x/net arms it after the stream
// closed). On HTTP/1.1, where the deadline is the connection's, Writer
// leaves it as Caddy's writer does.
func TestFailedWriteClearsStreamDeadline(t *testing.T) {
	content, f := growTestFile(t, 100_000)
	for _, src := range []struct {
		desc string
		body func() *Body
	}{
		{"memory", func() *Body { return &Body{data: content, size: int64(len(content))} }},
		{"file", func() *Body { return &Body{file: f, size: int64(len(content))} }},
	} {
		for _, proto := range []int{1, 2} {
			t.Run(fmt.Sprintf("%s HTTP/%d", src.desc, proto), func(t *testing.T) {
				stream := &resetStream{}
				idle := &caddyhttp.IdleTimeoutWriter{
					ResponseWriterWrapper: &caddyhttp.ResponseWriterWrapper{ResponseWriter: stream},
					Ctrl:                  http.NewResponseController(stream),
					Deadline:              caddyhttp.IdleDeadline{Start: time.Now(), Timeout: time.Minute},
					ClearBetweenWrites:    proto == 2,
				}
				req := httptest.NewRequest(http.MethodGet, "/f.bin", nil)
				req.ProtoMajor = proto
				bw := NewWriter(idle, req, DefaultChunkSize)
				n, err := bw.ReadFrom(src.body())
				if err == nil || n != 0 {
					t.Fatalf("ReadFrom over a reset stream: %d bytes, error %v; want 0 bytes and an error", n, err)
				}
				if len(stream.deadlines) == 0 {
					t.Fatal("no write deadline was set before the write")
				}
				last := stream.deadlines[len(stream.deadlines)-1]
				if proto == 2 && !last.IsZero() {
					t.Errorf("write deadline left at %v after the failed write, want none; set: %v", last, stream.deadlines)
				}
				if proto == 1 && (last.IsZero() || len(stream.deadlines) != 1) {
					t.Errorf("write deadlines set on HTTP/1.1: %v, want Caddy's one", stream.deadlines)
				}
			})
		}
	}
}

// resetStream is a response whose client has gone: every Write fails.
// It records the write deadlines set on it.
type resetStream struct {
	header    http.Header
	deadlines []time.Time
}

func (s *resetStream) Header() http.Header {
	if s.header == nil {
		s.header = http.Header{}
	}
	return s.header
}
func (s *resetStream) WriteHeader(int)           {}
func (s *resetStream) Write([]byte) (int, error) { return 0, errors.New("stream closed") }
func (s *resetStream) SetWriteDeadline(d time.Time) error {
	s.deadlines = append(s.deadlines, d)
	return nil
}
