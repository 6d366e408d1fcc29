package h2file

import (
	"errors"
	"io/fs"
	weakrand "math/rand/v2"
	"net/http"
	"strconv"
	"strings"
	"syscall"

	"github.com/caddyserver/caddy/v2/modules/caddyhttp"
	"go.uber.org/zap"
	"go.uber.org/zap/zapcore"
)

// openFile opens filename. On failure it returns a caddyhttp.HandlerError
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
		return nil, caddyhttp.Error(http.StatusNotFound, err)
	case errors.Is(err, fs.ErrPermission):
		return nil, caddyhttp.Error(http.StatusForbidden, err)
	}
	// under load and out of file descriptors? a random wait helps prevent
	// a stampede
	backoff := weakrand.IntN(maxBackoff-minBackoff) + minBackoff //nolint:gosec
	w.Header().Set("Retry-After", strconv.Itoa(backoff))
	if c := h.logger.Check(zapcore.DebugLevel, "retry after backoff"); c != nil {
		c.Write(zap.String("filename", filename), zap.Int("backoff", backoff), zap.Error(err))
	}
	return nil, caddyhttp.Error(http.StatusServiceUnavailable, err)
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
