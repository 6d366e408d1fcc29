package h2

import (
	"context"
	"crypto/tls"
	"errors"
	"fmt"
	"io"
	"net/http"
	"net/textproto"
	"net/url"
	"strconv"
	"strings"

	"golang.org/x/net/http/httpguts"
	"golang.org/x/net/http2"
)

// This file builds requests as x/net v0.60's server does (newWriterAndRequest,
// internal/httpcommon.NewServerRequest), with the limits Go 1.27's own copy
// (net/http/internal/http2) added; each rule names its origin. A non-empty
// reason (x/net's countError name) means: reset the stream, PROTOCOL_ERROR.

// connInfo is what newRequest needs from the connection.
type connInfo struct {
	remoteAddr string               // conn.RemoteAddr().String()
	tls        *tls.ConnectionState // nil on a plaintext (h2c) connection
	canon      *headerCanon         // the connection's name cache; nil: none
}

// newRequest builds the request for the HEADERS block f that opened a stream.
// It returns a non-empty reason (x/net's countError name) when the request is
// malformed: the caller then resets the stream with PROTOCOL_ERROR and calls
// no handler. needsContinue reports an "Expect: 100-continue" header, which
// is removed from req.Header as x/net does.
//
// The request is x/net's, field by field, with two differences:
//   - req.TLS is c.tls whatever the :scheme (x/net sets it only for "https";
//     net/http's initALPNRequest then fills it in for every request on a TLS
//     connection, so that is what handlers under Caddy see);
//   - Go 1.27's Content-Length rules apply (see requestContentLength).
//
// The request's URL and header values are in store when they fit (see
// requestStorage); a nil store allocates them.
//
// req.Body is nil: the caller sets it (x/net's is never nil). The context is
// ctx: taking it here costs one *http.Request allocation where building the
// request and then calling WithContext costs two.
//
// Callers must first apply limitHeaderValues to f, and after a request is
// returned choose the handler as x/net's processHeaders does:
// headerListTooLongHandler if f.Truncated, else badRequestHandler if
// checkRequestHeaders fails, else their own.
func newRequest(ctx context.Context, f *http2.MetaHeadersFrame, c connInfo, store *requestStorage) (req *http.Request, needsContinue bool, reason string) {
	if store == nil {
		store = new(requestStorage)
	}
	var method, scheme, authority, path, protocol string
	for _, hf := range f.PseudoFields() {
		switch hf.Name {
		case ":method":
			method = hf.Value
		case ":scheme":
			scheme = hf.Value
		case ":authority":
			authority = hf.Value
		case ":path":
			path = hf.Value
		case ":protocol":
			protocol = hf.Value
		}
	}

	// Extended CONNECT (RFC 8441) is off, as x/net's default, so :protocol is
	// malformed (were it on, x/net would keep it as the header ":protocol").
	if protocol != "" {
		return nil, false, "bad_connect"
	}
	if method == "CONNECT" {
		if path != "" || scheme != "" || authority == "" {
			return nil, false, "bad_connect"
		}
	} else if method == "" || path == "" || (scheme != "https" && scheme != "http") {
		// RFC 9113 §8.3.1: exactly one valid :method, :scheme and :path.
		return nil, false, "bad_path_method"
	}

	// The values share one backing array, as net/textproto does, in place of
	// x/net's one allocation per name; each key's slice is capped so that
	// appending a repeated name copies rather than overwrites its neighbour.
	regular := f.RegularFields()
	header := make(http.Header, len(regular))
	var values []string
	if len(regular) <= len(store.values) {
		values = store.values[:len(regular)]
	} else {
		values = make([]string, len(regular))
	}
	for i, hf := range regular {
		key := c.canon.canonical(hf.Name)
		if vv, ok := header[key]; ok {
			header[key] = append(vv, hf.Value)
			continue
		}
		values[i] = hf.Value
		header[key] = values[i : i+1 : i+1]
	}
	if authority == "" {
		authority = header.Get("Host")
	}

	needsContinue = httpguts.HeaderValuesContainsToken(header["Expect"], "100-continue")
	if needsContinue {
		delete(header, "Expect")
	}
	if cookies := header["Cookie"]; len(cookies) > 1 {
		header["Cookie"] = []string{strings.Join(cookies, "; ")}
	}
	trailer := declaredTrailer(header["Trailer"])
	delete(header, "Trailer")

	// x/net v0.60 (not Go 1.27.3, which keeps the Host header and checks
	// neither rule): a Host header must match :authority and is then removed.
	if host := header["Host"]; len(host) == 1 {
		if host[0] != authority {
			return nil, false, "authority_host_mismatch"
		}
		delete(header, "Host")
	} else if len(host) > 1 {
		return nil, false, "multiple_host_headers"
	}
	// RFC 9113 §8.3.1: no userinfo in :authority for http and https.
	if strings.IndexByte(authority, '@') != -1 && (scheme == "http" || scheme == "https") {
		return nil, false, "userinfo_in_authority"
	}
	// x/net v0.60 only, as above.
	if authority != "" && !httpguts.ValidHostHeader(authority) {
		return nil, false, "invalid_authority"
	}

	var u *url.URL
	requestURI := path
	if method == "CONNECT" {
		u = &url.URL{Host: authority}
		requestURI = authority // as the HTTP/1 server does
	} else {
		if path[0] != '/' && path != "*" {
			return nil, false, "bad_path"
		}
		var err error
		if u, err = parseRequestPath(path, &store.url); err != nil {
			return nil, false, "bad_path"
		}
	}

	contentLength, reason := requestContentLength(header, f.StreamEnded())
	if reason != "" {
		return nil, false, reason
	}
	req = (&http.Request{
		Method:        method,
		URL:           u,
		Proto:         "HTTP/2.0",
		ProtoMajor:    2,
		ProtoMinor:    0,
		Header:        header,
		ContentLength: contentLength,
		Host:          authority,
		Trailer:       trailer,
		RemoteAddr:    c.remoteAddr,
		RequestURI:    requestURI,
		TLS:           c.tls,
	}).WithContext(ctx)
	return req, needsContinue, ""
}

