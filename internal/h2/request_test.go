package h2

import (
	"bytes"
	"context"
	"crypto/tls"
	"errors"
	"fmt"
	"io"
	"log"
	"net"
	"net/http"
	"net/http/httptest"
	"reflect"
	"slices"
	"strings"
	"sync"
	"testing"
	"time"

	"golang.org/x/net/http2"
	"golang.org/x/net/http2/hpack"
)

// hfs returns the header fields of name, value pairs.
func hfs(pairs ...string) []hpack.HeaderField {
	var fs []hpack.HeaderField
	for i := 0; i+1 < len(pairs); i += 2 {
		fs = append(fs, hpack.HeaderField{Name: pairs[i], Value: pairs[i+1]})
	}
	return fs
}

// get returns a GET request's header block for https://example.com/ with the
// regular fields of pairs.
func get(pairs ...string) []hpack.HeaderField {
	return hfs(append([]string{":method", "GET", ":scheme", "https", ":authority", "example.com", ":path", "/"}, pairs...)...)
}

// getPath returns a GET request's header block for path on example.com.
func getPath(path string) []hpack.HeaderField {
	return hfs(":method", "GET", ":scheme", "https", ":authority", "example.com", ":path", path)
}

// many returns n regular fields x-0000: v, x-0001: v, ...
func many(n int) []string {
	var pairs []string
	for i := range n {
		pairs = append(pairs, fmt.Sprintf("x-%04d", i), "v")
	}
	return pairs
}

// big returns n regular fields of size bytes each.
func big(n, size int) []string {
	var pairs []string
	for i := range n {
		pairs = append(pairs, fmt.Sprintf("x-big-%d", i), strings.Repeat("a", size))
	}
	return pairs
}

// reqCase is one request sent as raw frames to x/net's server and to this
// package.
type reqCase struct {
	name      string
	fields    []hpack.HeaderField // the request's header block
	endStream bool                // its HEADERS frame ends the stream
	body      string              // else: one DATA frame ending the stream (without trailers)
	trailers  []hpack.HeaderField // else: a trailers block
	trailOpen bool                // the trailers' HEADERS does not end the stream
	splitAt   int                 // the first fragment ends after this many fields (0: 16 KiB fragments)
	maxHeader int                 // the server's MaxHeaderBytes (0: 64 KiB)

	// What this package must do whatever the reference does: status 200 (the
	// handler ran), 400, 431, or 0 (the stream is reset with PROTOCOL_ERROR,
	// with reason as its countError name, "" when the Framer rejected it).
	status int
	reason string
	check  func(t *testing.T, o outcome) // more checks of this package's outcome

	// Documented differences: when set, the outcome must differ from that
	// reference's (so the note stays true); else it must equal it.
	notXNet string // from x/net v0.60's server (reference built with Go 1.26)
	not127  string // from Go 1.27.3's server (reference built with Go 1.27)
}

// reqSnap is what the tests compare of an *http.Request.
type reqSnap struct {
	Method, URL, RequestURI, Host, RemoteAddr string
	Proto                                     string
	ProtoMajor, ProtoMinor                    int
	Header                                    http.Header
	TrailerKeys                               []string
	ContentLength                             int64
	TLS                                       bool
}

func snap(r *http.Request) reqSnap {
	s := reqSnap{
		Method: r.Method, URL: r.URL.String(), RequestURI: r.RequestURI, Host: r.Host,
		RemoteAddr: r.RemoteAddr, Proto: r.Proto, ProtoMajor: r.ProtoMajor, ProtoMinor: r.ProtoMinor,
		Header: copyHeader(r.Header), ContentLength: r.ContentLength, TLS: r.TLS != nil,
	}
	for k := range r.Trailer {
		s.TrailerKeys = append(s.TrailerKeys, k)
	}
	slices.Sort(s.TrailerKeys)
	return s
}

// copyHeader copies h keeping nil values nil (http.Header.Clone does not).
func copyHeader(h http.Header) http.Header {
	if h == nil {
		return nil
	}
	c := make(http.Header, len(h))
	for k, vv := range h {
		c[k] = slices.Clone(vv)
	}
	return c
}

// outcome is what became of a request.
type outcome struct {
	Reset   bool          // RST_STREAM on the request's stream
	Code    http2.ErrCode // its error code, or GOAWAY's
	GoAway  bool          // GOAWAY instead
	Count   string        // the reset's countError name, "" if none
	Status  int           // the final response's status
	Body    string        // its body
	Got100  bool          // a 100 Continue came first
	Ran     bool          // the test handler ran
	Req     reqSnap       // the request it got
	Trailer http.Header   // req.Trailer after the body's EOF
}

