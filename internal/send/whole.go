package send

import (
	"io"
	"net/http"
	"strconv"
	"time"
)

// Whole answers a plain GET or HEAD of a whole file (no Range, no
// If-* header) exactly as http.ServeContent would, without its general
// machinery: Last-Modified, Accept-Ranges and Content-Length set the same
// way, status 200 (or what the status override makes of it), then the
// body through bw. It reports false, having touched nothing, for any
// request ServeContent must decide: then the caller calls ServeContent.
//
// What ServeContent does for such a request, step by step (net/http's
// serveContent, the same in Go 1.26 and 1.27): setLastModified;
// checkPreconditions finds no condition and no range; the Content-Type is
// already in the header map (setContentType always puts it there, nil
// when unknown, so nothing is sniffed); the size is the body's; with no
// range, Accept-Ranges is set, Content-Length too unless a
// Content-Encoding is set; WriteHeader(200); for GET, io.CopyN of the
// whole body, which ends in bw.ReadFrom. The differential suite
// (diff_test.go) holds both to the same bytes.
//
// body is the file's content, nil when it is read some other way (then
// ServeContent decides). known holds the entry's Last-Modified and Content-Length values when it
// has them (see KnownHeaders); vals gives the header values their
// slices.
func Whole(bw *Writer, r *http.Request, modtime time.Time, body *Body, known KnownHeaders, vals *HeaderValues) bool {
	if !PlainRequest(r) || body == nil || body.off != 0 || body.size < 0 {
		return false
	}
	h := bw.Header()
	if _, haveType := h["Content-Type"]; !haveType {
		return false // ServeContent would sniff the content
	}
	setFastHeaders(h, modtime, body.size, known, vals)
	bw.WriteHeader(http.StatusOK)
	if r.Method != http.MethodHead && body.size > 0 {
		// ServeContent ignores the copy's error too: the response has
		// begun, and a truncated file is handled by the caller. On
		// HTTP/1.x the body takes ServeContent's very path (io.CopyN),
		// since net/http's framing can depend on how it arrives.
		if bw.http1 {
			_, _ = io.CopyN(bw, body, body.size)
		} else {
			_, _ = bw.ReadFrom(body)
		}
	}
	return true
}

// PlainRequest reports whether r is a GET or HEAD of a whole
// representation, with no Range and no If-* header: what ServeContent
// answers with 200 and the whole content, whatever the file.
func PlainRequest(r *http.Request) bool {
	return (r.Method == http.MethodGet || r.Method == http.MethodHead) &&
		!headerSet(r.Header, "Range") && !headerSet(r.Header, "If-Match") &&
		!headerSet(r.Header, "If-Unmodified-Since") && !headerSet(r.Header, "If-None-Match") &&
		!headerSet(r.Header, "If-Modified-Since")
}

// SetLastModified sets Last-Modified as ServeContent does (not for a zero
// modtime), from known when it describes modtime.
func SetLastModified(h http.Header, modtime time.Time, known KnownHeaders, vals *HeaderValues) {
	if isZeroTime(modtime) {
		return
	}
	v := known.lastModified
	if !known.ok || !known.modtime.Equal(modtime) || v == "" {
		v = modtime.UTC().Format(http.TimeFormat)
	}
	SetHeaderValue(h, "Last-Modified", v, vals, LastModifiedValue)
}

// setFastHeaders sets Last-Modified (unless modtime is zero), Accept-Ranges
// and Content-Length (unless a Content-Encoding is set) as ServeContent
// does, without an allocation of its own: the values' slices are in vals,
// each capped at its one element so that appending to one never touches
// another, and the strings come from known when it describes this modtime
// and size, or this modtime when no Content-Length is set (a sidecar's
// response gets its file's Last-Modified), else one string is made for
// both.
func setFastHeaders(h http.Header, modtime time.Time, size int64, known KnownHeaders, vals *HeaderValues) {
	lastModified := !isZeroTime(modtime)
	contentLength := headerValue(h, "Content-Encoding") == ""
	if !known.ok || (contentLength && known.size != size) || !known.modtime.Equal(modtime) {
		known = formatHeaderValues(modtime, size, lastModified, contentLength)
	}
	SetHeaderValue(h, "Accept-Ranges", "bytes", vals, AcceptRangesValue)
	if lastModified {
		SetHeaderValue(h, "Last-Modified", known.lastModified, vals, LastModifiedValue)
	}
	if contentLength {
		SetHeaderValue(h, "Content-Length", known.contentLength, vals, ContentLengthValue)
	}
}

// formatHeaderValues makes the Last-Modified and Content-Length values
// that are asked for, in one string.
func formatHeaderValues(modtime time.Time, size int64, lastModified, contentLength bool) KnownHeaders {
	var buf [64]byte
	b := buf[:0]
	if lastModified {
		b = modtime.UTC().AppendFormat(b, http.TimeFormat)
	}
	split := len(b)
	if contentLength {
		b = strconv.AppendInt(b, size, 10)
	}
	str := string(b)
	return KnownHeaders{ok: true, modtime: modtime, size: size, lastModified: str[:split], contentLength: str[split:]}
}

// headerSet reports whether h has key (canonical) with a non-empty first
// value, as ServeContent's h.Get(key) != "" tests.
func headerSet(h http.Header, key string) bool {
	return headerValue(h, key) != ""
}

// headerValue is h.Get(key) for a canonical key, without canonicalizing.
func headerValue(h http.Header, key string) string {
	if v := h[key]; len(v) > 0 {
		return v[0]
	}
	return ""
}

// unixEpoch is the Unix epoch, which net/http treats as no modification
// time at all.
var unixEpoch = time.Unix(0, 0)

// isZeroTime is net/http's test for a modification time not to send.
func isZeroTime(t time.Time) bool {
	return t.IsZero() || t.Equal(unixEpoch)
}