// declaredTrailer returns the request's Trailer map, pre-declared with nil
// values from the Trailer header's names as x/net does (HTTP/1's rule:
// Transfer-Encoding, Trailer and Content-Length are ignored), or nil if none.
func declaredTrailer(values []string) http.Header {
	var trailer http.Header
	for _, v := range values {
		for _, key := range strings.Split(v, ",") {
			key = textproto.CanonicalMIMEHeaderKey(textproto.TrimString(key))
			switch key {
			case "Transfer-Encoding", "Trailer", "Content-Length":
			default:
				if trailer == nil {
					trailer = make(http.Header)
				}
				trailer[key] = nil
			}
		}
	}
	return trailer
}

// requestContentLength returns req.ContentLength for a request with header h
// whose HEADERS frame did (endStream) or did not end the stream, by Go 1.27's
// rules (net/http/internal/http2 newWriterAndRequest): the first
// Content-Length value if it parses as a non-negative integer, 0 if it does
// not, -1 without one, and 0 when endStream. Rules from Go 1.27, absent from
// x/net v0.60, each a reason to reset the stream with PROTOCOL_ERROR:
//   - "bodyless_content_length": endStream with a non-zero Content-Length;
//   - "duplicate_content_length": Content-Length values that differ.
//
// Repeated equal values are cut down to one in h (also Go 1.27).
func requestContentLength(h http.Header, endStream bool) (n int64, reason string) {
	clens, ok := h["Content-Length"]
	if !ok {
		if endStream {
			return 0, ""
		}
		return -1, ""
	}
	if cl, err := strconv.ParseUint(clens[0], 10, 63); err == nil {
		n = int64(cl)
	}
	if endStream && n != 0 {
		return 0, "bodyless_content_length"
	}
	if len(clens) > 1 {
		for _, dup := range clens[1:] {
			if dup != clens[0] {
				return 0, "duplicate_content_length"
			}
		}
		h["Content-Length"] = clens[:1]
	}
	return n, ""
}