// settled drops from a reset or GOAWAY outcome what depends on timing in
// x/net's server: whether the handler goroutine ran (and read the body,
// sending a 100 Continue) before the serve loop processed the frame that
// reset the stream.
func settled(o outcome) outcome {
	if o.Reset || o.GoAway {
		o.Ran, o.Req, o.Trailer, o.Got100 = false, reqSnap{}, nil, false
	}
	return o
}

// String prints o with a long header list shortened to its size.
func (o outcome) String() string {
	type plain outcome // without this method
	p := plain(o)
	if len(p.Req.Header) > 8 {
		p.Req.Header = http.Header{"…": {fmt.Sprintf("%d names", len(o.Req.Header))}}
	}
	return fmt.Sprintf("%+v", p)
}

// encode returns c's frames (after the preface and SETTINGS).
func encode(t *testing.T, c reqCase) []byte {
	t.Helper()
	var out, blk bytes.Buffer
	fr := http2.NewFramer(&out, nil)
	enc := hpack.NewEncoder(&blk)
	block := func(fields []hpack.HeaderField, endStream bool, splitAt int) {
		blk.Reset()
		var cuts []int
		for i, f := range fields {
			if i == splitAt && i > 0 {
				cuts = append(cuts, blk.Len())
			}
			if err := enc.WriteField(f); err != nil {
				t.Fatal(err)
			}
		}
		b := blk.Bytes()
		for n := 16384; n < len(b); n += 16384 {
			cuts = append(cuts, n)
		}
		cuts = append(cuts, len(b))
		slices.Sort(cuts)
		var frags [][]byte
		start := 0
		for _, n := range cuts {
			frags = append(frags, b[start:n])
			start = n
		}
		err := fr.WriteHeaders(http2.HeadersFrameParam{StreamID: 1, BlockFragment: frags[0], EndStream: endStream, EndHeaders: len(frags) == 1})
		for i, frag := range frags[1:] {
			if err == nil {
				err = fr.WriteContinuation(1, i == len(frags)-2, frag)
			}
		}
		if err != nil {
			t.Fatal(err)
		}
	}
	block(c.fields, c.endStream, c.splitAt)
	if !c.endStream {
		if c.trailers != nil {
			block(c.trailers, !c.trailOpen, 0)
		} else if err := fr.WriteData(1, true, []byte(c.body)); err != nil {
			t.Fatal(err)
		}
	}
	return out.Bytes()
}

func (c reqCase) maxHeaderBytes() int {
	if c.maxHeader == 0 {
		return 64 << 10
	}
	return c.maxHeader
}

// testHandler records the request, reads its body and answers 200.
type testHandler struct {
	started, done chan struct{}
	req           reqSnap
	trailer       http.Header
}

func newTestHandler() *testHandler {
	return &testHandler{started: make(chan struct{}), done: make(chan struct{})}
}

func (h *testHandler) ServeHTTP(w http.ResponseWriter, r *http.Request) {
	defer close(h.done)
	h.req = snap(r)
	close(h.started)
	if _, err := io.Copy(io.Discard, r.Body); err == nil {
		h.trailer = copyHeader(r.Trailer)
	}
	w.WriteHeader(http.StatusOK)
}

// runReference sends c to x/net's http2.Server.ServeConn over a net.Pipe and
// reads what it answers.
func runReference(t *testing.T, c reqCase, frames []byte) outcome {
	t.Helper()
	cli, srvConn := net.Pipe()
	var mu sync.Mutex
	var counts []string
	srv := &http2.Server{CountError: func(s string) {
		mu.Lock()
		counts = append(counts, s)
		mu.Unlock()
	}}
	h := newTestHandler()
	served := make(chan struct{})
	go func() {
		defer close(served)
		srv.ServeConn(srvConn, &http2.ServeConnOpts{
			BaseConfig: &http.Server{MaxHeaderBytes: c.maxHeaderBytes(), ErrorLog: log.New(io.Discard, "", 0)},
			Handler:    h,
		})
	}()
	cli.SetDeadline(time.Now().Add(10 * time.Second))
	var settings bytes.Buffer
	if err := http2.NewFramer(&settings, nil).WriteSettings(); err != nil {
		t.Fatal(err)
	}
	wrote := make(chan struct{})
	go func() {
		defer close(wrote)
		io.WriteString(cli, http2.ClientPreface)
		cli.Write(settings.Bytes())
		cli.Write(frames)
	}()

	var o outcome
	fr := http2.NewFramer(io.Discard, cli)
	fr.ReadMetaHeaders = hpack.NewDecoder(4096, nil)
	for done := false; !done; {
		f, err := fr.ReadFrame()
		if err != nil {
			t.Fatalf("reading the reference's frames: %v", err)
		}
		switch f := f.(type) {
		case *http2.RSTStreamFrame:
			o.Reset, o.Code, done = true, f.ErrCode, f.StreamID == 1
		case *http2.GoAwayFrame:
			o.GoAway, o.Code, done = true, f.ErrCode, true
		case *http2.MetaHeadersFrame:
			if s := f.PseudoValue("status"); s == "100" {
				o.Got100 = true
			} else {
				fmt.Sscan(s, &o.Status)
				done = f.StreamEnded()
			}
		case *http2.DataFrame:
			o.Body += string(f.Data())
			done = f.StreamEnded()
		}
	}
	cli.Close()
	<-wrote
	<-served
	select {
	case <-h.started:
		<-h.done
		o.Ran, o.Req, o.Trailer = true, h.req, h.trailer
	default:
	}
	// The first count names the reset; after a response, a count may follow
	// for frames the client sent meanwhile (DATA on the closed stream).
	mu.Lock()
	if len(counts) > 0 && (o.Reset || o.GoAway) {
		o.Count = counts[0]
	}
	mu.Unlock()
	return o
}

