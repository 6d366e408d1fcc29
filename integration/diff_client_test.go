package integration

// Requests and responses of the differential test (diff_test.go): raw
// request-targets over each protocol, and the comparison of the two
// sites' answers.

import (
	"bytes"
	"compress/gzip"
	"crypto/sha256"
	"errors"
	"fmt"
	"io"
	"mime"
	"net/http"
	"net/url"
	"regexp"
	"slices"
	"strconv"
	"strings"
	"testing"
	"time"

	"github.com/andybalholm/brotli"
	_ "github.com/caddyserver/caddy/v2/modules/standard"
	"github.com/klauspost/compress/zstd"

	"github.com/h2file/caddy-h2file/internal/harness"
)

// diffResponse is what a site answered.
type diffResponse struct {
	status int
	proto  int
	header http.Header
	body   []byte
	err    error
}

// diffClient sends raw requests over one protocol.
type diffClient struct {
	name  string
	major int  // expected ProtoMajor
	plain bool // cleartext HTTP/1.1 (no TLS)
	// to h2_file_server behind h2file's own HTTP/2 engine (HTTP/1.1
	// passes through it to net/http)
	engine bool
	c      *http.Client
}

// diffClients returns a client per protocol: HTTP/2 and HTTP/1.1 over
// TLS, and cleartext HTTP/1.1, with a 10 s timeout.
func diffClients(t *testing.T) []diffClient {
	client := func(proto string) *http.Client {
		c := harness.NewClient(t, proto, nil)
		c.Timeout = 10 * time.Second
		return c
	}
	return []diffClient{
		{name: "h2", major: 2, c: client("h2")},
		{name: "h1", major: 1, c: client("h1")},
		{name: "h1c", major: 1, plain: true, c: client("h1c")},
		{name: "h2-engine", major: 2, engine: true, c: client("h2")},
		{name: "h1-engine", major: 1, engine: true, c: client("h1")},
	}
}

// diffRequest builds a request whose request-target is exactly target, not
// cleaned or re-escaped by the client. Over HTTP/1.1 a target starting with
// "//" is sent in absolute form (the only way to send it); over HTTP/2 the
// client turns that back into the :path "//...".
func diffRequest(method string, site diffSite, target string, headers [][2]string) (*http.Request, error) {
	host := fmt.Sprintf("127.0.0.1:%d", site.port)
	scheme := "http"
	if site.tls {
		scheme = "https"
	}
	req, err := http.NewRequest(method, scheme+"://"+host+"/", nil)
	if err != nil {
		return nil, err
	}
	if strings.HasPrefix(target, "//") {
		req.URL.Opaque = "//" + host + target
	} else {
		req.URL.Opaque = target
	}
	for _, h := range headers {
		if strings.EqualFold(h[0], "Host") {
			req.Host = h[1]
			continue
		}
		req.Header.Add(h[0], h[1])
	}
	return req, nil
}

// diffDo sends one request and reads the whole response.
func diffDo(dc diffClient, method string, site diffSite, target string, headers [][2]string) diffResponse {
	req, err := diffRequest(method, site, target, headers)
	if err != nil {
		return diffResponse{err: err}
	}
	resp, err := dc.c.Do(req)
	if err != nil {
		return diffResponse{err: err}
	}
	defer resp.Body.Close()
	body, err := io.ReadAll(io.LimitReader(resp.Body, 16<<20))
	return diffResponse{status: resp.StatusCode, proto: resp.ProtoMajor, header: resp.Header, body: body, err: err}
}

