package h2file

import (
	"errors"
	"fmt"
	"io"
	"io/fs"
	"net/http"
	"os"
	"path"
	"runtime"
	"strconv"
	"strings"

	"github.com/caddyserver/caddy/v2"
	"github.com/caddyserver/caddy/v2/modules/caddyhttp"
	"github.com/caddyserver/caddy/v2/modules/caddyhttp/encode"
	"go.uber.org/zap"
	"go.uber.org/zap/zapcore"
)

// ServeHTTP serves the file the request maps to. It makes the same
// decisions as Caddy's file_server, in the same order, so that every
// response is the same.
func (h *Handler) ServeHTTP(w http.ResponseWriter, r *http.Request, next caddyhttp.Handler) error {
	repl := r.Context().Value(caddy.ReplacerCtxKey).(*caddy.Replacer)

	if runtime.GOOS == "windows" {
		// paths with Alternate Data Streams or 8.3 short names could bypass
		// file hiding
		if strings.Contains(r.URL.Path, ":") {
			return caddyhttp.Error(http.StatusBadRequest, fmt.Errorf("illegal ADS path"))
		}
		if caddyhttp.HasWindowsShortName(r.URL.Path) {
			return caddyhttp.Error(http.StatusBadRequest, fmt.Errorf("illegal short name"))
		}
	}

	filesToHide := h.transformHidePaths(repl)
	root := repl.ReplaceAll(h.Root, ".")
	fsName := repl.ReplaceAll(h.FileSystem, "")
	fileSystem, ok := h.fsmap.Get(fsName)
	if !ok {
		return caddyhttp.Error(http.StatusNotFound, fmt.Errorf("filesystem not found"))
	}

	// a trailing slash breaks fs.ValidPath
	filename := strings.TrimSuffix(caddyhttp.SanitizedPathJoin(root, r.URL.Path), "/")
	if c := h.logger.Check(zapcore.DebugLevel, "sanitized path join"); c != nil {
		c.Write(
			zap.String("site_root", root),
			zap.String("fs", fsName),
			zap.String("request_path", r.URL.Path),
			zap.String("result", filename),
		)
	}

	entry, err := h.lookup(fileSystem, fsName, filename)
	if err != nil {
		if isTooManyFiles(err) {
			// Caddy's file systems stat by opening: out of descriptors
			// is not a bad request (file_server answers 400)
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

	// a directory: look for an index file to serve
	var implicitIndexFile bool
	if entry.info.IsDir() && len(h.IndexNames) > 0 {
		for _, indexPage := range h.IndexNames {
			indexPath := caddyhttp.SanitizedPathJoin(filename, repl.ReplaceAll(indexPage, ""))
			if fileHidden(indexPath, filesToHide) {
				if c := h.logger.Check(zapcore.DebugLevel, "hiding index file"); c != nil {
					c.Write(zap.String("filename", indexPath), zap.Strings("files_to_hide", filesToHide))
				}
				continue
			}
			indexEntry, err := h.lookup(fileSystem, fsName, indexPath)
			if isTooManyFiles(err) {
				return h.retryLater(w, indexPath, err)
			}
			if err != nil {
				continue
			}
			entry = indexEntry
			filename = indexPath
			implicitIndexFile = true
			if c := h.logger.Check(zapcore.DebugLevel, "located index file"); c != nil {
				c.Write(zap.String("filename", filename))
			}
			break
		}
	}

	// still a directory: a listing, or not found
	if entry.info.IsDir() {
		if c := h.logger.Check(zapcore.DebugLevel, "no index file in directory"); c != nil {
			c.Write(zap.String("path", filename), zap.Strings("index_filenames", h.IndexNames))
		}
		if h.Browse != nil && !fileHidden(filename, filesToHide) {
			// Caddy's file server renders the listing; with debug on, it
			// logs the path decisions above a second time
			return h.fallback.ServeHTTP(w, r, next)
		}
		return h.notFound(w, r, next)
	}

	if fileHidden(filename, filesToHide) {
		if c := h.logger.Check(zapcore.DebugLevel, "hiding file"); c != nil {
			c.Write(zap.String("filename", filename), zap.Strings("files_to_hide", filesToHide))
		}
		return h.notFound(w, r, next)
	}

	// directories end with a slash, files do not; unless the file name was
	// rewritten, in which case a redirect could loop
	if h.CanonicalURIs == nil || *h.CanonicalURIs {
		origReq := r.Context().Value(caddyhttp.OriginalRequestCtxKey).(http.Request)
		if path.Base(origReq.URL.Path) == path.Base(r.URL.Path) {
			// the log messages are file_server's, unbalanced parenthesis
			// and all
			if implicitIndexFile && !strings.HasSuffix(origReq.URL.Path, "/") {
				to := origReq.URL.Path + "/"
				if c := h.logger.Check(zapcore.DebugLevel, "redirecting to canonical URI (adding trailing slash for directory"); c != nil {
					c.Write(zap.String("from_path", origReq.URL.Path), zap.String("to_path", to))
				}
				return redirect(w, r, to)
			} else if !implicitIndexFile && strings.HasSuffix(origReq.URL.Path, "/") {
				to := origReq.URL.Path[:len(origReq.URL.Path)-1]
				if c := h.logger.Check(zapcore.DebugLevel, "redirecting to canonical URI (removing trailing slash for file"); c != nil {
					c.Write(zap.String("from_path", origReq.URL.Path), zap.String("to_path", to))
				}
				return redirect(w, r, to)
			}
		}
	}

	respHeader := w.Header()
	// a header set by an earlier handler wins over the computed ETag
	etag := respHeader.Get("Etag")

	// caches need Vary even when no sidecar is served (caddy#5849)
	respHeader.Add("Vary", "Accept-Encoding")

	var content *responseBody
	// the sidecar, or the file itself, whose content is sent
	sent := entry
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
		if err != nil || compressed.info.IsDir() {
			if c := h.logger.Check(zapcore.DebugLevel, "precompressed file not accessible"); c != nil {
				c.Write(zap.String("filename", compressedFilename), zap.Error(err))
			}
			continue
		}
		if c := h.logger.Check(zapcore.DebugLevel, "opening compressed sidecar file"); c != nil {
			c.Write(zap.String("filename", compressedFilename))
		}
		body, opened, err := h.openBody(fileSystem, compressed, w)
		if err != nil {
			if c := h.logger.Check(zapcore.WarnLevel, "opening precompressed file failed"); c != nil {
				c.Write(zap.String("filename", compressedFilename), zap.Error(err))
			}
			if herr, ok := err.(caddyhttp.HandlerError); ok && herr.StatusCode == http.StatusServiceUnavailable {
				return err
			}
			continue
		}
		defer body.Close()
		compressed = opened
		sent = compressed
		respHeader.Set("Content-Encoding", ae)
		// the standard library sets no Content-Length with a
		// Content-Encoding (caddy#7040); a Range request must stay 206
		if r.Header.Get("Range") == "" {
			respHeader.Set("Content-Length", strconv.FormatInt(compressed.info.Size(), 10))
		}
		if etag == "" && h.EtagFileExtensions != nil {
			etag, err = h.etagFromFile(fileSystem, compressedFilename)
			if err != nil {
				return err
			}
		}
		// sidecars are transparent, but need an ETag of their own
		if etag == "" {
			etag = compressed.entityTag()
		}
		content = body
		break
	}

	if content == nil {
		if c := h.logger.Check(zapcore.DebugLevel, "opening file"); c != nil {
			c.Write(zap.String("filename", filename))
		}
		body, opened, err := h.openBody(fileSystem, entry, w)
		if err != nil {
			if herr, ok := err.(caddyhttp.HandlerError); ok && herr.StatusCode == http.StatusNotFound {
				return h.notFound(w, r, next)
			}
			return err
		}
		defer body.Close()
		entry, sent = opened, opened
		if etag == "" && h.EtagFileExtensions != nil {
			etag, err = h.etagFromFile(fileSystem, filename)
			if err != nil {
				return err
			}
		}
		if etag == "" {
			etag = entry.entityTag()
		}
		content = body
	}

	// static files answer only GET and HEAD, except when rendering an
	// error page (caddy#5166, caddy#5703)
	if r.Method != http.MethodGet && r.Method != http.MethodHead {
		if _, ok := r.Context().Value(caddyhttp.ErrorCtxKey).(error); !ok {
			respHeader.Add("Allow", "GET, HEAD")
			return caddyhttp.Error(http.StatusMethodNotAllowed, nil)
		}
	}

	if etag != "" {
		respHeader.Set("Etag", etag)
	}
	setContentType(respHeader, entry.mimeType(filename))

	statusCodeOverride, err := h.statusOverride(r, repl)
	if err != nil {
		return err
	}
	if statusCodeOverride > 0 {
		w = statusOverrideResponseWriter{ResponseWriter: w, code: statusCodeOverride}
	}
	bw := newBodyWriter(w, r, int(h.WriteChunk))
	if r.ProtoMajor == 1 && r.TLS == nil {
		h.enableSendfile(bw, r, fileSystem, sent)
	}

	// a plain GET or HEAD skips ServeContent (fastpath.go), with the same result
	if modtime := validatorModTime(entry.info.ModTime()); !serveFast(bw, r, modtime, content) {
		http.ServeContent(bw, r, entry.info.Name(), modtime, content.reader)
	}
	if content.truncated() {
		h.abortTruncated(sent, content)
	}
	return nil
}

// enableSendfile lets bw send the body of the file e describes with the
// kernel's sendfile: HTTP/1.1 over plain TCP has no TLS to encrypt in user
// space. The file is opened again for this response, and used only if it is
// still the file the headers describe.
//
// sendfile copies nothing: the socket keeps references to the file's page
// cache pages, and the client copies them only when it reads, which can be
// long after the response is complete for the server (on loopback the
// client's receive queue holds the very same pages). Truncating the file
// meanwhile zeroes, in place, the tail of the page (a large folio: up to
// its end) where the file now ends, so the client gets a complete-looking
// body with zeros no version of the file ever had; a read into a buffer, as
// file_server and the other paths do, cannot see a later change. No check
// on the server can see when the client reads, so a file modified within
// settleTime, likely still being written or cut, is copied instead; files
// that have settled keep the zero-copy path.
func (h *Handler) enableSendfile(bw *bodyWriter, r *http.Request, fileSystem fs.FS, e *cacheEntry) {
	if recentlyModified(e.info) {
		return
	}
	bw.sendfile = func() (*os.File, error) {
		f, err := fileSystem.Open(e.key.name)
		if err != nil {
			return nil, err
		}
		osFile, ok := f.(*os.File)
		if !ok {
			f.Close()
			return nil, fmt.Errorf("%s is not an OS file", e.key.name)
		}
		if info, err := osFile.Stat(); err != nil || !sameFile(e.info, info) {
			osFile.Close()
			return nil, fmt.Errorf("%s changed since its headers were made", e.key.name)
		}
		return osFile, nil
	}
	if _, idle := caddyhttp.IdleTimeoutsFromContext(r.Context()); idle != nil {
		bw.sendfileChunk = caddyhttp.DefaultMaxWriteChunk
		if idle.MaxChunk > 0 {
			bw.sendfileChunk = int64(idle.MaxChunk)
		}
	}
}

// abortTruncated aborts a response whose file ended before the size its
// headers announced, so the client sees an error instead of a short body
// that looks complete (RST_STREAM on HTTP/2, a closed connection on
// HTTP/1.1). The file's cache entry is dropped.
func (h *Handler) abortTruncated(sent *cacheEntry, content *responseBody) {
	if h.cache != nil {
		h.cache.remove(sent)
	}
	fileCacheMetrics.truncated.Inc()
	h.logger.Warn("file changed while it was sent; aborting the response",
		zap.String("filename", sent.key.name),
		zap.Int64("announced", content.body.size),
		zap.Int64("offset", content.body.off))
	panic(http.ErrAbortHandler)
}

// statusOverride returns the status code to send instead of the one the
// response would get: the error's status inside handle_errors, or the
// configured status. Zero means no override.
func (h *Handler) statusOverride(r *http.Request, repl *caddy.Replacer) (int, error) {
	code := 0
	if reqErr, ok := r.Context().Value(caddyhttp.ErrorCtxKey).(error); ok {
		code = http.StatusInternalServerError
		if handlerErr, ok := reqErr.(caddyhttp.HandlerError); ok && handlerErr.StatusCode > 0 {
			code = handlerErr.StatusCode
		}
	}
	if codeStr := h.StatusCode.String(); codeStr != "" {
		var err error
		code, err = strconv.Atoi(repl.ReplaceAll(codeStr, ""))
		if err != nil {
			return 0, caddyhttp.Error(http.StatusInternalServerError, err)
		}
	}
	return code, nil
}

// notFound returns a 404 error or, with pass_thru, calls the next handler.
func (h *Handler) notFound(w http.ResponseWriter, r *http.Request, next caddyhttp.Handler) error {
	if h.PassThru {
		return next.ServeHTTP(w, r)
	}
	return caddyhttp.Error(http.StatusNotFound, nil)
}

// redirect sends a permanent redirect to toPath, which must be a path
// without a query; the request's query is kept.
func redirect(w http.ResponseWriter, r *http.Request, toPath string) error {
	for strings.HasPrefix(toPath, "//") {
		// prevent path-based open redirects
		toPath = strings.TrimPrefix(toPath, "/")
	}
	if r.URL.RawQuery != "" {
		toPath += "?" + r.URL.RawQuery
	}
	http.Redirect(w, r, toPath, http.StatusPermanentRedirect) //nolint:gosec // same-origin path, leading // stripped
	return nil
}

// statusOverrideResponseWriter writes its own status code instead of the
// one the standard library chooses.
type statusOverrideResponseWriter struct {
	http.ResponseWriter
	code int
}

// WriteHeader writes the override status code.
func (wr statusOverrideResponseWriter) WriteHeader(int) {
	wr.ResponseWriter.WriteHeader(wr.code)
}

// ReadFrom lets copies reach the underlying writer's ReadFrom (sendfile).
func (wr statusOverrideResponseWriter) ReadFrom(r io.Reader) (int64, error) {
	return (&caddyhttp.ResponseWriterWrapper{ResponseWriter: wr.ResponseWriter}).ReadFrom(r)
}

// Unwrap returns the underlying ResponseWriter for http.ResponseController.
func (wr statusOverrideResponseWriter) Unwrap() http.ResponseWriter {
	return wr.ResponseWriter
}