// runOurs reads c's frames as the engine does (x/net's Framer with its
// connection's limits) and applies this package's functions in x/net's order.
func runOurs(t *testing.T, c reqCase, frames []byte) outcome {
	t.Helper()
	var o outcome
	fr := http2.NewFramer(io.Discard, bytes.NewReader(frames))
	fr.ReadMetaHeaders = hpack.NewDecoder(4096, nil)
	fr.MaxHeaderListSize = uint32(c.maxHeaderBytes() + 320)
	canon := new(headerCanon)
	// read returns the next header block or DATA frame, or false after
	// recording the Framer's error in o.
	read := func() (http2.Frame, bool) {
		f, err := fr.ReadFrame()
		var se http2.StreamError
		var ce http2.ConnectionError
		switch {
		case err == nil:
			if mh, ok := f.(*http2.MetaHeadersFrame); ok {
				limitHeaderValues(mh, maxHeaderValueCount)
			}
			return f, true
		case errors.As(err, &se):
			o.Reset, o.Code = true, se.Code
		case errors.As(err, &ce):
			o.GoAway, o.Code = true, http2.ErrCode(ce)
		default:
			t.Fatalf("reading frames: %v", err)
		}
		return nil, false
	}
	reset := func(reason string) outcome {
		o.Reset, o.Code, o.Count = true, http2.ErrCodeProtocol, "stream_PROTOCOL_ERROR_"+reason
		return o
	}

	f, ok := read()
	if !ok {
		return o
	}
	mh := f.(*http2.MetaHeadersFrame)
	req, needsContinue, reason := newRequest(context.Background(), mh, connInfo{remoteAddr: "pipe", canon: canon}, nil)
	if reason != "" {
		return reset(reason)
	}
	var h http.Handler
	if mh.Truncated {
		h = http.HandlerFunc(headerListTooLongHandler)
	} else if err := checkRequestHeaders(req.Header); err != nil {
		h = badRequestHandler(err)
	}
	if h != nil {
		rec := httptest.NewRecorder()
		h.ServeHTTP(rec, req)
		o.Status, o.Body = rec.Code, rec.Body.String()
		return o
	}

	o.Ran, o.Req, o.Got100 = true, snap(req), needsContinue
	var got http.Header
	if req.Trailer != nil {
		got = make(http.Header)
	}
	for ended := mh.StreamEnded(); !ended; {
		f, ok := read()
		if !ok {
			return o
		}
		switch f := f.(type) {
		case *http2.DataFrame:
			ended = f.StreamEnded()
		case *http2.MetaHeadersFrame:
			if reason := checkTrailers(f, canon, got); reason != "" {
				return reset(reason)
			}
			ended = true
		}
	}
	copyDeclaredTrailers(req.Trailer, got)
	o.Trailer = copyHeader(req.Trailer)
	o.Status = http.StatusOK
	return o
}

// wantHeader checks one header of the request the handler got.
func wantHeader(key string, want ...string) func(*testing.T, outcome) {
	return func(t *testing.T, o outcome) {
		if got := o.Req.Header[key]; !reflect.DeepEqual(got, want) {
			t.Errorf("Header[%q] = %q, want %q", key, got, want)
		}
	}
}

// wantReq checks the request the handler got with fn.
func wantReq(fn func(r reqSnap) error) func(*testing.T, outcome) {
	return func(t *testing.T, o outcome) {
		if err := fn(o.Req); err != nil {
			t.Errorf("request %+v: %v", o.Req, err)
		}
	}
}