// diffNormalize removes what legitimately differs between the two sites:
//   - the Date header;
//   - their port numbers, in any header value (e.g. Location, Alt-Svc) and
//     in transport error messages, replaced by ":{PORT}";
//   - the random multipart/byteranges boundary, replaced in Content-Type and
//     body by "{BOUNDARY}" (it has a fixed length, so Content-Length is
//     unaffected);
//   - the random CSP nonce of browse listings, replaced in
//     Content-Security-Policy and body by "{NONCE}" (also fixed-length).
func diffNormalize(r diffResponse, port int) diffResponse {
	portStr := ":" + strconv.Itoa(port)
	if r.err != nil {
		r.err = errors.New(strings.ReplaceAll(r.err.Error(), portStr, ":{PORT}"))
		return r
	}
	h := r.header.Clone()
	h.Del("Date")
	for k, vs := range h {
		for i, v := range vs {
			vs[i] = strings.ReplaceAll(v, portStr, ":{PORT}")
		}
		h[k] = vs
	}
	body := r.body
	if ct := h.Get("Content-Type"); strings.HasPrefix(ct, "multipart/") {
		if _, params, err := mime.ParseMediaType(ct); err == nil && params["boundary"] != "" {
			boundary := params["boundary"]
			h.Set("Content-Type", strings.ReplaceAll(ct, boundary, "{BOUNDARY}"))
			body = bytes.ReplaceAll(body, []byte(boundary), []byte("{BOUNDARY}"))
		}
	}
	if csp := h.Get("Content-Security-Policy"); csp != "" {
		if m := diffNonce.FindStringSubmatch(csp); m != nil {
			h.Set("Content-Security-Policy", strings.ReplaceAll(csp, m[1], "{NONCE}"))
			body = bytes.ReplaceAll(body, []byte(m[1]), []byte("{NONCE}"))
		}
	}
	r.header = h
	r.body = body
	return r
}

var diffNonce = regexp.MustCompile(`'nonce-([^']+)'`)

// diffCompare returns a description of the differences, or "".
func diffCompare(fs, h2 diffResponse) string {
	var d []string
	if fs.err != nil || h2.err != nil {
		// both failed the same way, e.g. a request the server refused
		if fs.err != nil && h2.err != nil && fs.err.Error() == h2.err.Error() {
			return ""
		}
		return fmt.Sprintf("transport error differs: file_server=%v h2_file_server=%v", fs.err, h2.err)
	}
	if fs.status != h2.status {
		d = append(d, fmt.Sprintf("status: %d != %d", fs.status, h2.status))
	}
	// bodies compressed differently (by encode, and from h2_file_server's
	// variant, or by encode fed other writes) have lengths of their own,
	// and net/http frames each by its length
	coding := fs.header.Get("Content-Encoding")
	recompressed := !bytes.Equal(fs.body, h2.body) && (coding == "gzip" || coding == "zstd") && coding == h2.header.Get("Content-Encoding")
	keys := map[string]bool{}
	for k := range fs.header {
		keys[k] = true
	}
	for k := range h2.header {
		keys[k] = true
	}
	for _, k := range slices.Sorted(func(yield func(string) bool) {
		for k := range keys {
			if !yield(k) {
				return
			}
		}
	}) {
		a, aok := fs.header[k]
		b, bok := h2.header[k]
		if k == "Content-Length" && recompressed {
			// net/http gives a body a Content-Length when the handler
			// returns with all of it still in the response buffer (4 KiB
			// on HTTP/2, 2 KiB on HTTP/1.1), else none: each response must
			// follow that rule for its own length, and state it right
			for _, r := range []diffResponse{fs, h2} {
				limit := 4 << 10
				if r.proto == 1 {
					limit = 2 << 10
				}
				cl, has := r.header[k]
				switch {
				case has != (len(r.body) <= limit):
					d = append(d, fmt.Sprintf("Content-Length %s for a %d-byte body over HTTP/%d", diffHeaderValue(cl, has), len(r.body), r.proto))
				case has && r.header.Get(k) != strconv.Itoa(len(r.body)):
					d = append(d, fmt.Sprintf("Content-Length %s for a %d-byte body", r.header.Get(k), len(r.body)))
				}
			}
			continue
		}
		if aok != bok || !slices.Equal(a, b) {
			d = append(d, fmt.Sprintf("header %s: %s != %s", k, diffHeaderValue(a, aok), diffHeaderValue(b, bok)))
		}
	}
	if recompressed {
		// compressed by encode and from h2_file_server's variant: the
		// bytes may differ, what they decode to must not
		a, errA := diffDecode(coding, fs.body)
		b, errB := diffDecode(coding, h2.body)
		switch {
		case errA != nil || errB != nil:
			d = append(d, fmt.Sprintf("%s body does not decode: file_server: %v, h2_file_server: %v", coding, errA, errB))
		case !bytes.Equal(a, b):
			d = append(d, fmt.Sprintf("%s bodies decode to different bytes (%d and %d)", coding, len(a), len(b)))
		}
	} else if !bytes.Equal(fs.body, h2.body) {
		i := 0
		for i < len(fs.body) && i < len(h2.body) && fs.body[i] == h2.body[i] {
			i++
		}
		d = append(d, fmt.Sprintf("body differs at byte %d (lengths %d and %d)", i, len(fs.body), len(h2.body)))
	}
	return strings.Join(d, "\n  ")
}

