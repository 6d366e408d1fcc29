package h2file

// Differential test: every request of the corpus in testdata/diff/*.txt is
// sent to two sites on the same root, one served by Caddy's file_server and
// one by h2_file_server, with the same handler options, in each
// configuration of diffConfigs, over HTTP/2 with TLS, HTTP/1.1 with TLS and
// cleartext HTTP/1.1. Status, every header except Date, and the body must
// be identical (after diffNormalize). See testdata/diff/corpus.txt for the
// corpus format, difffixture_test.go for the files and configurations.
//
// Run with: go test -race -run Diff -count=1 .
// Environment:
//
//	DIFF_CADDY_LOG=1        Caddy's logs, at debug level, on stderr

import (
	"bufio"
	"bytes"
	"crypto/sha256"
	"crypto/tls"
	"errors"
	"fmt"
	"io"
	"mime"
	"net"
	"net/http"
	"net/url"
	"os"
	"path/filepath"
	"regexp"
	"slices"
	"sort"
	"strconv"
	"strings"
	"testing"
	"time"

	"github.com/caddyserver/caddy/v2"
	"github.com/caddyserver/caddy/v2/modules/caddyhttp"
	"github.com/caddyserver/caddy/v2/modules/caddyhttp/fileserver"
	_ "github.com/caddyserver/caddy/v2/modules/standard"
)

// diffEntry is one request of the corpus.
type diffEntry struct {
	file      string
	line      int
	method    string
	target    string      // raw request-target, sent as is
	headers   [][2]string // in order; values may hold placeholders
	knownDiff string      // reason, if marked "# KNOWN-DIFF"
}

func (e diffEntry) String() string {
	var b strings.Builder
	fmt.Fprintf(&b, "%s:%d: %s %s", filepath.Base(e.file), e.line, e.method, e.target)
	for _, h := range e.headers {
		fmt.Fprintf(&b, "\n    %s: %s", h[0], h[1])
	}
	return b.String()
}

// diffLoadCorpus reads every testdata/diff/*.txt file.
func diffLoadCorpus(t *testing.T) []diffEntry {
	t.Helper()
	files, err := filepath.Glob(filepath.Join("testdata", "diff", "*.txt"))
	if err != nil || len(files) == 0 {
		t.Fatalf("no corpus files in testdata/diff: %v", err)
	}
	sort.Strings(files)
	var entries []diffEntry
	for _, file := range files {
		data, err := os.ReadFile(file)
		if err != nil {
			t.Fatal(err)
		}
		sc := bufio.NewScanner(bytes.NewReader(data))
		for line := 1; sc.Scan(); line++ {
			text := strings.TrimRight(sc.Text(), "\r")
			if strings.TrimSpace(text) == "" || strings.HasPrefix(strings.TrimSpace(text), "#") {
				continue
			}
			fields := strings.Split(text, "\t")
			e := diffEntry{file: file, line: line}
			var rest []string
			for i, f := range fields {
				if strings.HasPrefix(strings.TrimSpace(f), "#") {
					comment := strings.TrimSpace(strings.Join(fields[i:], " "))
					if r, ok := strings.CutPrefix(comment, "# KNOWN-DIFF"); ok {
						e.knownDiff = strings.TrimSpace(r)
						if e.knownDiff == "" {
							e.knownDiff = "(no reason given)"
						}
					}
					break
				}
				if f == "" {
					continue // allow runs of tabs
				}
				rest = append(rest, f)
			}
			if len(rest) < 2 {
				t.Fatalf("%s:%d: want METHOD<TAB>TARGET[<TAB>Header: value...], got %q", file, line, text)
			}
			e.method, e.target = rest[0], rest[1]
			for _, h := range rest[2:] {
				name, value, ok := strings.Cut(h, ":")
				if !ok || strings.TrimSpace(name) == "" {
					t.Fatalf("%s:%d: bad header field %q", file, line, h)
				}
				e.headers = append(e.headers, [2]string{strings.TrimSpace(name), strings.TrimSpace(value)})
			}
			entries = append(entries, e)
		}
		if err := sc.Err(); err != nil {
			t.Fatal(err)
		}
	}
	return entries
}

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
	c     *http.Client
}