// wantURL checks req.URL.String() and req.RequestURI.
func wantURL(url, requestURI string) func(*testing.T, outcome) {
	return wantReq(func(r reqSnap) error {
		if r.URL != url || r.RequestURI != requestURI {
			return fmt.Errorf("want URL %q, RequestURI %q", url, requestURI)
		}
		return nil
	})
}

// wantCL checks req.ContentLength.
func wantCL(n int64) func(*testing.T, outcome) {
	return wantReq(func(r reqSnap) error {
		if r.ContentLength != n {
			return fmt.Errorf("ContentLength %d, want %d", r.ContentLength, n)
		}
		return nil
	})
}

const hostKept = "Go 1.27.3 keeps the Host header in req.Header and checks no Host rule"

var reqCases = []reqCase{
	{name: "get", fields: get("user-agent", "t", "accept", "*/*", "x-custom", "1"), endStream: true, status: 200,
		check: wantReq(func(r reqSnap) error {
			if r.URL != "/" || r.Host != "example.com" || r.Proto != "HTTP/2.0" || r.ContentLength != 0 ||
				r.Header.Get("X-Custom") != "1" || r.Header.Get("User-Agent") != "t" {
				return errors.New("not a plain GET of / on example.com")
			}
			return nil
		})},
	{name: "query", fields: getPath("/search?q=a%20b&x=1"), endStream: true, status: 200,
		check: wantURL("/search?q=a%20b&x=1", "/search?q=a%20b&x=1")},
	{name: "escapes_dots_fragment", fields: getPath("/a%2Fb/../c;p?x#f"), endStream: true, status: 200},
	{name: "path_with_space", fields: getPath("/a b"), endStream: true, status: 200},
	{name: "options_star", fields: hfs(":method", "OPTIONS", ":scheme", "https", ":authority", "example.com", ":path", "*"), endStream: true, status: 200,
		check: wantURL("*", "*")},
	{name: "get_star", fields: getPath("*"), endStream: true, status: 200},
	{name: "connect", fields: hfs(":method", "CONNECT", ":authority", "example.com:443"), status: 200,
		check: wantReq(func(r reqSnap) error {
			if r.URL != "//example.com:443" || r.RequestURI != "example.com:443" || r.Host != "example.com:443" || r.ContentLength != -1 {
				return errors.New("not the authority form")
			}
			return nil
		})},
	{name: "connect_path", fields: hfs(":method", "CONNECT", ":authority", "example.com:443", ":path", "/"), reason: "bad_connect"},
	{name: "connect_scheme", fields: hfs(":method", "CONNECT", ":scheme", "https", ":authority", "example.com:443"), reason: "bad_connect"},
	{name: "connect_no_authority", fields: hfs(":method", "CONNECT"), reason: "bad_connect"},
	{name: "connect_host_header", fields: hfs(":method", "CONNECT", "host", "example.com:443"), reason: "bad_connect"},
	{name: "extended_connect", fields: hfs(":method", "CONNECT", ":protocol", "websocket", ":scheme", "https", ":authority", "example.com", ":path", "/chat"), reason: "bad_connect"},
	{name: "get_protocol", fields: hfs(":method", "GET", ":protocol", "websocket", ":scheme", "https", ":authority", "example.com", ":path", "/"), endStream: true, reason: "bad_connect"},
	{name: "absolute_form_path", fields: getPath("http://example.com/x"), endStream: true, reason: "bad_path"},
	{name: "double_slash_path", fields: getPath("//evil.example/x"), endStream: true, status: 200,
		check: wantURL("//evil.example/x", "//evil.example/x")},
	{name: "relative_path", fields: getPath("x"), endStream: true, reason: "bad_path"},
	{name: "bad_escape", fields: getPath("/%zz"), endStream: true, reason: "bad_path"},
	{name: "missing_path", fields: hfs(":method", "GET", ":scheme", "https", ":authority", "example.com"), endStream: true, reason: "bad_path_method"},
	{name: "empty_path", fields: getPath(""), endStream: true, reason: "bad_path_method"},
	{name: "missing_method", fields: hfs(":scheme", "https", ":authority", "example.com", ":path", "/"), endStream: true, reason: "bad_path_method"},
	{name: "missing_scheme", fields: hfs(":method", "GET", ":authority", "example.com", ":path", "/"), endStream: true, reason: "bad_path_method"},
	{name: "scheme_ftp", fields: hfs(":method", "GET", ":scheme", "ftp", ":authority", "example.com", ":path", "/"), endStream: true, reason: "bad_path_method"},
	{name: "scheme_upper", fields: hfs(":method", "GET", ":scheme", "HTTPS", ":authority", "example.com", ":path", "/"), endStream: true, reason: "bad_path_method"},
	{name: "scheme_http", fields: hfs(":method", "GET", ":scheme", "http", ":authority", "example.com", ":path", "/"), endStream: true, status: 200},
	{name: "host_without_authority", fields: hfs(":method", "GET", ":scheme", "https", ":path", "/", "host", "example.org"), endStream: true, status: 200,
		check: wantReq(func(r reqSnap) error {
			if _, ok := r.Header["Host"]; r.Host != "example.org" || ok {
				return errors.New("want Host example.org from the header, and the header removed")
			}
			return nil
		}), not127: hostKept},
	{name: "host_same_as_authority", fields: get("host", "example.com"), endStream: true, status: 200, check: wantHeader("Host"), not127: hostKept},
	{name: "host_differs", fields: get("host", "example.org"), endStream: true, reason: "authority_host_mismatch", not127: hostKept},
	{name: "host_twice", fields: hfs(":method", "GET", ":scheme", "https", ":path", "/", "host", "a.example", "host", "a.example"), endStream: true, reason: "multiple_host_headers", not127: hostKept},
	{name: "no_host", fields: hfs(":method", "GET", ":scheme", "https", ":path", "/"), endStream: true, status: 200,
		check: wantReq(func(r reqSnap) error {
			if r.Host != "" {
				return errors.New("want no Host")
			}
			return nil
		})},
	{name: "userinfo", fields: hfs(":method", "GET", ":scheme", "https", ":authority", "user@example.com", ":path", "/"), endStream: true, reason: "userinfo_in_authority"},
	{name: "userinfo_in_host_header", fields: hfs(":method", "GET", ":scheme", "http", ":path", "/", "host", "user@example.com"), endStream: true, reason: "userinfo_in_authority"},
	{name: "invalid_authority", fields: hfs(":method", "GET", ":scheme", "https", ":authority", "exa mple.com", ":path", "/"), endStream: true, reason: "invalid_authority", not127: hostKept},
	{name: "ipv6_authority", fields: hfs(":method", "GET", ":scheme", "https", ":authority", "[::1]:8443", ":path", "/"), endStream: true, status: 200},
	{name: "cookies", fields: get("cookie", "a=1", "accept", "*/*", "cookie", "b=2", "cookie", "c=3"), endStream: true, status: 200, check: wantHeader("Cookie", "a=1; b=2; c=3")},
	{name: "repeated_header", fields: get("x-a", "1", "x-b", "2", "x-a", "3"), endStream: true, status: 200, check: wantHeader("X-A", "1", "3")},
	{name: "expect_continue", fields: get("expect", "100-continue"), body: "hi", status: 200,
		check: func(t *testing.T, o outcome) {
			if _, ok := o.Req.Header["Expect"]; !o.Got100 || ok {
				t.Errorf("want needsContinue and no Expect header: %+v", o)
			}
		}},
	{name: "expect_continue_end_stream", fields: get("expect", "100-Continue"), endStream: true, status: 200},
	{name: "expect_other", fields: get("expect", "something"), endStream: true, status: 200, check: wantHeader("Expect", "something")},
	{name: "trailer_declared", fields: get("trailer", "X-Foo, x-bar,content-length, Transfer-Encoding,trailer"), trailers: hfs("x-foo", "1", "x-bar", "2"), status: 200,
		check: func(t *testing.T, o outcome) {
			want := http.Header{"X-Foo": {"1"}, "X-Bar": {"2"}}
			if _, ok := o.Req.Header["Trailer"]; ok || !reflect.DeepEqual(o.Trailer, want) {
				t.Errorf("Trailer %v, Header %v, want trailers %v and no Trailer header", o.Trailer, o.Req.Header, want)
			}
		}},
	{name: "trailer_declared_none_sent", fields: get("trailer", "x-foo"), status: 200},
	{name: "trailer_undeclared_sent", fields: get(), trailers: hfs("x-foo", "1"), status: 200},
	{name: "trailer_extra_name", fields: get("trailer", "x-foo"), trailers: hfs("x-foo", "1", "x-other", "2"), status: 200},
	{name: "trailer_pseudo", fields: get("trailer", "x-foo"), trailers: hfs(":path", "/", "x-foo", "1"), reason: "trailers_pseudo"},
	{name: "trailer_not_ended", fields: get("trailer", "x-foo"), trailers: hfs("x-foo", "1"), trailOpen: true, reason: "trailers_not_ended"},
	{name: "trailer_bogus", fields: get("trailer", "x-foo"), trailers: hfs("x-foo", "1", "content-length", "5"), reason: "trailers_bogus"},
	{name: "trailer_bogus_undeclared", fields: get(), trailers: hfs("content-length", "5"), status: 200},
	{name: "trailer_uppercase", fields: get("trailer", "x-foo"), trailers: hfs("X-Foo", "1")},
	{name: "trailers_too_many", fields: get("trailer", "x-foo"), trailers: hfs(many(501)...), reason: "trailers_too_large",
		notXNet: "x/net v0.60 has no value count cap"},
	{name: "trailers_too_large", fields: get("trailer", "x-foo"), trailers: hfs(big(3, 7000)...), maxHeader: 16 << 10, reason: "trailers_too_large",
		notXNet: "x/net v0.60 keeps truncated trailers"},
	{name: "trailers_500", fields: get("trailer", "x-0001"), trailers: hfs(many(500)...), status: 200},
	{name: "cl_valid", fields: get("content-length", "10"), body: "0123456789", status: 200, check: wantCL(10)},
	{name: "cl_short_body", fields: get("content-length", "10"), body: "01", status: 200, check: wantCL(10)},
	{name: "cl_zero_end_stream", fields: get("content-length", "0"), endStream: true, status: 200, check: wantCL(0)},
	{name: "cl_valid_end_stream", fields: get("content-length", "10"), endStream: true, reason: "bodyless_content_length",
		notXNet: "x/net v0.60 accepts a Content-Length on a bodyless request"},
	{name: "cl_invalid", fields: get("content-length", "abc"), status: 200, check: wantCL(0)},
	{name: "cl_invalid_end_stream", fields: get("content-length", "abc"), endStream: true, status: 200, check: wantCL(0)},
	{name: "cl_negative", fields: get("content-length", "-1"), status: 200, check: wantCL(0)},
	{name: "cl_plus", fields: get("content-length", "+5"), status: 200, check: wantCL(0)},
	{name: "cl_overflow", fields: get("content-length", "99999999999999999999"), status: 200, check: wantCL(0)},
	{name: "cl_absent", fields: get(), body: "abc", status: 200, check: wantCL(-1)},
	{name: "cl_absent_end_stream", fields: get(), endStream: true, status: 200, check: wantCL(0)},
	{name: "cl_duplicate_equal", fields: get("content-length", "5", "content-length", "5"), body: "12345", status: 200,
		check: wantHeader("Content-Length", "5"), notXNet: "x/net v0.60 keeps both values"},
	{name: "cl_duplicate_differ", fields: get("content-length", "5", "content-length", "6"), body: "12345", reason: "duplicate_content_length",
		notXNet: "x/net v0.60 takes the first value"},
	{name: "connection", fields: get("connection", "close"), endStream: true, status: 400},
	{name: "keep_alive", fields: get("keep-alive", "5"), endStream: true, status: 400},
	{name: "proxy_connection", fields: get("proxy-connection", "keep-alive"), endStream: true, status: 400},
	{name: "transfer_encoding", fields: get("transfer-encoding", "chunked"), endStream: true, status: 400},
	{name: "upgrade", fields: get("upgrade", "websocket"), endStream: true, status: 400},
	{name: "te_gzip", fields: get("te", "gzip"), endStream: true, status: 400},
	{name: "te_trailers", fields: get("te", "trailers"), endStream: true, status: 200},
	{name: "te_empty", fields: get("te", ""), endStream: true, status: 200},
	{name: "te_twice", fields: get("te", "trailers", "te", "trailers"), endStream: true, status: 400},
	{name: "uppercase_name", fields: get("X-Foo", "1"), endStream: true},
	{name: "pseudo_after_regular", fields: hfs(":method", "GET", ":scheme", "https", "x-a", "1", ":path", "/"), endStream: true},
	{name: "unknown_pseudo", fields: append(get(), hfs(":foo", "1")...), endStream: true},
	{name: "duplicate_pseudo", fields: hfs(":method", "GET", ":scheme", "https", ":path", "/", ":path", "/x"), endStream: true},
	{name: "status_in_request", fields: hfs(":status", "200", ":method", "GET", ":scheme", "https", ":path", "/"), endStream: true},
	{name: "nul_in_value", fields: get("x-a", "a\x00b"), endStream: true},
	{name: "del_in_path", fields: hfs(":method", "GET", ":scheme", "https", ":path", "/a\x7f"), endStream: true},
	{name: "header_list_too_long", fields: get(big(3, 7000)...), maxHeader: 16 << 10, endStream: true, status: 431},
	{name: "values_500", fields: get(many(496)...), endStream: true, status: 200},
	{name: "values_501", fields: get(many(497)...), endStream: true, status: 431,
		notXNet: "x/net v0.60 has no value count cap"},
	{name: "trailer_names_501", fields: get("trailer", strings.Repeat("a,", 500)+"a"), endStream: true, status: 431,
		notXNet: "x/net v0.60 has no value count cap"},
	{name: "values_cap_then_continuation", fields: get(many(600)...), splitAt: 510, endStream: true, status: 431,
		notXNet: "x/net v0.60 has no value count cap",
		not127:  "Go 1.27 stops decoding at the cap and closes the connection on the CONTINUATION after it"},
}

