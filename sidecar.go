package h2file

import (
	"io/fs"
	"net/http"
	"time"

	"github.com/caddyserver/caddy/v2/modules/caddyhttp"
	"go.uber.org/zap"
	"go.uber.org/zap/zapcore"

	"github.com/h2file/caddy-h2file/internal/send"
)

// Precompressed sidecars, out of line so that ServeHTTP's stack frame
// stays small (see reserveStack).

// openSidecar opens the first precompressed sidecar of filename that the
// client accepts and that is there, not hidden and a file, and sets the
// response's Content-Encoding and, unless it is a Range request,
// Content-Length. It returns the sidecar's content (nil if there is none;
// the caller closes it), its entry, and the ETag to send: etag if set,
// else the sidecar's own.
//
//go:noinline
func (h *Handler) openSidecar(w http.ResponseWriter, r *http.Request, since time.Time, fileSystem fs.FS, fsName, filename string, filesToHide []string, etag string, scratch *responseScratch) (*responseBody, *cacheEntry, string, error) {
	for _, ae := range h.memos.acceptedEncodings(r, &h.PrecompressedOrder) {
		precompress, ok := h.precompressors[ae]
		if !ok {
			continue
		}
		compressedFilename := h.memos.sidecarName(filename, precompress.Suffix())
		if fileHidden(compressedFilename, filesToHide) {
			continue
		}
		compressed, err := h.lookup(since, fileSystem, fsName, compressedFilename)
		if err != nil || compressed.Info().IsDir() {
			if c := h.logger.Check(zapcore.DebugLevel, "precompressed file not accessible"); c != nil {
				c.Write(zap.String("filename", compressedFilename), zap.Error(err))
			}
			continue
		}
		h.logFile("opening compressed sidecar file", compressedFilename)
		body, opened, err := h.openBody(fileSystem, compressed, w, &scratch.body)
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
		send.SetHeaderValue(respHeader, "Content-Encoding", ae, &scratch.vals, send.ContentEncodingValue)
		// the standard library sets no Content-Length with a
		// Content-Encoding (caddy#7040); a Range request must stay 206
		if r.Header.Get("Range") == "" {
			contentLength := opened.Meta().headerValues.ContentLength(opened.Info().Size())
			send.SetHeaderValue(respHeader, "Content-Length", contentLength, &scratch.vals, send.ContentLengthValue)
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