func diffClients() []diffClient {
	tlsConf := func(protos ...string) *tls.Config {
		return &tls.Config{
			ServerName:         "localhost",
			InsecureSkipVerify: true, //nolint:gosec // the test CA is ephemeral
			NextProtos:         protos,
		}
	}
	noRedirect := func(*http.Request, []*http.Request) error { return http.ErrUseLastResponse }
	h2 := &http.Transport{
		TLSClientConfig:     tlsConf("h2", "http/1.1"),
		ForceAttemptHTTP2:   true,
		DisableCompression:  true,
		MaxIdleConnsPerHost: 4,
	}
	h1 := &http.Transport{
		TLSClientConfig:     tlsConf("http/1.1"),
		TLSNextProto:        map[string]func(string, *tls.Conn) http.RoundTripper{},
		DisableCompression:  true,
		MaxIdleConnsPerHost: 4,
	}
	h1c := &http.Transport{
		DisableCompression:  true,
		MaxIdleConnsPerHost: 4,
	}
	client := func(tr http.RoundTripper) *http.Client {
		return &http.Client{Transport: tr, CheckRedirect: noRedirect, Timeout: 10 * time.Second}
	}
	return []diffClient{
		{name: "h2", major: 2, c: client(h2)},
		{name: "h1", major: 1, c: client(h1)},
		{name: "h1c", major: 1, plain: true, c: client(h1c)},
	}
}

func (dc diffClient) close() {
	dc.c.Transport.(*http.Transport).CloseIdleConnections()
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
		if aok != bok || !slices.Equal(a, b) {
			d = append(d, fmt.Sprintf("header %s: %s != %s", k, diffHeaderValue(a, aok), diffHeaderValue(b, bok)))
		}
	}
	if !bytes.Equal(fs.body, h2.body) {
		i := 0
		for i < len(fs.body) && i < len(h2.body) && fs.body[i] == h2.body[i] {
			i++
		}
		d = append(d, fmt.Sprintf("body differs at byte %d (lengths %d and %d)", i, len(fs.body), len(h2.body)))
	}
	return strings.Join(d, "\n  ")
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

// diffStartCaddy assigns ports, loads the Caddy config and waits until
// every server answers (TLS needs the certificate, which the internal
// issuer obtains asynchronously). It stops Caddy when the test ends.
func diffStartCaddy(t *testing.T, d diffFixtureDirs, cfgs []*diffConfig) (echo diffSite) {
	t.Helper()
	// nothing may go to the user's own Caddy directories
	t.Setenv("XDG_DATA_HOME", filepath.Join(d.base, "xdg-data"))
	t.Setenv("XDG_CONFIG_HOME", filepath.Join(d.base, "xdg-config"))

	ports := diffFreePorts(t, 4*len(cfgs)+2)
	var all []diffSite
	for i, c := range cfgs {
		c.fs = diffSite{name: "fs_" + c.name, port: ports[4*i], tls: true}
		c.h2 = diffSite{name: "h2_" + c.name, port: ports[4*i+1], tls: true}
		c.fsPlain = diffSite{name: "fsplain_" + c.name, port: ports[4*i+2]}
		c.h2Plain = diffSite{name: "h2plain_" + c.name, port: ports[4*i+3]}
		all = append(all, c.fs, c.h2, c.fsPlain, c.h2Plain)
	}
	httpPort := ports[len(ports)-2]
	echo = diffSite{name: "echo", port: ports[len(ports)-1], tls: true}
	all = append(all, echo)

	logOutput, level := "discard", "ERROR"
	if os.Getenv("DIFF_CADDY_LOG") != "" {
		logOutput, level = "stderr", "DEBUG"
	}
	cfgJSON, err := diffCaddyJSON(d, filepath.Join(d.base, "caddy-storage"), httpPort, echo, logOutput, cfgs)
	if err != nil {
		t.Fatal(err)
	}
	cfgJSON = bytes.Replace(cfgJSON, []byte(`"level": "ERROR"`), []byte(`"level": "`+level+`"`), 1)
	if err := caddy.Load(cfgJSON, true); err != nil {
		t.Fatalf("loading Caddy config: %v\n%s", err, cfgJSON)
	}
	t.Cleanup(func() {
		if err := caddy.Stop(); err != nil {
			t.Errorf("stopping Caddy: %v", err)
		}
	})

	deadline := time.Now().Add(30 * time.Second)
	for _, site := range all {
		for {
			addr := fmt.Sprintf("127.0.0.1:%d", site.port)
			dialer := &net.Dialer{Timeout: time.Second}
			var conn net.Conn
			var err error
			if site.tls {
				conn, err = tls.DialWithDialer(dialer, "tcp", addr,
					&tls.Config{ServerName: "localhost", InsecureSkipVerify: true}) //nolint:gosec
			} else {
				conn, err = dialer.Dial("tcp", addr)
			}
			if err == nil {
				conn.Close()
				break
			}
			if time.Now().After(deadline) {
				t.Fatalf("server %s on port %d not ready: %v", site.name, site.port, err)
			}
			time.Sleep(20 * time.Millisecond)
		}
	}
	return echo
}

