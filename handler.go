package h2file

import (
	"fmt"
	"io"
	"io/fs"
	"net/http"
	"os"
	"runtime"
	"strconv"
	"strings"
	"time"

	"github.com/caddyserver/caddy/v2"
	"github.com/caddyserver/caddy/v2/modules/caddyhttp"
	"go.uber.org/zap"

	"github.com/h2file/caddy-h2file/internal/fdcache"
	"github.com/h2file/caddy-h2file/internal/send"
)

// ServeHTTP serves the file the request maps to. It makes the same
// decisions as Caddy's file_server, in the same order, so that every
// response is the same.
func (h *Handler) ServeHTTP(w http.ResponseWriter, r *http.Request, next caddyhttp.Handler) error {
	// The common path only: the rest is in errors.go, directory.go,
	// sidecar.go and debuglog.go, in functions
	// of their own. The stack grows here if it must (see reserveStack).
	reserveStack(0)
	repl := r.Context().Value(caddy.ReplacerCtxKey).(*caddy.Replacer)

	if runtime.GOOS == "windows" {
		if err := windowsPathProblem(r.URL.Path); err != nil {
			return err
		}
	}

	filesToHide := h.transformHidePaths(repl)
	root := replaceAll(repl, h.Root, ".")
	fsName := replaceAll(repl, h.FileSystem, "")
	fileSystem, ok := h.fsmap.Get(fsName)
	if !ok {
		return errFilesystemNotFound()
	}

	// a trailing slash breaks fs.ValidPath
	filename := strings.TrimSuffix(h.memos.join(root, r.URL.Path), "/")
	h.logPathJoin(root, fsName, r.URL.Path, filename)

	since := time.Now() // what the lookups must see (lookup)
	entry, err := h.lookup(since, fileSystem, fsName, filename)
	if err != nil {
		return h.lookupFailed(w, r, next, fileSystem, filename, err)
	}

	// a directory: its index file, a listing, or not found
	var implicitIndexFile bool
	if entry.Info().IsDir() {
		var handled bool
		entry, filename, handled, err = h.serveDirectory(w, r, next, since, fileSystem, fsName, filename, entry, filesToHide)
		if handled {
			return err
		}
		implicitIndexFile = true
	}

	if fileHidden(filename, filesToHide) {
		h.logHidden("hiding file", filename, filesToHide)
		return h.notFound(w, r, next)
	}

	// directories end with a slash, files do not; unless the file name was
	// rewritten, in which case a redirect could loop
	if h.CanonicalURIs == nil || *h.CanonicalURIs {
		if to, ok := h.canonicalRedirect(r, implicitIndexFile); ok {
			return redirect(w, r, to)
		}
	}

	respHeader := w.Header()
	// a header set by an earlier handler wins over the computed ETag
	etag := respHeader.Get("Etag")

	// caches need Vary even when no sidecar is served (caddy#5849)
	scratch := new(responseScratch)
	vals := &scratch.vals
	send.AddHeaderValue(respHeader, "Vary", "Accept-Encoding", vals, send.VaryValue)

	// the sidecar, or the file itself, whose content is sent
	content, sent, etag, err := h.openSidecar(w, r, since, fileSystem, fsName, filename, filesToHide, etag, scratch)
	if err != nil {
		return err
	}
	if content == nil {
		h.logFile("opening file", filename)
		var opened *cacheEntry
		content, opened, err = h.openBody(fileSystem, entry, w, &scratch.body)
		if err != nil {
			if herr, ok := err.(caddyhttp.HandlerError); ok && herr.StatusCode == http.StatusNotFound {
				return h.notFound(w, r, next)
			}
			return err
		}
		entry, sent = opened, opened
		if etag == "" && h.EtagFileExtensions != nil {
			if etag, err = h.etagFromFile(fileSystem, filename); err != nil {
				content.Close()
				return err
			}
		}
		if etag == "" {
			etag = entityTag(entry)
		}
	}
	defer content.Close()

	// static files answer only GET and HEAD, except when rendering an
	// error page (caddy#5166, caddy#5703)
	if r.Method != http.MethodGet && r.Method != http.MethodHead {
		if _, ok := r.Context().Value(caddyhttp.ErrorCtxKey).(error); !ok {
			return methodNotAllowed(respHeader)
		}
	}

	if etag != "" {
		send.SetHeaderValue(respHeader, "Etag", etag, vals, send.ETagValue)
	}
	send.SetContentType(respHeader, entry.Meta().contentType, vals)

	statusCodeOverride, err := h.statusOverride(r, repl)
	if err != nil {
		return err
	}
	if statusCodeOverride > 0 {
		w = statusOverrideResponseWriter{ResponseWriter: w, code: statusCodeOverride}
	} else if h.compressor != nil {
		if h.serveVariant(w, r, entry, content, etag, scratch) {
			return nil
		}
		h.compressor.stripVariantETag(r, h.memos)
	}
	bw := scratch.writer.Init(w, r, int(h.WriteChunk))
	if r.ProtoMajor == 1 && r.TLS == nil {
		h.enableSendfile(bw, r, fileSystem, sent)
	}

	// a plain GET or HEAD skips ServeContent (send.Whole), with the same result
	if modtime := send.ValidatorModTime(entry.Info().ModTime()); !send.Whole(bw, r, modtime, content.body, entry.Meta().headerValues, vals) {
		http.ServeContent(bw, r, entry.Info().Name(), modtime, content.reader)
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
func (h *Handler) enableSendfile(bw *send.Writer, r *http.Request, fileSystem fs.FS, e *cacheEntry) {
	if fdcache.RecentlyModified(e.Info()) {
		return
	}
	open := func() (*os.File, error) {
		f, err := fileSystem.Open(e.Name())
		if err != nil {
			return nil, err
		}
		osFile, ok := f.(*os.File)
		if !ok {
			f.Close()
			return nil, fmt.Errorf("%s is not an OS file", e.Name())
		}
		if info, err := osFile.Stat(); err != nil || !fdcache.SameFile(e.Info(), info) {
			osFile.Close()
			return nil, fmt.Errorf("%s changed since its headers were made", e.Name())
		}
		return osFile, nil
	}
	var maxChunk int64
	if _, idle := caddyhttp.IdleTimeoutsFromContext(r.Context()); idle != nil {
		maxChunk = caddyhttp.DefaultMaxWriteChunk
		if idle.MaxChunk > 0 {
			maxChunk = int64(idle.MaxChunk)
		}
	}
	bw.EnableSendfile(open, maxChunk)
}

// abortTruncated aborts a response whose file ended before the size its
// headers announced, so the client sees an error instead of a short body
// that looks complete (RST_STREAM on HTTP/2, a closed connection on
// HTTP/1.1). The file's cache entry is dropped.
func (h *Handler) abortTruncated(sent *cacheEntry, content *responseBody) {
	if h.cache != nil {
		h.cache.Remove(sent)
	}
	abortedSends.Inc()
	h.logger.Warn("file changed while it was sent; aborting the response",
		zap.String("filename", sent.Name()),
		zap.Int64("announced", content.body.Size()),
		zap.Int64("offset", content.body.Offset()))
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
