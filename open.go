package h2file

import (
	"errors"
	"fmt"
	"io"
	"io/fs"
	weakrand "math/rand/v2"
	"net/http"
	"strconv"
	"strings"
	"syscall"
	"time"

	"github.com/caddyserver/caddy/v2/modules/caddyhttp"
	"go.uber.org/zap"
	"go.uber.org/zap/zapcore"

	"github.com/h2file/caddy-h2file/internal/fdcache"
	"github.com/h2file/caddy-h2file/internal/send"
)

// openFile opens filename without the cache. On failure it returns a caddyhttp.HandlerError
// with file_server's status: 404 for a missing file, 403 for a permission
// error, and 503 with a jittered Retry-After for anything else (such as
// running out of file descriptors).
func (h *Handler) openFile(fileSystem fs.FS, filename string, w http.ResponseWriter) (fs.File, error) {
	file, err := fileSystem.Open(filename)
	if err == nil {
		return file, nil
	}
	err = mapDirOpenError(fileSystem, err, filename)
	switch {
	case errors.Is(err, fs.ErrNotExist):
		if c := h.logger.Check(zapcore.DebugLevel, "file not found"); c != nil {
			c.Write(zap.String("filename", filename), zap.Error(err))
		}
		return nil, caddyhttp.Error(http.StatusNotFound, err)
	case errors.Is(err, fs.ErrPermission):
		if c := h.logger.Check(zapcore.DebugLevel, "permission denied"); c != nil {
			c.Write(zap.String("filename", filename), zap.Error(err))
		}
		return nil, caddyhttp.Error(http.StatusForbidden, err)
	}
	return nil, h.retryLater(w, filename, err)
}

// retryLater returns a 503 error with a jittered Retry-After header, for
// a server under load and out of file descriptors: the random wait helps
// prevent a stampede.
func (h *Handler) retryLater(w http.ResponseWriter, filename string, err error) error {
	backoff := weakrand.IntN(maxBackoff-minBackoff) + minBackoff //nolint:gosec
	w.Header().Set("Retry-After", strconv.Itoa(backoff))
	if c := h.logger.Check(zapcore.DebugLevel, "retry after backoff"); c != nil {
		c.Write(zap.String("filename", filename), zap.Int("backoff", backoff), zap.Error(err))
	}
	return caddyhttp.Error(http.StatusServiceUnavailable, err)
}

// mapDirOpenError turns errors from opening a path below a regular file
// (e.g. /index.html/foo) into fs.ErrNotExist, as net/http and file_server
// do (golang/go#18984).
func mapDirOpenError(fileSystem fs.FS, originalErr error, name string) error {
	if errors.Is(originalErr, fs.ErrNotExist) || errors.Is(originalErr, fs.ErrPermission) {
		return originalErr
	}
	if errors.Is(originalErr, syscall.ENOTDIR) {
		return fs.ErrNotExist
	}
	var pathErr *fs.PathError
	if errors.As(originalErr, &pathErr) {
		return fs.ErrInvalid
	}
	parts := strings.Split(name, separator)
	for i := range parts {
		if parts[i] == "" {
			continue
		}
		fi, err := fs.Stat(fileSystem, strings.Join(parts[:i+1], separator))
		if err != nil {
			return originalErr
		}
		if !fi.IsDir() {
			return fs.ErrNotExist
		}
	}
	return originalErr
}

const minBackoff, maxBackoff = 2, 5

// lookup returns what is known about name in fileSystem, for a request
// whose handler began at since: from the open-file cache, or from a stat
// when the cache is off. The error is fs.Stat's. The entry reflects every
// change to the file completed before since (fdcache's LookupSince), and
// so whatever Caddy's matchers saw of the file system before the handler
// (try_files' stat), while concurrent requests, and the lookups of one
// request (a file, its sidecar, an index file), share one read of the
// kernel's event queue (a system call) instead of one each. Not the time
// the request was read: a change between then and the handler (a request
// queued, a slow upstream before an error page) would be missed where a
// matcher already saw it.
func (h *Handler) lookup(since time.Time, fileSystem fs.FS, fsName, name string) (*cacheEntry, error) {
	if h.cache != nil {
		if c := h.logger.Check(zapcore.DebugLevel, "open-file cache lookup"); c != nil {
			return h.cache.LookupLogged(c, since, fileSystem, fsName, name)
		}
		return h.cache.LookupSince(since, fileSystem, fsName, name)
	}
	info, err := fs.Stat(fileSystem, name)
	if err != nil {
		return nil, err
	}
	return unlistedEntry(fsName, name, info), nil
}