// maxHeaderValueCount is Go 1.27's http.DefaultMaxHeaderValueCount, the cap
// on the number of header values in one header block.
const maxHeaderValueCount = 500

// limitHeaderValues applies Go 1.27's cap on the number of values in a header
// block (net/http/internal/http2 Framer.MaxHeaderValueCount, frame.go
// readMetaFrame), which x/net v0.60's Framer lacks, to f as that Framer
// returned it. Like Go 1.27 it counts the "trailer" field as one value per
// comma-separated name, in a count of its own, and every other field
// (pseudo-headers too) as one; on the first field past limit it cuts f.Fields
// before that field, sets f.Truncated and returns true. The caller then acts
// on f.Truncated as Go 1.27 does: a request gets headerListTooLongHandler
// (431); trailers reset the stream ("trailers_too_large", see checkTrailers).
// A limit of 0 or less means no limit.
//
// Applied after decoding, it differs from Go 1.27 only for blocks past the
// cap, where 1.27 stops decoding: a CONTINUATION frame after the cap was hit
// closes 1.27's connection (PROTOCOL_ERROR) and here gets the 431; a field
// past the cap with an invalid name or value resets the stream here (x/net's
// Framer rejects it) and gets the 431 in 1.27.
func limitHeaderValues(f *http2.MetaHeadersFrame, limit int) (truncated bool) {
	if limit <= 0 {
		return false
	}
	var headers, trailers int
	for i, hf := range f.Fields {
		count := &headers
		n := 1
		if hf.Name == "trailer" {
			count = &trailers
			n = strings.Count(hf.Value, ",") + 1
		}
		if *count += n; *count > limit {
			f.Fields = f.Fields[:i]
			f.Truncated = true
			return true
		}
	}
	return false
}

// connHeaders are the connection-specific headers RFC 9113 §8.2.2 forbids.
var connHeaders = []string{"Connection", "Keep-Alive", "Proxy-Connection", "Transfer-Encoding", "Upgrade"}

// checkRequestHeaders is x/net's checkValidHTTP2RequestHeaders: a
// connection-specific header, or a TE header other than "trailers", makes the
// request invalid. The caller answers it with badRequestHandler(err); the
// error's text is the body the client gets, word for word x/net's.
func checkRequestHeaders(h http.Header) error {
	for _, k := range connHeaders {
		if _, ok := h[k]; ok {
			return fmt.Errorf("request header %q is not valid in HTTP/2", k)
		}
	}
	te := h["Te"]
	if len(te) > 0 && (len(te) > 1 || (te[0] != "trailers" && te[0] != "")) {
		return errors.New(`request header "TE" may only be "trailers" in HTTP/2`)
	}
	return nil
}

// badRequestHandler is x/net's new400Handler: it answers 400 with err's text
// as a text/plain body, through http.Error.
func badRequestHandler(err error) http.HandlerFunc {
	return func(w http.ResponseWriter, r *http.Request) {
		http.Error(w, err.Error(), http.StatusBadRequest)
	}
}

// headerListTooLongHandler is x/net's handleHeaderListTooLong, the handler of
// a request whose header block was truncated (RFC 9113 §10.5.1): 431 with a
// small HTML body and no Content-Type (the writer sniffs it).
func headerListTooLongHandler(w http.ResponseWriter, r *http.Request) {
	w.WriteHeader(http.StatusRequestHeaderFieldsTooLarge)
	io.WriteString(w, "<h1>HTTP Error 431</h1><p>Request Header Field(s) Too Large</p>")
}

