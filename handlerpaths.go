package h2file

// The handler's less common paths, each in a function of its own so that
// ServeHTTP's stack frame stays small (see ServeHTTP): directories and
// their index files, canonical redirects, precompressed sidecars, lookup
// errors and the debug logs.

import (
	"errors"
	"fmt"
	"io/fs"
	"net/http"
	"path"
	"strconv"
	"strings"

	"github.com/caddyserver/caddy/v2"
	"github.com/caddyserver/caddy/v2/modules/caddyhttp"
	"github.com/caddyserver/caddy/v2/modules/caddyhttp/encode"
	"go.uber.org/zap"
	"go.uber.org/zap/zapcore"

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

// serveDirectory handles a request for the directory dirname: it returns
// the entry and name of its first index file that is there and not
// hidden, or answers the request itself (handled): with a listing if
// browse is on, else not found.
//
//go:noinline
func (h *Handler) serveDirectory(w http.ResponseWriter, r *http.Request, next caddyhttp.Handler, fileSystem fs.FS, fsName, dirname string, dir *cacheEntry, filesToHide []string) (entry *cacheEntry, filename string, handled bool, err error) {
	entry, filename = dir, dirname
	repl := r.Context().Value(caddy.ReplacerCtxKey).(*caddy.Replacer)
	for _, indexPage := range h.IndexNames {
		indexPath := caddyhttp.SanitizedPathJoin(dirname, repl.ReplaceAll(indexPage, ""))
		if fileHidden(indexPath, filesToHide) {
			h.logHidden("hiding index file", indexPath, filesToHide)
			continue
		}
		indexEntry, err := h.lookup(fileSystem, fsName, indexPath)
		if fdcache.IsTooManyFiles(err) {
			return nil, "", true, h.retryLater(w, indexPath, err)
		}
		if err != nil {
			continue
		}
		entry, filename = indexEntry, indexPath
		h.logFile("located index file", filename)
		break
	}
	if !entry.Info().IsDir() {
		return entry, filename, false, nil
	}

	// still a directory: a listing, or not found
	if c := h.logger.Check(zapcore.DebugLevel, "no index file in directory"); c != nil {
		c.Write(zap.String("path", filename), zap.Strings("index_filenames", h.IndexNames))
	}
	if h.Browse != nil && !fileHidden(filename, filesToHide) {
		// Caddy's file server renders the listing; with debug on, it logs
		// the path decisions above a second time
		return nil, "", true, h.fallback.ServeHTTP(w, r, next)
	}
	return nil, "", true, h.notFound(w, r, next)
}

// canonicalRedirect returns where to redirect a request whose path does
// not end as its target's does (directories with a slash, files without),
// unless the file name was rewritten, in which case a redirect could loop.
//
//go:noinline
func (h *Handler) canonicalRedirect(r *http.Request, implicitIndexFile bool) (string, bool) {
	origReq := r.Context().Value(caddyhttp.OriginalRequestCtxKey).(http.Request)
	if path.Base(origReq.URL.Path) != path.Base(r.URL.Path) {
		return "", false
	}
	// the log messages are file_server's, unbalanced parenthesis and all
	if implicitIndexFile && !strings.HasSuffix(origReq.URL.Path, "/") {
		to := origReq.URL.Path + "/"
		if c := h.logger.Check(zapcore.DebugLevel, "redirecting to canonical URI (adding trailing slash for directory"); c != nil {
			c.Write(zap.String("from_path", origReq.URL.Path), zap.String("to_path", to))
		}
		return to, true
	} else if !implicitIndexFile && strings.HasSuffix(origReq.URL.Path, "/") {
		to := origReq.URL.Path[:len(origReq.URL.Path)-1]
		if c := h.logger.Check(zapcore.DebugLevel, "redirecting to canonical URI (removing trailing slash for file"); c != nil {
			c.Write(zap.String("from_path", origReq.URL.Path), zap.String("to_path", to))
		}
		return to, true
	}
	return "", false
}

// openSidecar opens the first precompressed sidecar of filename that the
// client accepts and that is there, not hidden and a file, and sets the
// response's Content-Encoding and, unless it is a Range request,
// Content-Length. It returns the sidecar's content (nil if there is none;
// the caller closes it), its entry, and the ETag to send: etag if set,
// else the sidecar's own.
//
//go:noinline
func (h *Handler) openSidecar(w http.ResponseWriter, r *http.Request, fileSystem fs.FS, fsName, filename string, filesToHide []string, etag string) (*responseBody, *cacheEntry, string, error) {
	for _, ae := range encode.AcceptedEncodings(r, h.PrecompressedOrder) {
		precompress, ok := h.precompressors[ae]
		if !ok {
			continue
		}
		compressedFilename := filename + precompress.Suffix()
		if fileHidden(compressedFilename, filesToHide) {
			continue
		}
		compressed, err := h.lookup(fileSystem, fsName, compressedFilename)
		if err != nil || compressed.Info().IsDir() {
			if c := h.logger.Check(zapcore.DebugLevel, "precompressed file not accessible"); c != nil {
				c.Write(zap.String("filename", compressedFilename), zap.Error(err))
			}
			continue
		}
		h.logFile("opening compressed sidecar file", compressedFilename)
		body, opened, err := h.openBody(fileSystem, compressed, w)
		if err != nil {
			if c := h.logger.Check(zapcore.WarnLevel, "opening precompressed file failed"); c != nil {
				c.Write(zap.String("filename", compressedFilename), zap.Error(err))
			}
			if herr, ok := err.(caddyhttp.HandlerError); ok && herr.StatusCode == http.StatusServiceUnavailable {
				return nil, nil, "", err
			}
			continue
		}
		respHeader := w.Header()
		respHeader.Set("Content-Encoding", ae)
		// the standard library sets no Content-Length with a
		// Content-Encoding (caddy#7040); a Range request must stay 206
		if r.Header.Get("Range") == "" {
			respHeader.Set("Content-Length", strconv.FormatInt(opened.Info().Size(), 10))
		}
		if etag == "" && h.EtagFileExtensions != nil {
			if etag, err = h.etagFromFile(fileSystem, compressedFilename); err != nil {
				body.Close()
				return nil, nil, "", err
			}
		}
		// sidecars are transparent, but need an ETag of their own
		if etag == "" {
			etag = entityTag(opened)
		}
		return body, opened, etag, nil
	}
	return nil, nil, etag, nil
}

// logPathJoin logs the result of the sanitising join at debug level.
//
//go:noinline
func (h *Handler) logPathJoin(root, fsName, requestPath, filename string) {
	if c := h.logger.Check(zapcore.DebugLevel, "sanitized path join"); c != nil {
		c.Write(
			zap.String("site_root", root),
			zap.String("fs", fsName),
			zap.String("request_path", requestPath),
			zap.String("result", filename),
		)
	}
}

// logHidden logs at debug level that filename is hidden.
//
//go:noinline
func (h *Handler) logHidden(msg, filename string, filesToHide []string) {
	if c := h.logger.Check(zapcore.DebugLevel, msg); c != nil {
		c.Write(zap.String("filename", filename), zap.Strings("files_to_hide", filesToHide))
	}
}

// logFile logs msg with a filename at debug level.
//
//go:noinline
func (h *Handler) logFile(msg, filename string) {
	if c := h.logger.Check(zapcore.DebugLevel, msg); c != nil {
		c.Write(zap.String("filename", filename))
	}
}
