package send

import (
	"net/http"
	"sync"
	"sync/atomic"

	"github.com/caddyserver/caddy/v2/modules/caddyhttp"

	"github.com/h2file/caddy-h2file/internal/coalesce"
)

// How body writes grow. Without the coalesce listener wrapper, every write
// of a response is write_chunk (16375 bytes by default: one DATA frame in
// one TLS record). On a connection that the wrapper batches, a body larger
// than write_chunk starts with a write of four times that, and each
// following write is twice the previous one, up to the connection's grow
// limit (see growLimit; at most maxGrownChunk). The serve loop sends the
// first frame of a write as soon as it has it, so a larger first write
// delays the first bytes only by the time of one pread, and every handler
// write costs a round trip through x/net's serve loop (and two
// write-deadline updates by Caddy's idle-timeout writer), so fewer, larger
// writes keep the serve loop supplied. Against a client with small flow
// control windows they do not: each write is sent a window at a time
// anyway, and the stream idles while its next chunk is read (see
// peerWindows for the figures), so writes grow only as far as a quarter of
// the client's smaller window. Without the wrapper, writes stay at
// write_chunk: x/net cuts larger ones into 16384-byte frames, each of which
// then takes a full TLS record and a 9-byte one, in two socket writes; the
// wrapper batches those.
//
// Memory stays bounded: a grown write from a file needs a buffer of
// grownMedium or maxGrownChunk bytes, taken from a budget of MaxGrownBytes
// for the whole process; a response that finds the budget used up goes on
// with the buffer it has. Bodies held in memory grow without a buffer.
const (
	maxGrownChunk = 16 * DefaultChunkSize // 262000 bytes
	MaxGrownBytes = 32 << 20
)

// grownBytes is the memory in grown buffers handed out, counted at their
// class size.
var grownBytes atomic.Int64

// Grown buffers come in two classes: medium ones for writes of up to
// grownMedium bytes (four times the default write_chunk fits), so that
// many streams sending at once can each have one, and large ones of
// maxGrownChunk.
const grownMedium = 64 << 10

var (
	grownPoolMedium = sync.Pool{New: func() any { b := make([]byte, grownMedium); return &b }}
	grownPool       = sync.Pool{New: func() any { b := make([]byte, maxGrownChunk); return &b }}
)

// NewWriter makes the body writer of a response to r, with its
// wrapper in the same allocation.
func NewWriter(w http.ResponseWriter, r *http.Request, chunkSize int) *Writer {
	return new(WriterStorage).Init(w, r, chunkSize)
}

// WriterStorage is a Writer and its wrapper, for a caller that allocates
// them with the rest of a response's state.
type WriterStorage struct {
	bw  Writer
	rww caddyhttp.ResponseWriterWrapper
}

// Init makes the Writer in s the body writer of a response to r and
// returns it.
func (s *WriterStorage) Init(w http.ResponseWriter, r *http.Request, chunkSize int) *Writer {
	s.rww.ResponseWriter = w
	s.bw = Writer{ResponseWriterWrapper: &s.rww, chunkSize: chunkSize, http1: r.ProtoMajor == 1, http2: r.ProtoMajor == 2, ctx: r.Context()}
	return &s.bw
}

// firstChunk returns the size of the first write of an n-byte body:
// write_chunk, or where writes grow (see growLimit), for a body larger than
// that, four times write_chunk.
func (bw *Writer) firstChunk(n int64) int {
	if n <= int64(bw.chunkSize) {
		return bw.chunkSize
	}
	if first := 4 * bw.chunkSize; first <= bw.growLimit() {
		return first
	}
	return bw.chunkSize
}

// nextChunk returns the size of the body write after one of cur bytes.
func (bw *Writer) nextChunk(cur int) int {
	if next := 2 * cur; cur > bw.chunkSize && next <= bw.growLimit() {
		return next
	}
	return cur
}