// diffCheckHandlers makes sure the running config really serves the
// h2_file_server sites with h2_file_server and the others with file_server.
func diffCheckHandlers(t *testing.T, cfgs []*diffConfig) {
	t.Helper()
	app, err := caddy.ActiveContext().AppIfConfigured("http")
	if err != nil {
		t.Fatal(err)
	}
	httpApp := app.(*caddyhttp.App)
	count := func(routes caddyhttp.RouteList) (fsN, h2N int) {
		for _, r := range routes {
			for _, h := range r.Handlers {
				switch h.(type) {
				case *fileserver.FileServer:
					fsN++
				case *Handler:
					h2N++
				}
			}
		}
		return fsN, h2N
	}
	for _, c := range cfgs {
		for _, s := range c.allSites() {
			srv := httpApp.Servers[s.site.name]
			if srv == nil {
				t.Fatalf("server %s not running", s.site.name)
			}
			fsN, h2N := count(srv.Routes)
			if srv.Errors != nil {
				f, h := count(srv.Errors.Routes)
				fsN, h2N = fsN+f, h2N+h
			}
			if s.h2 && (h2N == 0 || fsN != 0) || !s.h2 && (fsN == 0 || h2N != 0) {
				t.Fatalf("server %s: %d file_server and %d h2_file_server handlers", s.site.name, fsN, h2N)
			}
		}
	}
}