// TestRequestAgainstReference sends each case's frames to x/net's
// http2.Server.ServeConn (x/net v0.60's server with Go 1.26, Go 1.27's own
// with Go 1.27) and reads the same frames through this package's functions:
// the outcomes must be equal but for the documented differences, and this
// package's must be the case's.
func TestRequestAgainstReference(t *testing.T) {
	for _, c := range reqCases {
		t.Run(c.name, func(t *testing.T) {
			frames := encode(t, c)
			ours := settled(runOurs(t, c, frames))
			ref := settled(runReference(t, c, frames))

			if c.status == 0 {
				want := ""
				if c.reason != "" {
					want = "stream_PROTOCOL_ERROR_" + c.reason
				}
				if !ours.Reset || ours.Code != http2.ErrCodeProtocol || ours.Count != want {
					t.Errorf("got %+v, want the stream reset with PROTOCOL_ERROR, count %q", ours, want)
				}
			} else if ours.Reset || ours.GoAway || ours.Status != c.status {
				t.Errorf("got %+v, want status %d", ours, c.status)
			}
			if c.check != nil {
				c.check(t, ours)
			}

			note := c.notXNet
			if refGo127 {
				note = c.not127
			}
			switch same := reflect.DeepEqual(ours, ref); {
			case note == "" && !same:
				t.Errorf("differs from the reference:\n ours %+v\n  ref %+v", ours, ref)
			case note != "" && same:
				t.Errorf("documented difference %q not seen: both %+v", note, ours)
			case note != "":
				t.Logf("differs as documented (%s):\n ours %+v\n  ref %+v", note, ours, ref)
			}
		})
	}
}

