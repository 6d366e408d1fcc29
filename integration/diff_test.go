package integration

// Differential test: every request of the corpus in testdata/diff/*.txt is
// sent to two sites on the same root, one served by Caddy's file_server and
// one by h2_file_server (behind the listener wrappers README recommends:
// coalesce on both sides of tls), with the same handler options, in each
// configuration of diffConfigs, over HTTP/2 with TLS, HTTP/1.1 with TLS and
// cleartext HTTP/1.1. Status, every header except Date, and the body must
// be identical (after diffNormalize). See testdata/diff/corpus.txt for the
// corpus format, difffixture_test.go for the files, diff_configs_test.go
// for the configurations.
//
// Run with: go test -race -run Diff -count=1 .
// Environment:
//
//	DIFF_CADDY_LOG=1        Caddy's logs, at debug level, on stderr

import (
	"bytes"
	"fmt"
	"net/http"
	"path/filepath"
	"slices"
	"strings"
	"testing"
	"time"

	_ "github.com/caddyserver/caddy/v2/modules/standard"
	"github.com/prometheus/client_golang/prometheus/testutil"

	"github.com/h2file/caddy-h2file/internal/coalesce"
	"github.com/h2file/caddy-h2file/internal/harness"
)

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

	clients := diffClients(t)

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
			// the h2_file_server site's bytes went through the wrapper (its
			// flusher counts them after the socket write, so maybe after
			// the client has read them)
			sent := testutil.ToFloat64(coalesce.Metrics.Bytes)
			if again := diffDo(dc, http.MethodGet, h2Site, "/index.html", nil); again.err != nil {
				t.Fatalf("%s: %v", dc.name, again.err)
			}
			harness.WaitUntil(t, dc.name+": the coalesce wrapper to count the h2_file_server site's bytes", func() bool {
				return testutil.ToFloat64(coalesce.Metrics.Bytes) > sent
			})
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