// diffDecode decodes a gzip, br or zstd body.
func diffDecode(coding string, body []byte) ([]byte, error) {
	var r io.Reader
	switch coding {
	case "gzip":
		zr, err := gzip.NewReader(bytes.NewReader(body))
		if err != nil {
			return nil, err
		}
		r = zr
	case "br":
		r = brotli.NewReader(bytes.NewReader(body))
	case "zstd":
		zr, err := zstd.NewReader(bytes.NewReader(body))
		if err != nil {
			return nil, err
		}
		defer zr.Close()
		r = zr
	}
	return io.ReadAll(r)
}

func diffHeaderValue(v []string, ok bool) string {
	if !ok {
		return "(absent)"
	}
	return fmt.Sprintf("%q", v)
}

// diffFormat prints a response for a failure message.
func diffFormat(r diffResponse) string {
	if r.err != nil {
		return "  error: " + r.err.Error()
	}
	var b strings.Builder
	fmt.Fprintf(&b, "  HTTP/%d %d\n", r.proto, r.status)
	for _, k := range slices.Sorted(func(yield func(string) bool) {
		for k := range r.header {
			if !yield(k) {
				return
			}
		}
	}) {
		fmt.Fprintf(&b, "  %s: %q\n", k, r.header[k])
	}
	const limit = 400
	body := r.body
	suffix := ""
	if len(body) > limit {
		body, suffix = body[:limit], fmt.Sprintf("... (%d bytes)", len(r.body))
	}
	fmt.Fprintf(&b, "  body sha256=%x: %q%s", sha256.Sum256(r.body), body, suffix)
	return b.String()
}

var diffPlaceholder = regexp.MustCompile(`\{(etag|lastmod):([^;}]+)(?:;([^}]*))?\}`)

// diffResolver replaces {etag:PATH} / {etag:PATH;ENCODING} and
// {lastmod:PATH} placeholders by the ETag / Last-Modified that the
// file_server site of the configuration gives for a GET of PATH (with that
// Accept-Encoding). A missing header becomes "unresolved".
type diffResolver struct {
	dc    diffClient
	site  diffSite
	cache map[string]string
}

func (r *diffResolver) expand(s string) string {
	return diffPlaceholder.ReplaceAllStringFunc(s, func(m string) string {
		if v, ok := r.cache[m]; ok {
			return v
		}
		sub := diffPlaceholder.FindStringSubmatch(m)
		var hdrs [][2]string
		if sub[3] != "" {
			hdrs = append(hdrs, [2]string{"Accept-Encoding", sub[3]})
		}
		resp := diffDo(r.dc, http.MethodGet, r.site, sub[2], hdrs)
		v := ""
		if resp.err == nil {
			if sub[1] == "etag" {
				v = resp.header.Get("Etag")
			} else {
				v = resp.header.Get("Last-Modified")
			}
		}
		if v == "" {
			v = `"unresolved"`
		}
		r.cache[m] = v
		return v
	})
}

// diffH2Unsendable reports whether target is not a valid request-target
// (e.g. a bad percent-escape). Go's HTTP/1.1 server answers such requests
// with 400 before Caddy sees them; its HTTP/2 server leaves them unanswered,
// so they are not sent over HTTP/2.
func diffH2Unsendable(target string) bool {
	if target == "*" {
		return false
	}
	_, err := url.ParseRequestURI(target)
	return err != nil
}
