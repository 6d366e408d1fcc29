package fdcache

import (
	"io"
	"io/fs"
	"os"

	"github.com/h2file/caddy-h2file/internal/osfile"
)

// NewUnlisted returns an entry the cache does not keep, for name in the
// file system fsName as info describes it: what a lookup returns without
// a cache, or for a file found replaced when it was opened. Open gives no
// handle for it: the caller opens the file itself.
func NewUnlisted[M any](fsName, name string, info fs.FileInfo, meta M) *Entry[M] {
	return &Entry[M]{key: key{fs: fsName, name: name}, info: info, meta: meta, unlisted: true}
}

// Name returns the path the entry was looked up by.
func (e *Entry[M]) Name() string { return e.key.name }

// Info returns the path's FileInfo: of the file open in the entry, for a
// regular file. It is nil for a missing path.
func (e *Entry[M]) Info() fs.FileInfo { return e.info }

// Meta returns the owner's metadata of a regular file, as Describe made
// it; the caller must not change it.
func (e *Entry[M]) Meta() *M { return &e.meta }

// Open returns a handle on the entry's content, held in memory or in an
// open descriptor shared with other requests, which stays open until the
// handle is closed. It fails when the cache holds no content for the entry
// (not a regular file, not kept, or dropped meanwhile): the caller opens
// the file itself.
func (e *Entry[M]) Open() (Handle, bool) {
	if e.data != nil {
		return Handle{data: e.data, size: e.info.Size()}, true
	}
	if e.file != nil && e.acquire() {
		return Handle{file: e.file, size: e.info.Size(), held: e}, true
	}
	return Handle{}, false
}

// releaseHandle lets go of the reference a handle took.
func (e *Entry[M]) releaseHandle() { e.owner.release(e) }

// releaser is an entry a handle holds a reference to.
type releaser interface{ releaseHandle() }

// Handle is one response's hold on an entry's content: bytes in memory, or
// a descriptor read with ReadAt (so that any number of responses read it at
// once), closed only when the last handle and the cache let go of it.
type Handle struct {
	data []byte
	file *os.File
	size int64
	held releaser // nil: nothing to let go
}

// Size returns the content's size, as the entry's FileInfo gives it. A file
// that shrinks in place afterwards gives fewer bytes.
func (h *Handle) Size() int64 { return h.size }

// Bytes returns the content when it is held in memory, else nil.
func (h *Handle) Bytes() []byte { return h.data }

// ReadAt reads the content at off, as io.ReaderAt does.
func (h *Handle) ReadAt(p []byte, off int64) (int, error) {
	if h.file != nil {
		return h.file.ReadAt(p, off)
	}
	if off >= int64(len(h.data)) {
		return 0, io.EOF
	}
	n := copy(p, h.data[off:])
	if n < len(p) {
		return n, io.EOF
	}
	return n, nil
}

// SizeNow returns the size of the content now: what a file that is
// truncated while a response reads it has left (one fstat, no
// allocation), or the size of content held in memory, which never changes.
func (h *Handle) SizeNow() (int64, bool) {
	if h.file != nil {
		return osfile.SizeNow(h.file)
	}
	return int64(len(h.data)), true
}

// Unchanged reports whether the content is still what info describes:
// always for content held in memory; for an open file, by one fstat (see
// SameFile), so that what was read from it can be trusted to be that
// version's bytes.
func (h *Handle) Unchanged(info fs.FileInfo) bool {
	if h.file == nil {
		return h.data != nil
	}
	now, err := h.file.Stat()
	return err == nil && SameFile(info, now)
}

// Close lets go of the content; the handle reads nothing afterwards.
func (h *Handle) Close() error {
	if h.held != nil {
		h.held.releaseHandle()
		h.held = nil
	}
	h.data, h.file = nil, nil
	return nil
}

// Remove drops e from the cache, if it is still listed: its file is
// no longer what e describes (it shrank while it was sent).
func (c *Cache[M]) Remove(e *Entry[M]) { c.remove(e) }

// RecheckAll makes every entry be checked against the file system again
// before its next use. A config load that reuses this cache calls it, so
// that nothing the previous config's cache believed is served unchecked.
func (c *Cache[M]) RecheckAll() { c.generation.Add(1) }

var _ io.ReaderAt = (*Handle)(nil)

// FS returns the name of the file system the entry was looked up in.
func (e *Entry[M]) FS() string { return e.key.fs }
