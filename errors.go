package h2file

// The request's error answers, as file_server gives them. Each is a
// function of its own, kept out of line, so that ServeHTTP's stack frame
// stays small (see reserveStack).

import (
	"errors"
	"fmt"
	"io/fs"
	"net/http"
	"strings"

	"github.com/caddyserver/caddy/v2/modules/caddyhttp"

	"github.com/h2file/caddy-h2file/internal/fdcache"
)

// windowsPathProblem rejects paths with Alternate Data Streams or 8.3
// short names, which could bypass file hiding.
//
//go:noinline
func windowsPathProblem(urlPath string) error {
	if strings.Contains(urlPath, ":") {
		return caddyhttp.Error(http.StatusBadRequest, fmt.Errorf("illegal ADS path"))
	}
	if caddyhttp.HasWindowsShortName(urlPath) {
		return caddyhttp.Error(http.StatusBadRequest, fmt.Errorf("illegal short name"))
	}
	return nil
}

// errFilesystemNotFound is file_server's error for an unknown file system.
//
//go:noinline
func errFilesystemNotFound() error {
	return caddyhttp.Error(http.StatusNotFound, fmt.Errorf("filesystem not found"))
}

// methodNotAllowed is the error for a method other than GET or HEAD.
//
//go:noinline
func methodNotAllowed(respHeader http.Header) error {
	respHeader.Add("Allow", "GET, HEAD")
	return caddyhttp.Error(http.StatusMethodNotAllowed, nil)
}

// lookupFailed answers a request whose file could not be looked up, with
// file_server's status for the error.
//
//go:noinline
func (h *Handler) lookupFailed(w http.ResponseWriter, r *http.Request, next caddyhttp.Handler, fileSystem fs.FS, filename string, err error) error {
	if fdcache.IsTooManyFiles(err) {
		// Caddy's file systems stat by opening: out of descriptors is not
		// a bad request (file_server answers 400)
		return h.retryLater(w, filename, err)
	}
	err = mapDirOpenError(fileSystem, err, filename)
	switch {
	case errors.Is(err, fs.ErrNotExist):
		return h.notFound(w, r, next)
	case errors.Is(err, fs.ErrInvalid):
		return caddyhttp.Error(http.StatusBadRequest, err)
	case errors.Is(err, fs.ErrPermission):
		return caddyhttp.Error(http.StatusForbidden, err)
	}
	return caddyhttp.Error(http.StatusInternalServerError, err)
}