func TestDiffFileServer(t *testing.T) {
	start := time.Now()
	entries := diffLoadCorpus(t)
	if len(entries) < 150 {
		t.Fatalf("corpus has only %d requests, want at least 150", len(entries))
	}
	d := diffFixture(t)
	cfgs := diffConfigs(d)
	sanity := diffSanityConfig(d)
	echo := diffStartCaddy(t, d, append(slices.Clone(cfgs), sanity))
	diffCheckHandlers(t, append(slices.Clone(cfgs), sanity))

	clients := diffClients()
	defer func() {
		for _, dc := range clients {
			dc.close()
		}
	}()

	// the comparison must be able to fail: with another root, the
	// h2_file_server site answers differently
	t.Run("sanity_mismatch_detected", func(t *testing.T) {
		for _, dc := range clients {
			fsSite, h2Site := sanity.sites(dc)
			fs := diffDo(dc, http.MethodGet, fsSite, "/index.html", nil)
			h2 := diffDo(dc, http.MethodGet, h2Site, "/index.html", nil)
			if fs.err != nil || h2.err != nil || fs.status != 200 || h2.status != 200 {
				t.Fatalf("%s: want two 200 responses, got %d (%v) and %d (%v)", dc.name, fs.status, fs.err, h2.status, h2.err)
			}
			if diffCompare(diffNormalize(fs, fsSite.port), diffNormalize(h2, h2Site.port)) == "" {
				t.Fatalf("%s: sites with different roots compared equal", dc.name)
			}
		}
	})

	// the request-targets must reach Caddy as written in the corpus, not
	// cleaned or re-escaped by the client
	t.Run("raw_targets_arrive_unchanged", func(t *testing.T) {
		seen := map[string]bool{}
		sent, rejected := 0, 0
		for _, e := range entries {
			if seen[e.target] || e.target == "*" {
				continue
			}
			seen[e.target] = true
			for _, dc := range clients {
				if dc.plain || dc.major == 2 && diffH2Unsendable(e.target) {
					continue // the echo site is TLS only
				}
				sent++
				resp := diffDo(dc, http.MethodGet, echo, e.target, nil)
				if resp.err != nil || resp.status != http.StatusOK {
					// refused by Go's client or server before Caddy's
					// handlers; both sites get the same treatment
					rejected++
					t.Logf("%s: %s: not delivered to Caddy: status %d, error %v", e, dc.name, resp.status, resp.err)
					continue
				}
				got := strings.TrimPrefix(string(resp.body), fmt.Sprintf("https://127.0.0.1:%d", echo.port))
				if got != e.target {
					t.Errorf("%s: %s: target %q arrived as %q", e, dc.name, e.target, got)
				}
			}
		}
		t.Logf("%d of %d targets delivered verbatim", sent-rejected, sent)
		if rejected > sent/20 {
			t.Errorf("%d of %d targets not delivered; too many to be useful", rejected, sent)
		}
	})

	for _, c := range cfgs {
		t.Run(c.name, func(t *testing.T) {
			statuses := map[int]int{}
			encodings := map[string]bool{}
			var seen strings.Builder // small bodies and header lines, for diffWantSeen
			for _, dc := range clients {
				t.Run(dc.name, func(t *testing.T) {
					fsSite, h2Site := c.sites(dc)
					res := &diffResolver{dc: dc, site: fsSite, cache: map[string]string{}}
					for _, e := range entries {
						name := fmt.Sprintf("L%03d_%s_%s", e.line, e.method, e.target)
						if base := filepath.Base(e.file); base != "corpus.txt" {
							name = strings.TrimSuffix(base, ".txt") + "_" + name
						}
						if len(name) > 60 {
							name = name[:60]
						}
						t.Run(name, func(t *testing.T) {
							if e.knownDiff != "" {
								t.Skipf("KNOWN-DIFF: %s", e.knownDiff)
							}
							if dc.major == 2 && diffH2Unsendable(e.target) {
								t.Skipf("%s: not a valid request-target; Go's HTTP/2 server never answers it (the client times out), before Caddy sees it", e)
							}
							hdrs := make([][2]string, len(e.headers))
							for i, h := range e.headers {
								hdrs[i] = [2]string{h[0], res.expand(h[1])}
							}
							fs := diffDo(dc, e.method, fsSite, e.target, hdrs)
							h2 := diffDo(dc, e.method, h2Site, e.target, hdrs)
							for _, r := range []diffResponse{fs, h2} {
								if r.err == nil && r.proto != dc.major {
									t.Fatalf("%s: response over HTTP/%d, want HTTP/%d", e, r.proto, dc.major)
								}
							}
							if fs.err == nil {
								statuses[fs.status]++
								encodings[fs.header.Get("Content-Encoding")] = true
								for k, vs := range fs.header {
									for _, v := range vs {
										fmt.Fprintf(&seen, "%s: %s\n", k, v)
									}
								}
								if len(fs.body) < 4096 {
									seen.Write(fs.body)
								}
							}
							// no way out of the root but through the
							// symlinks that point there
							for _, r := range []diffResponse{fs, h2} {
								if bytes.Contains(r.body, []byte("TOP SECRET")) && !strings.Contains(e.target, "link-out") {
									t.Errorf("%s: served a file outside the root", e)
								}
							}
							nfs, nh2 := diffNormalize(fs, fsSite.port), diffNormalize(h2, h2Site.port)
							if diff := diffCompare(nfs, nh2); diff != "" {
								var sent strings.Builder
								for _, h := range hdrs {
									fmt.Fprintf(&sent, "\n    %s: %s", h[0], h[1])
								}
								t.Errorf("responses differ (config %s, %s)\nrequest %s%s\ndifferences:\n  %s\nfile_server:\n%s\nh2_file_server:\n%s",
									c.name, dc.name, e, sent.String(), diff, diffFormat(nfs), diffFormat(nh2))
							} else if fs.err != nil {
								t.Logf("%s: both sites: request failed the same way: %v", e, nfs.err)
							}
						})
					}
				})
			}
			t.Logf("statuses seen: %v", statuses)

			// the corpus must exercise much more than 404s
			want := []int{200, 404}
			switch c.name {
			case "defaults":
				want = []int{200, 206, 304, 308, 400, 404, 405, 412, 416}
			case "status_418":
				want = []int{418, 404, 405}
			case "pass_thru":
				want = []int{200, 299, 405}
			case "errors_headers":
				want = []int{200, 304, 400, 404, 405}
			}
			for _, s := range want {
				if statuses[s] == 0 {
					t.Errorf("config %s: no response with status %d; the corpus does not cover it", c.name, s)
				}
			}
			if c.name == "precompressed_hide_index" {
				for _, enc := range []string{"br", "zstd", "gzip", ""} {
					if !encodings[enc] {
						t.Errorf("config %s: no response with Content-Encoding %q", c.name, enc)
					}
				}
			}
			for _, want := range diffWantSeen[c.name] {
				if !strings.Contains(seen.String(), want) {
					t.Errorf("config %s: no response has %q; the configuration or the corpus is not exercised", c.name, want)
				}
			}
		})
	}

	t.Run("modified_between_requests", func(t *testing.T) {
		diffModified(t, d, cfgs[0], clients)
	})

	t.Logf("%d corpus requests x %d configs x %d protocols x 2 sites in %v",
		len(entries), len(cfgs), len(clients), time.Since(start))
}

