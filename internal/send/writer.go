package send

import (
	"context"
	"errors"
	"fmt"
	"io"
	"io/fs"
	"net/http"
	"os"
	"sync"
	"sync/atomic"
	"syscall"
	"time"

	"github.com/caddyserver/caddy/v2/modules/caddyhttp"

	"github.com/h2file/caddy-h2file/internal/coalesce"
	"github.com/h2file/caddy-h2file/internal/osfile"
)

// Body is the content of one response, read for http.ServeContent:
// from memory, or with ReadAt from a file that other requests may read at
// the same time. It knows the size the response announces, so a file that
// shrinks while it is sent shows as truncated instead of as a short body.
type Body struct {
	data []byte      // whole content, for a file held in memory
	file io.ReaderAt // otherwise read from here
	size int64       // bytes announced
	off  int64

	// truncated is set when the file gave fewer bytes than announced.
	truncated bool
}

// NewBody returns the body of a response that announces size bytes: data
// when the content is held in memory, else read from file.
func NewBody(data []byte, file io.ReaderAt, size int64) Body {
	return Body{data: data, file: file, size: size}
}

// Size returns the bytes the body announces.
func (b *Body) Size() int64 { return b.size }

// Offset returns where the next Read reads.
func (b *Body) Offset() int64 { return b.off }

// Truncated reports whether the file gave fewer bytes than announced.
func (b *Body) Truncated() bool { return b.truncated }

// ErrTruncated is returned by Body when the file ends early.
var ErrTruncated = errors.New("file shrank or failed while it was being sent")

// Read reads the next bytes of the body.
func (b *Body) Read(p []byte) (int, error) {
	if b.off >= b.size {
		return 0, io.EOF
	}
	if rem := b.size - b.off; int64(len(p)) > rem {
		p = p[:rem]
	}
	if b.data != nil {
		n := copy(p, b.data[b.off:])
		b.off += int64(n)
		return n, nil
	}
	n, err := b.file.ReadAt(p, b.off)
	if n == len(p) {
		// A truncate in place that races the read sets the size, then
		// zeroes the cut page (folio) from the new end: the read may
		// have taken the old size and copied those zeros, in full.
		// Such bytes were never the file's: the size now tells.
		if size, ok := sizeNow(b.file); ok && size < b.off+int64(n) {
			n, err = int(max(size-b.off, 0)), errors.New("cut while it was read")
		}
	}
	b.off += int64(n)
	if n < len(p) {
		b.truncated = true
		return n, fmt.Errorf("%w: read %d of %d bytes at offset %d: %v", ErrTruncated, n, len(p), b.off-int64(n), err)
	}
	return n, nil
}

// sizeNow returns the size the file r reads has now, with one fstat that
// allocates nothing where it can; false if it cannot tell.
func sizeNow(r io.ReaderAt) (int64, bool) {
	switch f := r.(type) {
	case interface{ SizeNow() (int64, bool) }:
		return f.SizeNow()
	case *os.File:
		return osfile.SizeNow(f)
	case interface{ Stat() (fs.FileInfo, error) }:
		if info, err := f.Stat(); err == nil {
			return info.Size(), true
		}
	}
	return 0, false
}

// Seek sets the offset of the next Read, as io.Seeker describes.
func (b *Body) Seek(offset int64, whence int) (int64, error) {
	switch whence {
	case io.SeekStart:
	case io.SeekCurrent:
		offset += b.off
	case io.SeekEnd:
		offset += b.size
	default:
		return 0, errors.New("Body.Seek: invalid whence")
	}
	if offset < 0 {
		return 0, errors.New("Body.Seek: negative position")
	}
	b.off = offset
	return offset, nil
}

// Writer is the response writer h2_file_server sends file bodies
// through. http.ServeContent copies the body with io.CopyN, which ends in
// ReadFrom; there, instead of 32 KiB copies that each wait for the HTTP/2
// serve loop, Writer reads the file into a pooled buffer with pread and
// writes it in chunks of chunkSize, sized so that each DATA frame fills
// one TLS record (see DefaultChunkSize). Content held in memory is written
// straight from the cache, without a copy.
//
// On HTTP/1.1 over plain TCP it hands the kernel's sendfile a file of its
// own instead, through every wrapper Caddy put around the response, so
// their deadlines and byte counts stay right.
//
// It holds no bytes back: every Write, WriteHeader and Flush goes through
// at once, so 1xx responses and streams behave as without it.
type Writer struct {
	*caddyhttp.ResponseWriterWrapper
	chunkSize int
	// sendfile opens a file of this response's own for sendfile; nil
	// where sendfile cannot be used.
	sendfile func() (*os.File, error)
	// sendfileChunk is the largest piece Caddy's idle-timeout writer hands
	// down at a time (0 if there is none).
	sendfileChunk int64
	// http1 is set for HTTP/1.x responses, whose framing net/http chooses
	// by the way the body reaches it (see copiedAsServeContent).
	http1 bool
	// http2 is set for HTTP/2 responses, whose write deadline is a timer
	// of the stream's (see clearWriteDeadline).
	http2 bool
	// ctx is the request's context; grow is the largest body write (0:
	// not looked up yet). See grow.go.
	ctx  context.Context
	grow int
	// sendingOn is the connection this response counts itself as sending
	// on, until its body is written (see growLimit)
	sendingOn *coalesce.Peer
}

