package integration

// Security suite, part 1 (see security_test.go): hostile request paths,
// compared with file_server, and the open-file cache warmed by allowed
// requests.

import (
	"bytes"
	"errors"
	"fmt"
	"net/http"
	"regexp"
	"slices"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/h2file/caddy-h2file/internal/harness"
)

// secMaxHeaderBytes is Caddy's default limit on the request line and
// headers (caddyhttp.App: max_header_bytes 16 KiB). Longer targets are
// answered 431 by Go's server before Caddy's handlers: the 64 KiB ones of
// harness.GeneratedHostilePaths reach the handler only in FuzzServeRequest's seeds,
// which call it directly.
const secMaxHeaderBytes = 16 << 10

// secAcceptEncoding asks for every precompressed sidecar.
var secAcceptEncoding = [2]string{"Accept-Encoding", "br, zstd, gzip"}

// secCfg is a configuration of the hostile-path test: the file_server and
// h2_file_server sites, and extra h2_file_server-only fields.
func secCfg(name string, opts map[string]any, h2Extra map[string]any) *diffConfig {
	return &diffConfig{
		name: name,
		opts: opts,
		routes: func(file map[string]any) []any {
			if file["handler"] == "h2_file_server" {
				for k, v := range h2Extra {
					file[k] = v
				}
			}
			return []any{map[string]any{"handle": []any{file}}}
		},
	}
}

// secStats counts what the hostile-path test did.
type secStats struct {
	mu          sync.Mutex
	requests    int
	skippedH2   int
	skippedLong int
	statuses    map[int]int
	transportEq int // both sites failed the same way
	exposures   map[int]int
	failures    int
}

func (s *secStats) add(f func(s *secStats)) {
	s.mu.Lock()
	defer s.mu.Unlock()
	f(s)
}

// secCheckPair compares one request's two responses and the markers in
// their bodies. It returns a description of what is wrong, or "".
func secCheckPair(root, target string, fs, h2 diffResponse, fsPort, h2Port int, used map[int]int) string {
	var problems []string
	nfs, nh2 := diffNormalize(fs, fsPort), diffNormalize(h2, h2Port)
	// a connection both servers reset differs only by the client's port
	for _, r := range []*diffResponse{&nfs, &nh2} {
		if r.err != nil {
			r.err = errors.New(secClientPort.ReplaceAllString(r.err.Error(), "$1:{CLIENT}->"))
		}
	}
	if diff := diffCompare(nfs, nh2); diff != "" {
		problems = append(problems, "responses differ:\n  "+diff)
	}
	if leaks := secLeaks(root, target, h2.body, used); len(leaks) > 0 {
		problems = append(problems, fmt.Sprintf("h2_file_server served markers %q", leaks))
	}
	if leaks := secLeaks(root, target, fs.body, nil); len(leaks) > 0 {
		problems = append(problems, fmt.Sprintf("file_server served markers %q (not in secExposures)", leaks))
	}
	if len(problems) == 0 {
		return ""
	}
	return strings.Join(problems, "\n") + "\nfile_server:\n" + diffFormat(nfs) + "\nh2_file_server:\n" + diffFormat(nh2)
}

// secShortErr shortens an error message, which may quote a long URL.
func secShortErr(err error) string {
	if err == nil {
		return "<nil>"
	}
	return secShort(err.Error())
}

var secClientPort = regexp.MustCompile(`(127\.0\.0\.1):\d+->`)

// secShort shortens a target for messages.
func secShort(target string) string {
	if len(target) > 120 {
		return fmt.Sprintf("%s...(%d bytes)", target[:100], len(target))
	}
	return target
}