// growLimit returns the largest body write of this response:
//   - HTTP/1.x through the coalesce wrapper (no flow control but TCP's):
//     four times write_chunk. Writes of maxGrownChunk held 6-15 MiB more
//     than file_server did, in their buffers, against clients that reset
//     their connections mid-response (integration/attack), where writes of
//     65500 bytes held what file_server did, and did 1 MB downloads within
//     the noise of the larger ones.
//   - HTTP/2 through the wrapper above TLS: a quarter of the smaller of
//     the client's windows, and at most maxGrownChunk divided by the
//     bodies the connection is sending when this one starts (but four
//     times write_chunk when the windows allow: with 32 streams on each of
//     8 connections, writes that grew to 262000 bytes did 6% fewer 1 MB
//     requests a second than writes of 65500).
//   - what the server under Caddy's wrappers asks for, if it says
//     (bodyWriteSize: h2file's HTTP/2 engine), at most maxGrownChunk.
//   - write_chunk anywhere else: without the wrapper, and with HTTP/2
//     through the wrapper below TLS, which cannot read the client's
//     windows.
//
// Looked up once per response, when the first write is sized.
func (bw *Writer) growLimit() int {
	if bw.grow == 0 {
		bw.grow = bw.chunkSize
		if size, ok := bodyWriteSize(bw.ResponseWriter); ok {
			// a server that says how large its writes should be: h2file's
			// HTTP/2 engine, which frames and batches a write itself
			bw.grow = min(size, maxGrownChunk)
		} else if bw.ctx != nil {
			if a, ok := coalesce.AddrFrom(bw.ctx); ok {
				if bw.http1 {
					bw.grow = min(4*bw.chunkSize, maxGrownChunk)
				} else if window, known := a.Peer().SmallestWindow(); known {
					// the streams sending at once share maxGrownChunk
					bw.sendingOn = a.Peer()
					share := max(maxGrownChunk/int64(a.Peer().StartBody()), int64(4*bw.chunkSize))
					bw.grow = int(min(window/4, share, maxGrownChunk))
				}
			}
		}
		bw.grow = max(bw.grow, bw.chunkSize)
	}
	return bw.grow
}

// endSending tells the connection that this response's body is sent (see
// peerWindows.sending).
func (bw *Writer) endSending() {
	if bw.sendingOn != nil {
		bw.sendingOn.EndBody()
		bw.sendingOn = nil
	}
}

// chunkBuffer is the buffer a file body is read into: a write_chunk one
// from chunkPool, or a grown one (class 1: medium, 2: large) from its pool
// within the budget.
type chunkBuffer struct {
	p     *[]byte
	class int8
}

// getChunkBuffer returns a buffer of at least size bytes.
func getChunkBuffer(size int) chunkBuffer {
	p := chunkPool.Get().(*[]byte)
	if cap(*p) < size {
		*p = make([]byte, size)
	}
	return chunkBuffer{p: p}
}

// growTo returns a buffer for writes of size bytes: b itself if it is large
// enough, else a grown buffer of the class size needs if the budget allows
// (b is then given back), else b.
func (b chunkBuffer) growTo(size int) chunkBuffer {
	if cap(*b.p) >= size || size > maxGrownChunk {
		return b
	}
	class, classSize, pool := int8(1), int64(grownMedium), &grownPoolMedium
	if size > grownMedium {
		class, classSize, pool = 2, maxGrownChunk, &grownPool
	}
	if b.class >= class {
		return b
	}
	if grownBytes.Add(classSize) > MaxGrownBytes {
		grownBytes.Add(-classSize)
		return b
	}
	b.release()
	return chunkBuffer{p: pool.Get().(*[]byte), class: class}
}

// bytes returns the buffer cut to at most n bytes.
func (b chunkBuffer) bytes(n int) []byte {
	return (*b.p)[:min(n, cap(*b.p))]
}

// release gives the buffer back.
func (b chunkBuffer) release() {
	switch b.class {
	case 1:
		grownPoolMedium.Put(b.p)
		grownBytes.Add(-grownMedium)
	case 2:
		grownPool.Put(b.p)
		grownBytes.Add(-maxGrownChunk)
	default:
		chunkPool.Put(b.p)
	}
}

// bodyWriteSizer is a response writer that says how large the body writes
// it is given should be (h2file's HTTP/2 engine: internal/h2's
// responseWriter), found under Caddy's wrappers by their Unwrap.
type bodyWriteSizer interface{ BodyWriteSize() int }

// bodyWriteSize asks the first writer in w's Unwrap chain that says.
func bodyWriteSize(w http.ResponseWriter) (int, bool) {
	for w != nil {
		if s, ok := w.(bodyWriteSizer); ok {
			return s.BodyWriteSize(), true
		}
		u, ok := w.(interface{ Unwrap() http.ResponseWriter })
		if !ok {
			return 0, false
		}
		w = u.Unwrap()
	}
	return 0, false
}