// diffWantSeen lists, per configuration, text that some file_server
// response of the corpus must contain (in a small body, or as a
// "Header: value" line), to prove the configuration's feature is exercised.
var diffWantSeen = map[string][]string{
	"defaults": {
		"Hello, world!", "dir index", "deeper index.txt", "TOP SECRET", "Location: /dir/\n",
		"Location: /dir/?x=1&y=2\n", "Content-Type: multipart/byteranges", "Allow: GET, HEAD\n",
	},
	"precompressed_hide_index": {
		"BROTLI style.css sidecar", "ZSTD style.css sidecar", "GZIP style.css sidecar",
		"GZIP notes sidecar", "dir2 default.htm", "idxhidden default.htm", "GZIP dir index sidecar",
		"Vary: Accept-Encoding\n",
	},
	"etag_files": {`Etag: "hello-sidecar-etag"`, `Etag: "gz-sidecar-etag"`, `Etag: W/"weak-one"`, "Etag: no-quotes\n"},
	"status_418": {"Hello, world!"},
	"pass_thru":  {"passed through: /does-not-exist.txt", "X-Pass-Thru: yes"},
	"browse": {
		"Content-Type: text/html; charset=utf-8", "Content-Type: application/json", `"name":"file.txt"`,
		"Content-Security-Policy: ",
	},
	"no_index": {"Content-Type: application/json", "Location: /dir/\n"},
	"errors_headers": {
		"error page 404", "error page 405", "error page 400", `Etag: "from-headers"`,
		"Content-Type: text/x-custom",
	},
}

// diffRevalidateMax is how long h2_file_server may serve a changed file's
// previous version: its cache's default revalidation interval (1s, see
// CacheConfig.Revalidate) plus a margin for slow (-race) runs.
const diffRevalidateMax = 2500 * time.Millisecond