func TestNewRequestTLSAndContext(t *testing.T) {
	type key struct{}
	ctx := context.WithValue(context.Background(), key{}, "v")
	state := &tls.ConnectionState{ServerName: "example.com"}
	for _, scheme := range []string{"http", "https"} {
		for _, st := range []*tls.ConnectionState{nil, state} {
			f := &http2.MetaHeadersFrame{HeadersFrame: &http2.HeadersFrame{}, Fields: hfs(":method", "GET", ":scheme", scheme, ":authority", "example.com", ":path", "/")}
			req, _, reason := newRequest(ctx, f, connInfo{remoteAddr: "192.0.2.1:5", tls: st}, nil)
			if reason != "" {
				t.Fatalf("%s: reason %q", scheme, reason)
			}
			if req.TLS != st || req.Context() != ctx || req.RemoteAddr != "192.0.2.1:5" || req.Body != nil {
				t.Errorf("%s, tls %v: TLS %v, context %v, RemoteAddr %q, Body %v", scheme, st, req.TLS, req.Context(), req.RemoteAddr, req.Body)
			}
		}
	}
}

func TestRequestContentLength(t *testing.T) {
	for _, c := range []struct {
		values    []string // nil: no header
		endStream bool
		want      int64
		reason    string
		kept      []string
	}{
		{nil, false, -1, "", nil},
		{nil, true, 0, "", nil},
		{[]string{"7"}, false, 7, "", []string{"7"}},
		{[]string{"0"}, true, 0, "", []string{"0"}},
		{[]string{"7"}, true, 0, "bodyless_content_length", nil},
		{[]string{"x"}, true, 0, "", []string{"x"}},
		{[]string{"x"}, false, 0, "", []string{"x"}},
		{[]string{"9223372036854775807"}, false, 1<<63 - 1, "", []string{"9223372036854775807"}},
		{[]string{"9223372036854775808"}, false, 0, "", []string{"9223372036854775808"}},
		{[]string{"7", "7", "7"}, false, 7, "", []string{"7"}},
		{[]string{"7", "7", "8"}, false, 0, "duplicate_content_length", nil},
		{[]string{"7", "8"}, true, 0, "bodyless_content_length", nil},
	} {
		h := http.Header{}
		if c.values != nil {
			h["Content-Length"] = slices.Clone(c.values)
		}
		n, reason := requestContentLength(h, c.endStream)
		if n != c.want || reason != c.reason {
			t.Errorf("%q endStream %v: %d %q, want %d %q", c.values, c.endStream, n, reason, c.want, c.reason)
		}
		if reason == "" && !reflect.DeepEqual(h["Content-Length"], c.kept) {
			t.Errorf("%q endStream %v: header left %q, want %q", c.values, c.endStream, h["Content-Length"], c.kept)
		}
	}
}