// unlistedEntry returns an entry for name that no cache keeps.
func unlistedEntry(fsName, name string, info fs.FileInfo) *cacheEntry {
	var meta fileMeta
	if !info.IsDir() {
		meta = describeFile(name, info)
	}
	return fdcache.NewUnlisted(fsName, name, info, meta)
}

// entityTag returns file_server's ETag for the entry's file.
func entityTag(e *cacheEntry) string {
	if etag := e.Meta().etag; etag != "" {
		return etag
	}
	return calculateEtag(e.Info())
}

// responseBody is the content a response sends, with what must be let go
// when the response is done.
type responseBody struct {
	reader io.ReadSeeker
	body   *send.Body // reader, when it knows its size; nil otherwise
	file   send.Body  // what body points to

	held  fdcache.Handle // content the cache holds for this response
	owned fs.File        // file opened for this response alone
}

// openBody returns a reader for e's content: from memory or a cached
// descriptor when the cache has them, else from a file opened for this
// response (with file_server's errors, see openFile). It also returns the
// entry the response must describe: e, or, when the path opened now is no
// longer the file e's stat saw (replaced between the two), an entry for the
// file that was opened, so that the headers always describe the bytes sent.
// The body is made in rb, the response's storage (scratch.go).
func (h *Handler) openBody(fileSystem fs.FS, e *cacheEntry, w http.ResponseWriter, rb *responseBody) (*responseBody, *cacheEntry, error) {
	if held, ok := e.Open(); ok {
		*rb = responseBody{held: held}
		rb.setBody(send.NewBody(rb.held.Bytes(), &rb.held, rb.held.Size()))
		return rb, e, nil
	}
	file, err := h.openFile(fileSystem, e.Name(), w)
	if err != nil {
		return nil, nil, err
	}
	e = reopened(e, file)
	if ra, ok := file.(io.ReaderAt); ok {
		*rb = responseBody{owned: file}
		rb.setBody(send.NewBody(nil, ra, e.Info().Size()))
		return rb, e, nil
	}
	rs, ok := file.(io.ReadSeeker)
	if !ok {
		file.Close()
		return nil, nil, caddyhttp.Error(http.StatusInternalServerError, fmt.Errorf("file %s is not seekable", e.Name()))
	}
	*rb = responseBody{reader: rs, owned: file}
	return rb, e, nil
}

// reopened returns the entry that describes file, just opened at e's path:
// e itself if it is still the file e's stat saw (or either is not a regular
// file, or the opened one cannot be stat'ed: then file_server's own checks
// decide), else a new, unlisted entry with the opened file's FileInfo. A
// file renamed over, or deleted and created again, between the stat and the
// open would otherwise go out with the old file's size and ETag: a Range
// answered with the old size's Content-Range, a body cut or padded.
func reopened(e *cacheEntry, file fs.File) *cacheEntry {
	info, err := file.Stat()
	if err != nil || !info.Mode().IsRegular() || !e.Info().Mode().IsRegular() || fdcache.SameFile(e.Info(), info) {
		return e
	}
	return fdcache.NewUnlisted(e.FS(), e.Name(), info, describeFile(e.Name(), info))
}

// setBody makes rb read b, held in rb's own allocation.
func (rb *responseBody) setBody(b send.Body) {
	rb.file = b
	rb.body = &rb.file
	rb.reader = rb.body
}

// truncated reports whether the file ended before the announced size.
func (rb *responseBody) truncated() bool {
	return rb.body != nil && rb.body.Truncated()
}

// Close lets go of the file.
func (rb *responseBody) Close() error {
	rb.held.Close()
	if rb.owned != nil {
		err := rb.owned.Close()
		rb.owned = nil
		return err
	}
	return nil
}