// diffModified changes files between requests (rewritten in place longer,
// with the same size and shorter; replaced by rename; removed; created
// again) and checks that both sites serve the new state.
//
// h2_file_server's open-file cache re-checks a path at most every
// revalidate interval (default 1s), so right after a change it may still
// answer with the previous state, but only with a whole, consistent
// previous response (the one file_server gave before the change): never
// previous headers with other bytes, and never an error. Within
// diffRevalidateMax both sites must agree on the new state.
func diffModified(t *testing.T, d diffFixtureDirs, c *diffConfig, clients []diffClient) {
	type key struct{ client, method, target string }
	prev := map[key]diffResponse{} // last agreed file_server response, normalized
	methods := []string{http.MethodGet, http.MethodHead}

	// check compares both sites for every file, client and method: once
	// right after the change, then until they agree (at most
	// diffRevalidateMax), and checks the agreed response against want
	// (nil: 404).
	check := func(t *testing.T, want map[string][]byte) {
		for target := range want {
			for _, dc := range clients {
				fsSite, h2Site := c.sites(dc)
				for _, method := range methods {
					fs := diffDo(dc, method, fsSite, target, nil)
					h2 := diffDo(dc, method, h2Site, target, nil)
					nfs, nh2 := diffNormalize(fs, fsSite.port), diffNormalize(h2, h2Site.port)
					diff := diffCompare(nfs, nh2)
					if diff == "" {
						continue
					}
					if old, ok := prev[key{dc.name, method, target}]; ok && diffCompare(old, nh2) == "" {
						continue // stale but whole: allowed within the revalidate interval
					}
					t.Errorf("%s %s %s right after the change: h2_file_server's answer is neither the new state nor the whole previous one:\n  %s\nfile_server:\n%s\nh2_file_server:\n%s",
						dc.name, method, target, diff, diffFormat(nfs), diffFormat(nh2))
				}
			}
		}
		deadline := time.Now().Add(diffRevalidateMax)
		for target, content := range want {
			for _, dc := range clients {
				fsSite, h2Site := c.sites(dc)
				for _, method := range methods {
					for {
						fs := diffDo(dc, method, fsSite, target, nil)
						h2 := diffDo(dc, method, h2Site, target, nil)
						nfs, nh2 := diffNormalize(fs, fsSite.port), diffNormalize(h2, h2Site.port)
						diff := diffCompare(nfs, nh2)
						if diff != "" {
							if time.Now().After(deadline) {
								t.Errorf("%s %s %s: the sites still differ %v after the change:\n  %s\nfile_server:\n%s\nh2_file_server:\n%s",
									dc.name, method, target, diffRevalidateMax, diff, diffFormat(nfs), diffFormat(nh2))
								break
							}
							time.Sleep(50 * time.Millisecond)
							continue
						}
						switch {
						case fs.err != nil:
							t.Fatalf("%s %s %s: %v", dc.name, method, target, fs.err)
						case content == nil && fs.status != http.StatusNotFound:
							t.Errorf("%s %s %s: status %d, want 404", dc.name, method, target, fs.status)
						case content != nil && fs.status != http.StatusOK:
							t.Errorf("%s %s %s: status %d, want 200", dc.name, method, target, fs.status)
						case content != nil && method == http.MethodGet && !bytes.Equal(fs.body, content):
							t.Errorf("%s %s: body is not the new content:\n%s", dc.name, target, diffFormat(nfs))
						case content != nil && fs.header.Get("Content-Length") != strconv.Itoa(len(content)):
							t.Errorf("%s %s %s: Content-Length %q, want %d", dc.name, method, target, fs.header.Get("Content-Length"), len(content))
						}
						prev[key{dc.name, method, target}] = nfs
						break
					}
				}
			}
		}
	}
	write := func(t *testing.T, name string, content []byte, mtime time.Time) {
		if err := os.WriteFile(name, content, 0o644); err != nil {
			t.Fatal(err)
		}
		if err := os.Chtimes(name, mtime, mtime); err != nil {
			t.Fatal(err)
		}
	}

	// one file small enough for the cache to keep in memory, one large
	// enough to be read from a kept descriptor; both change at each step
	targets := []string{"/mutable.txt", "/mutable.bin"}
	orig := map[string][]byte{}
	content := map[string][]byte{}
	for _, target := range targets {
		b, err := os.ReadFile(filepath.Join(d.root, filepath.FromSlash(target)))
		if err != nil {
			t.Fatal(err)
		}
		orig[target], content[target] = b, b
	}
	steps := []struct {
		name   string
		change func(t *testing.T, name, target string)
	}{
		{"unchanged", func(t *testing.T, name, target string) {}},
		{"rewritten_in_place_longer", func(t *testing.T, name, target string) {
			content[target] = append(bytes.ToUpper(orig[target]), "appended\n"...)
			write(t, name, content[target], diffMtime.Add(time.Hour))
		}},
		{"rewritten_in_place_same_size", func(t *testing.T, name, target string) {
			b := bytes.ToLower(content[target])
			b[0] ^= 1
			content[target] = b
			write(t, name, b, diffMtime.Add(2*time.Hour))
		}},
		{"rewritten_in_place_shorter", func(t *testing.T, name, target string) {
			content[target] = content[target][:len(content[target])/2]
			write(t, name, content[target], diffMtime.Add(3*time.Hour))
		}},
		{"replaced_by_rename", func(t *testing.T, name, target string) {
			content[target] = append([]byte("replaced by rename\n"), orig[target]...)
			write(t, name+".tmp", content[target], diffMtime.Add(4*time.Hour))
			if err := os.Rename(name+".tmp", name); err != nil {
				t.Fatal(err)
			}
		}},
		{"removed", func(t *testing.T, name, target string) {
			content[target] = nil
			if err := os.Remove(name); err != nil {
				t.Fatal(err)
			}
		}},
		{"created_again", func(t *testing.T, name, target string) {
			content[target] = []byte("created again\n")
			write(t, name, content[target], diffMtime.Add(5*time.Hour))
		}},
	}
	for _, step := range steps {
		t.Run(step.name, func(t *testing.T) {
			for _, target := range targets {
				step.change(t, filepath.Join(d.root, filepath.FromSlash(target)), target)
			}
			check(t, content)
		})
	}
}