func TestLimitHeaderValues(t *testing.T) {
	for _, c := range []struct {
		name   string
		fields []hpack.HeaderField
		limit  int
		keep   int // fields kept; -1: not truncated
	}{
		{"at_limit", get(many(496)...), 500, -1},
		{"over_by_one", get(many(497)...), 500, 500},
		{"pseudo_fields_count", get(many(2)...), 5, 5},
		{"no_limit", get(many(600)...), 0, -1},
		{"trailer_names_counted", hfs("trailer", "a,b,c", "x", "1"), 3, -1},
		{"trailer_names_over", hfs("x", "1", "trailer", "a,b,c,d"), 3, 1},
		{"trailer_count_separate", hfs("trailer", "a,b", "x", "1", "y", "2"), 2, -1},
		{"trailer_fields_add_up", hfs("trailer", "a,b", "trailer", "c,d"), 3, 1},
	} {
		f := &http2.MetaHeadersFrame{HeadersFrame: &http2.HeadersFrame{}, Fields: c.fields}
		truncated := limitHeaderValues(f, c.limit)
		if c.keep < 0 {
			if truncated || f.Truncated || len(f.Fields) != len(c.fields) {
				t.Errorf("%s: truncated to %d fields, want all %d", c.name, len(f.Fields), len(c.fields))
			}
		} else if !truncated || !f.Truncated || len(f.Fields) != c.keep {
			t.Errorf("%s: %d fields kept (truncated %v), want %d", c.name, len(f.Fields), truncated, c.keep)
		}
	}
}