// DefaultChunkSize is the body write size on HTTP/2: a DATA frame of 16375
// bytes plus its 9-byte header is exactly one 16 KiB TLS record, where a
// 16384-byte frame spills 9 bytes into a record and a write of its own.
const DefaultChunkSize = 16384 - 9

// MaxWriteChunk bounds the write_chunk setting.
const MaxWriteChunk = 16 << 20

// chunkPool holds the buffers bodies are read into.
var chunkPool = sync.Pool{New: func() any { return new([]byte) }}

// ReadFrom copies src to the response. A Body (as ServeContent passes
// it, inside an io.LimitedReader) is sent the fast way; anything else is
// copied by the wrapped writer.
func (bw *Writer) ReadFrom(src io.Reader) (int64, error) {
	body, limit := unwrapFileBody(src)
	if body == nil || bw.copiedAsServeContent() {
		return bw.ResponseWriterWrapper.ReadFrom(src)
	}
	if rem := body.size - body.off; limit > rem {
		limit = rem
	}
	if limit <= 0 {
		return 0, nil
	}
	defer bw.endSending()
	var n int64
	var err error
	switch {
	case body.data != nil:
		n, err = bw.writeMemory(body, limit)
	case bw.sendfile != nil:
		return bw.sendFile(body, limit) // through the wrappers' ReadFrom
	default:
		n, err = bw.writeChunks(body, limit)
	}
	if err != nil && bw.http2 {
		bw.clearWriteDeadline()
	}
	return n, err
}

// clearWriteDeadline clears the stream's write deadline after a body
// write failed, as Caddy's idle-timeout writer does when a ReadFrom fails
// (the path file_server's copy takes), but not when a Write does (the one
// Writer takes). That writer arms the deadline before each write; on
// HTTP/2 a deadline is a timer of the stream's, which Go's server (x/net's,
// and net/http's own on Go 1.27) stops when the stream closes, but its
// serve loop arms it anew for a stream the client has already reset, and
// then it holds the stream, its context and its request until it fires:
// write_idle_timeout, a minute by default. Under a rapid reset
// (CVE-2023-44487), where most streams are reset before their first
// write, those timers held 80-150 MiB more than file_server did in 3 s
// (integration/attack).
func (bw *Writer) clearWriteDeadline() {
	_ = http.NewResponseController(bw.ResponseWriter).SetWriteDeadline(time.Time{})
}

// copiedAsServeContent reports whether the body must reach the wrapped
// writers exactly as http.ServeContent hands it to file_server's: through
// their ReadFrom. An HTTP/1.x response without a Content-Length (a
// Content-Encoding is set and no range is served) gets its framing from
// how net/http receives the body: on plain TCP its ReadFrom sends the first
// 512 bytes, then the headers, so 512 bytes or more go out chunked, where
// the same body in one Write of up to 2048 bytes gets a Content-Length.
func (bw *Writer) copiedAsServeContent() bool {
	return bw.http1 && bw.Header().Get("Content-Length") == ""
}

// unwrapFileBody finds a Body in src and how many bytes to copy from it.
func unwrapFileBody(src io.Reader) (*Body, int64) {
	switch r := src.(type) {
	case *Body:
		return r, r.size - r.off
	case *io.LimitedReader:
		if b, ok := r.R.(*Body); ok {
			return b, r.N
		}
	}
	return nil, 0
}

// writeMemory writes n bytes of an in-memory body from where it stands,
// in writes that grow as nextChunk says.
func (bw *Writer) writeMemory(body *Body, n int64) (int64, error) {
	var written int64
	for size := bw.firstChunk(n); written < n; {
		if written > 0 {
			size = bw.nextChunk(size)
		}
		end := body.off + min(int64(size), n-written)
		m, err := bw.ResponseWriter.Write(body.data[body.off:end])
		body.off += int64(m)
		written += int64(m)
		if err != nil {
			return written, err
		}
	}
	return written, nil
}