func TestSecHostilePaths(t *testing.T) {
	start := time.Now()
	paths := harness.HostilePaths(t, "../testdata")
	if len(paths) < 200 {
		t.Fatalf("testdata/hostile/paths.txt has %d paths, want at least 200", len(paths))
	}
	paths = append(paths, harness.GeneratedHostilePaths()...)

	d := secFixture(t)
	hide := secHide(d)
	precompressed := map[string]any{"br": map[string]any{}, "zstd": map[string]any{}, "gzip": map[string]any{}}
	index := []string{"index.secret", "index.html", "index.txt"}
	mainCfg := secCfg("sec_main", map[string]any{
		"hide": hide, "index_names": index, "precompressed": precompressed,
		"precompressed_order": []string{"br", "zstd", "gzip"},
	}, nil)
	browse := secCfg("sec_browse", map[string]any{
		"hide": hide, "index_names": index, "browse": map[string]any{},
	}, map[string]any{"cache": map[string]any{"max_files": 1001}})
	// its own cache (the cache is shared by configurations with the same
	// limits): cold when the warm-up sequences start
	warm := secCfg("sec_warm", map[string]any{
		"hide": hide, "index_names": index, "precompressed": precompressed,
		"precompressed_order": []string{"br", "zstd", "gzip"},
	}, map[string]any{"cache": map[string]any{"max_files": 1002}})
	cfgs := []*diffConfig{mainCfg, browse, warm}
	echo := diffStartCaddy(t, d, cfgs)
	diffCheckHandlers(t, cfgs)
	clients := diffClients(t)

	// the checks must be able to fail
	t.Run("sanity", func(t *testing.T) {
		if leaks := secLeaks(d.root, "/visible.txt", []byte("x HIDDEN-MARKER-x-secret\n"), nil); len(leaks) != 1 {
			t.Errorf("a hidden marker in the body of /visible.txt is not reported: %q", leaks)
		}
		if leaks := secLeaks(d.root, "/%2e%2e/outside/secret.txt", []byte(secOutsideMarker), nil); len(leaks) != 1 {
			t.Errorf("an outside marker for a traversal is not reported: %q", leaks)
		}
		if leaks := secLeaks(d.root, "/link-out.txt", []byte(secOutsideMarker), nil); len(leaks) != 0 {
			t.Errorf("the listed exposure /link-out.txt is reported: %q", leaks)
		}
		if leaks := secLeaks(d.root, "/link-out.txt", []byte("HIDDEN-MARKER-caddyfile"), nil); len(leaks) != 1 {
			t.Errorf("an exposure allows markers it does not list: %q", leaks)
		}
		dc := clients[0]
		fs := diffDo(dc, http.MethodGet, mainCfg.fs, "/visible.txt", nil)
		h2 := diffDo(dc, http.MethodGet, mainCfg.h2, "/dir/visible.txt", nil)
		if secCheckPair(d.root, "/visible.txt", fs, h2, mainCfg.fs.port, mainCfg.h2.port, nil) == "" {
			t.Error("different responses compare equal")
		}
	})

	// the targets reach Caddy as written
	t.Run("raw_targets_arrive_unchanged", func(t *testing.T) {
		delivered, sent := 0, 0
		for _, target := range paths {
			for _, dc := range clients {
				if dc.plain || dc.major == 2 && diffH2Unsendable(target) {
					continue // the echo site is TLS only
				}
				if len(target) > secMaxHeaderBytes {
					continue // refused with 431 before any handler
				}
				sent++
				resp := diffDo(dc, http.MethodGet, echo, target, nil)
				if resp.err != nil || resp.status != http.StatusOK {
					t.Logf("%s %s: not delivered to Caddy: status %d, error %s", dc.name, secShort(target), resp.status, secShortErr(resp.err))
					continue
				}
				got := strings.TrimPrefix(string(resp.body), fmt.Sprintf("https://127.0.0.1:%d", echo.port))
				if got != target {
					t.Errorf("%s: target %q arrived as %q", dc.name, secShort(target), secShort(got))
					continue
				}
				delivered++
			}
		}
		t.Logf("%d of %d targets delivered verbatim", delivered, sent)
		if delivered < sent*95/100 {
			t.Errorf("only %d of %d targets reached Caddy; too few to be useful", delivered, sent)
		}
	})

	stats := &secStats{statuses: map[int]int{}, exposures: map[int]int{}}
	for _, c := range []*diffConfig{mainCfg, browse} {
		t.Run(c.name, func(t *testing.T) {
			aes := [][][2]string{nil, {secAcceptEncoding}}
			if c == browse {
				aes = aes[:1]
			}
			var wg sync.WaitGroup
			for _, dc := range clients {
				wg.Add(1)
				go func() {
					defer wg.Done()
					fsSite, h2Site := c.sites(dc)
					for _, target := range paths {
						if dc.major == 2 && diffH2Unsendable(target) {
							stats.add(func(s *secStats) { s.skippedH2++ })
							continue
						}
						if (dc.plain || dc.major == 2) && len(target) > secMaxHeaderBytes {
							// refused before Caddy's handlers (see
							// secMaxHeaderBytes): 431 over HTTP/1.1 with
							// TLS; Go's HTTP/2 client does not send it,
							// and its cleartext server lingers a second
							// on the close. Sent over HTTP/1.1 with TLS.
							stats.add(func(s *secStats) { s.skippedLong++ })
							continue
						}
						for _, hdrs := range aes {
							fs := diffDo(dc, http.MethodGet, fsSite, target, hdrs)
							h2 := diffDo(dc, http.MethodGet, h2Site, target, hdrs)
							used := map[int]int{}
							problem := secCheckPair(d.root, target, fs, h2, fsSite.port, h2Site.port, used)
							if problem == "" && c == browse && fs.err == nil && bytes.Contains(h2.body, []byte("b.secret")) {
								problem = "a listing names the hidden file b.secret"
							}
							stats.add(func(s *secStats) {
								s.requests += 2
								if fs.err == nil {
									s.statuses[fs.status]++
								} else if h2.err != nil {
									s.transportEq++
								}
								for i, n := range used {
									s.exposures[i] += n
								}
								if problem != "" {
									s.failures++
								}
							})
							if problem != "" {
								t.Errorf("%s %s GET %s %v:\n%s", c.name, dc.name, secShort(target), hdrs, problem)
							}
						}
					}
				}()
			}
			wg.Wait()
		})
	}
	t.Logf("statuses of file_server over all protocols: %v; both failed alike: %d; skipped over HTTP/2 (not a request-target): %d; longer than %d bytes, sent over HTTP/1.1 with TLS only: %d",
		stats.statuses, stats.transportEq, stats.skippedH2, secMaxHeaderBytes, stats.skippedLong)
	for _, s := range []int{200, 308, 400, 404} {
		if stats.statuses[s] == 0 {
			t.Errorf("no response with status %d: the hostile paths do not exercise the handler", s)
		}
	}
	// every listed exposure is real: the list holds nothing that is not
	// served, so each entry is a reasoned, tested case
	for i, e := range secExposures {
		if stats.exposures[i] == 0 {
			t.Errorf("exposure %q (%s) never served its marker: the list or the paths are stale", e.rel, e.why)
		}
	}

	// the open-file cache, warmed by allowed requests for a file, must
	// still hide it under its hidden names (and not reach outside)
	t.Run("warm_cache", func(t *testing.T) {
		sequences := []struct {
			name  string
			warm  []string
			probe []string
		}{
			{"index_then_hidden_index_name",
				[]string{"/sub/", "/sub/index.html", "/sub"},
				[]string{"/sub/index.secret", "/sub/./index.secret", "/sub//index.secret", "/dir/../sub/index.secret", "/sub/%69ndex.secret", "/sub/index.secret/", "/sub/index.secret%00"}},
			{"symlink_then_hidden_target",
				[]string{"/link-secret", "/link-secret"},
				[]string{"/x.secret", "/./x.secret", "/dir/../x.secret", "/%78.secret", "/x.secret/", "/dir/link-up/x.secret"}},
			{"symlinked_dir_then_hidden_dir",
				[]string{"/link-hiddendir/file.txt", "/link-hiddendir/", "/link-hiddendir/inner/deep.txt"},
				[]string{"/hiddendir/file.txt", "/hiddendir/", "/hiddendir/index.html", "/hiddendir", "/hiddendir/inner/deep.txt", "/hiddendir/./file.txt", "/sub/../hiddendir/file.txt"}},
			{"alias_then_caddyfile",
				[]string{"/dir/link-up/Caddyfile", "/link-caddyfile"},
				[]string{"/Caddyfile", "/./Caddyfile", "/dir/../Caddyfile", "/%43addyfile", "/Caddyfile/"}},
			{"symlinked_private_then_private",
				[]string{"/link-private/key.txt", "/link-private/"},
				[]string{"/private/key.txt", "/private/", "/private/index.html", "/private%2fkey.txt", "/dir/link-up/private/key.txt"}},
			{"same_file_many_paths",
				[]string{"/visible.txt", "/dir/../visible.txt", "/link-in.txt", "/./visible.txt", "/dir/link-up/visible.txt"},
				[]string{"/visible.txt/", "/visible.txt.", "/link-in.txt/..", "/link-secret.secret"}},
			{"outside_via_symlink_then_traversal",
				[]string{"/link-out.txt", "/link-outdir/", "/link-outdir/secret.txt", "/link-evil/secret.txt"},
				[]string{"/../outside/secret.txt", "/%2e%2e/outside/secret.txt", "/../outside/", "/../root-evil/secret.txt", "/link-outdir/../../outside/secret.txt", "/..%2foutside%2fsecret.txt"}},
			{"hidden_first_then_alias_then_hidden",
				[]string{"/x.secret", "/link-secret", "/x.secret.gz"},
				[]string{"/x.secret", "/link-secret.secret"}},
			{"sidecar_then_hidden_original",
				[]string{"/x.secret.gz", "/x.secret.br", "/Caddyfile.gz"},
				[]string{"/x.secret", "/Caddyfile"}},
		}
		for _, dc := range clients {
			fsSite, h2Site := warm.sites(dc)
			for _, seq := range sequences {
				for _, hdrs := range [][][2]string{nil, {secAcceptEncoding}} {
					for i, target := range append(slices.Clone(seq.warm), seq.probe...) {
						fs := diffDo(dc, http.MethodGet, fsSite, target, hdrs)
						h2 := diffDo(dc, http.MethodGet, h2Site, target, hdrs)
						stats.add(func(s *secStats) { s.requests += 2 })
						if problem := secCheckPair(d.root, target, fs, h2, fsSite.port, h2Site.port, nil); problem != "" {
							t.Errorf("%s %s %v: GET %s:\n%s", dc.name, seq.name, hdrs, target, problem)
						}
						if i < len(seq.warm) {
							continue
						}
						// a probe of a hidden or outside name never gets
						// a marker, whatever the warm-up cached
						if h2.err == nil && h2.status == http.StatusOK && secMarkerRE.Match(h2.body) {
							t.Errorf("%s %s: probe %s served %q after the cache was warmed", dc.name, seq.name, target, h2.body)
						}
					}
				}
			}
		}
	})

	t.Logf("%d hostile paths (%d from testdata/hostile/paths.txt, %d generated), %d requests, %d failures, in %v",
		len(paths), len(paths)-len(harness.GeneratedHostilePaths()), len(harness.GeneratedHostilePaths()), stats.requests, stats.failures, time.Since(start))
}