func TestCheckRequestHeadersText(t *testing.T) {
	err := checkRequestHeaders(http.Header{"Connection": {"close"}})
	rec := httptest.NewRecorder()
	badRequestHandler(err).ServeHTTP(rec, nil)
	if want := "request header \"Connection\" is not valid in HTTP/2\n"; rec.Code != 400 || rec.Body.String() != want {
		t.Errorf("%d %q, want 400 %q", rec.Code, rec.Body.String(), want)
	}
	rec = httptest.NewRecorder()
	headerListTooLongHandler(rec, nil)
	if rec.Code != 431 || !strings.Contains(rec.Body.String(), "Request Header Field(s) Too Large") {
		t.Errorf("%d %q, want 431", rec.Code, rec.Body.String())
	}
}

func TestHeaderCanonBound(t *testing.T) {
	var h headerCanon
	for _, common := range []string{"content-type", "accept-encoding", "x-forwarded-for"} {
		if got := h.canonical(common); got != http.CanonicalHeaderKey(common) {
			t.Errorf("canonical(%q) = %q", common, got)
		}
	}
	if len(h.m) != 0 {
		t.Errorf("common names were cached: %v", h.m)
	}
	// Names of 14 bytes are accounted 128 bytes each: exactly 16 fit.
	const n = 1000
	for i := range n {
		name := fmt.Sprintf("x-uncommon-%03d", i)
		if got, want := h.canonical(name), fmt.Sprintf("X-Uncommon-%03d", i); got != want {
			t.Fatalf("canonical(%q) = %q, want %q", name, got, want)
		}
	}
	if want := maxCanonCacheSize / 128; len(h.m) != want || h.size != maxCanonCacheSize {
		t.Errorf("%d entries, %d bytes; want %d entries, %d bytes", len(h.m), h.size, want, maxCanonCacheSize)
	}
	// The first names stay cached; later ones are computed each time.
	if _, ok := h.m["x-uncommon-000"]; !ok {
		t.Error("the first name was not kept")
	}
	if _, ok := h.m["x-uncommon-999"]; ok {
		t.Error("a name past the bound was kept")
	}
	// A longer name no longer fits either.
	h.canonical("x-another-uncommon-name")
	if h.size > maxCanonCacheSize {
		t.Errorf("cache grew to %d bytes, bound %d", h.size, maxCanonCacheSize)
	}
	var nilCanon *headerCanon
	if got := nilCanon.canonical("x-a-b"); got != "X-A-B" {
		t.Errorf("nil canonical = %q", got)
	}
}

// BenchmarkNewRequest builds a browser-like GET.
func BenchmarkNewRequest(b *testing.B) {
	fields := get("user-agent", "Mozilla/5.0", "accept", "text/html", "accept-encoding", "gzip, br",
		"accept-language", "en", "cookie", "a=1", "cookie", "b=2", "sec-fetch-mode", "navigate", "priority", "u=0, i")
	c := connInfo{remoteAddr: "192.0.2.1:5", canon: new(headerCanon)}
	ctx := context.Background()
	b.ReportAllocs()
	for b.Loop() {
		f := &http2.MetaHeadersFrame{HeadersFrame: &http2.HeadersFrame{}, Fields: fields}
		if _, _, reason := newRequest(ctx, f, c, nil); reason != "" {
			b.Fatal(reason)
		}
	}
}