// checkTrailers validates the HEADERS block f that follows a request's
// HEADERS on an open stream, as processTrailerHeaders does, and adds its
// fields to into under canonical names. A non-empty reason resets the stream
// with PROTOCOL_ERROR:
//   - "trailers_not_ended": f does not end the stream;
//   - "trailers_pseudo": f has pseudo-header fields;
//   - "trailers_too_large": f.Truncated (Go 1.27; x/net v0.60 keeps what was
//     decoded);
//   - "trailers_bogus": a field httpguts.ValidTrailerHeader refuses.
//
// into is nil when the request declared no Trailer (x/net's st.trailer):
// fields are then neither checked nor kept. A second trailers block on a
// stream is a connection error ("dup_trailers"), which the caller checks.
// into may hold some fields when a reason is returned. At the end of the
// body, copyDeclaredTrailers moves into's fields into req.Trailer.
func checkTrailers(f *http2.MetaHeadersFrame, canon *headerCanon, into http.Header) (reason string) {
	if !f.StreamEnded() {
		return "trailers_not_ended"
	}
	if len(f.PseudoFields()) > 0 {
		return "trailers_pseudo"
	}
	if f.Truncated {
		return "trailers_too_large"
	}
	if into == nil {
		return ""
	}
	for _, hf := range f.RegularFields() {
		key := canon.canonical(hf.Name)
		if !httpguts.ValidTrailerHeader(key) {
			return "trailers_bogus"
		}
		into[key] = append(into[key], hf.Value)
	}
	return ""
}

// copyDeclaredTrailers is x/net's copyTrailersToHandlerRequest: it copies the
// trailers received (got, filled by checkTrailers) into req.Trailer, only
// those the request declared. x/net runs it in the handler's Body.Read just
// before that returns io.EOF.
func copyDeclaredTrailers(reqTrailer, got http.Header) {
	for k, vv := range got {
		if _, ok := reqTrailer[k]; ok {
			reqTrailer[k] = vv
		}
	}
}

// maxCanonCacheSize is x/net's maxCachedCanonicalHeadersKeysSize: the bound,
// in accounted bytes, of a connection's cache of uncommon header names
// (CVE-2022-41717: a peer sending endless unique names must not grow it).
const maxCanonCacheSize = 2048

// headerCanon is a connection's cache of canonical header names, as x/net's
// serverConn.canonicalHeader: common names come from a shared static table,
// others from a per-connection map that stops growing once its entries,
// counted as 100 bytes plus twice the name's length each, would pass
// maxCanonCacheSize. A connection's reading goroutine owns it; it is not safe
// for concurrent use.
type headerCanon struct {
	m    map[string]string // lower-case wire name -> canonical name
	size int               // accounted bytes of m's entries
}

// canonical returns the canonical form of the header name v (as on the wire,
// lower case), "content-type" -> "Content-Type". A nil h does not cache.
func (h *headerCanon) canonical(v string) string {
	if cv, ok := commonCanon[v]; ok {
		return cv
	}
	if h == nil {
		return http.CanonicalHeaderKey(v)
	}
	if cv, ok := h.m[v]; ok {
		return cv
	}
	if h.m == nil {
		h.m = make(map[string]string)
	}
	cv := http.CanonicalHeaderKey(v)
	if size := 100 + len(v)*2; h.size+size <= maxCanonCacheSize {
		h.m[v] = cv
		h.size += size
	}
	return cv
}

// commonCanon maps the common header names, lower case, to their canonical
// form: x/net's internal/httpcommon table.
var commonCanon = func() map[string]string {
	names := []string{
		"accept", "accept-charset", "accept-encoding", "accept-language",
		"accept-ranges", "age", "access-control-allow-credentials",
		"access-control-allow-headers", "access-control-allow-methods",
		"access-control-allow-origin", "access-control-expose-headers",
		"access-control-max-age", "access-control-request-headers",
		"access-control-request-method", "allow", "authorization",
		"cache-control", "content-disposition", "content-encoding",
		"content-language", "content-length", "content-location",
		"content-range", "content-type", "cookie", "date", "etag", "expect",
		"expires", "from", "host", "if-match", "if-modified-since",
		"if-none-match", "if-unmodified-since", "last-modified", "link",
		"location", "max-forwards", "origin", "proxy-authenticate",
		"proxy-authorization", "range", "referer", "refresh", "retry-after",
		"server", "set-cookie", "strict-transport-security", "trailer",
		"transfer-encoding", "user-agent", "vary", "via", "www-authenticate",
		"x-forwarded-for", "x-forwarded-proto",
	}
	m := make(map[string]string, len(names))
	for _, v := range names {
		m[v] = textproto.CanonicalMIMEHeaderKey(v)
	}
	return m
}()