// writeChunks reads n bytes of a file body into a pooled buffer, a chunk at
// a time, and writes each chunk with one Write; chunks grow as nextChunk
// says, within the buffer budget of grow.go.
func (bw *Writer) writeChunks(body *Body, n int64) (int64, error) {
	buf := getChunkBuffer(bw.chunkSize)
	defer func() { buf.release() }()
	var written int64
	for size := bw.firstChunk(n); written < n; {
		if written > 0 {
			size = bw.nextChunk(size)
		}
		if size > bw.chunkSize {
			buf = buf.growTo(size)
		}
		chunk := buf.bytes(int(min(int64(size), n-written)))
		r, err := body.Read(chunk)
		if r > 0 {
			m, werr := bw.ResponseWriter.Write(chunk[:r])
			written += int64(m)
			if werr != nil {
				return written, werr
			}
		}
		if err != nil {
			return written, err
		}
	}
	return written, nil
}

// sendFile sends n bytes of body with the kernel's sendfile, from a file
// opened for this response alone (sendfile moves the file offset, which a
// shared descriptor cannot allow).
func (bw *Writer) sendFile(body *Body, n int64) (int64, error) {
	f, err := bw.sendfile()
	if err != nil {
		return bw.writeChunks(body, n)
	}
	defer f.Close()
	if _, err := f.Seek(body.off, io.SeekStart); err != nil {
		return bw.writeChunks(body, n)
	}
	src := &sendfileSource{file: f, end: body.off + n, minChunk: bw.sendfileChunk}
	var reader io.Reader = src
	if bw.sendfileChunk == 0 {
		// nothing in the chain limits the copy: one LimitedReader tells
		// the kernel where to stop
		reader = &io.LimitedReader{R: src, N: n}
	}
	written, err := bw.ResponseWriterWrapper.ReadFrom(reader)
	body.off += written
	if err == nil && written < n {
		// the file ended early: a short body must not look complete
		body.truncated = true
		err = ErrTruncated
	}
	return written, err
}

// sendfileSource is a file that the kernel's sendfile may read from while
// at least minChunk bytes remain before end. Caddy's idle-timeout writer
// wraps what it copies in an io.LimitedReader of minChunk bytes, and the
// sendfile path honours that one limit only, so it must never see a file
// with fewer bytes left than that: then SyscallConn fails, and the rest is
// copied through Read, which stops at end.
type sendfileSource struct {
	file     *os.File
	end      int64
	minChunk int64
}

// remaining returns the bytes left before end, from the file's offset
// (which sendfile moves).
func (s *sendfileSource) remaining() int64 {
	off, err := s.file.Seek(0, io.SeekCurrent)
	if err != nil {
		return 0
	}
	return s.end - off
}

// Read reads up to end.
func (s *sendfileSource) Read(p []byte) (int, error) {
	rem := s.remaining()
	if rem <= 0 {
		return 0, io.EOF
	}
	if int64(len(p)) > rem {
		p = p[:rem]
	}
	return s.file.Read(p)
}

// SyscallConn gives sendfile the file while a whole chunk remains.
func (s *sendfileSource) SyscallConn() (syscall.RawConn, error) {
	if s.remaining() < max(s.minChunk, 1) {
		return nil, errors.New("too little left for sendfile")
	}
	sendfileHandoffs.Add(1)
	return s.file.SyscallConn()
}

// Stats are counts of what the writers did, for tests.
type Stats struct {
	SendfileHandoffs int64 // files handed to the kernel's sendfile
	GrownBytes       int64 // memory in grown buffers handed out now
}

// ReadStats returns the current counts.
func ReadStats() Stats {
	return Stats{SendfileHandoffs: sendfileHandoffs.Load(), GrownBytes: grownBytes.Load()}
}

// sendfileHandoffs counts the times a file was handed to the kernel's
// sendfile path; tests read it.
var sendfileHandoffs atomic.Int64

// EnableSendfile lets the writer send file bodies with the kernel's
// sendfile (HTTP/1.1 over plain TCP): open opens a file of the response's
// own, or fails when that file is no longer the one the headers describe;
// maxChunk is the largest piece Caddy's idle-timeout writer hands down at
// a time (0 if there is none).
func (bw *Writer) EnableSendfile(open func() (*os.File, error), maxChunk int64) {
	bw.sendfile, bw.sendfileChunk = open, maxChunk
}

// FlushError sends what the wrapped writers hold; Writer holds nothing.
func (bw *Writer) FlushError() error {
	return http.NewResponseController(bw.ResponseWriter).Flush()
}

// Interface guards
var (
	_ http.ResponseWriter                       = (*Writer)(nil)
	_ io.ReaderFrom                             = (*Writer)(nil)
	_ interface{ FlushError() error }           = (*Writer)(nil)
	_ interface{ Unwrap() http.ResponseWriter } = (*Writer)(nil)
	_ syscall.Conn                              = (*sendfileSource)(nil)
)
