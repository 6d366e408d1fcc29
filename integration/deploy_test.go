package integration

import (
	"fmt"
	"io"
	"io/fs"
	"net/http"
	"os"
	"path/filepath"
	"sort"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/caddyserver/caddy/v2"

	"github.com/h2file/caddy-h2file/internal/harness"
	"github.com/h2file/caddy-h2file/internal/harness/caddysite"
)

// The deploy suite changes files under a live server the ways deploys do,
// and compares every response of h2_file_server with the response of
// Caddy's own file_server for the same root, right after the change and
// every 50 ms for 3 s, over HTTP/2 and HTTP/1.1 (both over TLS). A response
// that differs is stale; a scenario's stale window is the time from the
// end of the change to the start of its last stale request.

// deployRevalidate is the cache's revalidate interval in the suite.
const deployRevalidate = 250 * time.Millisecond

// deployProbeFor and deployProbeEvery shape the probing after a change.
const (
	deployProbeFor   = 3 * time.Second
	deployProbeEvery = 50 * time.Millisecond
)

// deployEpoch is the normalised modification time of release files (what
// SOURCE_DATE_EPOCH builds, Nix and Bazel produce).
var deployEpoch = time.Date(2000, 1, 1, 0, 0, 0, 0, time.UTC)

// deployMode says whether files were settled before the change (dated
// deployEpoch, so the cache holds small ones in memory) or written just
// before it (dated now, so the cache reads them from a descriptor).
type deployMode struct{ settled bool }

func (m deployMode) String() string {
	if m.settled {
		return "settled"
	}
	return "fresh"
}

// probe is one request of a scenario: a path below the scenario's
// directory and the Accept-Encoding to send.
type probe struct {
	path   string
	accept string
}

// deployScenario is one kind of change.
type deployScenario struct {
	name   string
	probes []probe
	setup  func(t *testing.T, dir string, m deployMode)
	change func(dir string, m deployMode) error
}

// staleKey names one row of the stale-window table.
type staleKey struct {
	scenario, proto, mode string
}

// staleResult is what probing found for one row.
type staleResult struct {
	window time.Duration // start of the last stale request after the change; 0 if none
	stale  int           // stale responses
	probes int           // responses compared
}

// startDeployServers starts Caddy with h2_file_server and, for requests
// with the X-Stock header, file_server, both on root with sidecars. With
// unwatched, both read root through unwatchedFS, as through a file system
// whose changes the kernel does not report. wrappers are the server's
// listener wrappers (nil: Caddy's default, Go's HTTP/2 server).
func startDeployServers(t *testing.T, root string, unwatched bool, wrappers []any) *caddysite.Server {
	t.Helper()
	precompressed := map[string]any{"gzip": map[string]any{}, "br": map[string]any{}, "zstd": map[string]any{}}
	order := []string{"br", "zstd", "gzip"}
	stock := map[string]any{"handler": "file_server", "root": root, "precompressed": precompressed, "precompressed_order": order}
	ours := caddysite.H2FileServer(root, map[string]any{
		"precompressed":       precompressed,
		"precompressed_order": order,
		"cache":               map[string]any{"revalidate": deployRevalidate.String()},
	})
	var apps map[string]any
	if unwatched {
		stock["fs"], ours["fs"] = "unwatched", "unwatched"
		apps = map[string]any{"caddy.filesystems": map[string]any{"filesystems": []any{
			map[string]any{"name": "unwatched", "file_system": map[string]any{"backend": "h2file_unwatched"}},
		}}}
	}
	return caddysite.Start(t, caddysite.Config{Apps: apps, Wrappers: wrappers, Handlers: []any{map[string]any{
		"handler": "subroute",
		"routes": []any{
			map[string]any{"match": []any{map[string]any{"header": map[string]any{"X-Stock": []string{"1"}}}}, "handle": []any{stock}, "terminal": true},
			map[string]any{"handle": []any{ours}},
		},
	}}})
}

func init() { caddy.RegisterModule(unwatchedFS{}) }

// unwatchedFS (caddy.fs.h2file_unwatched) is the local disk by OS paths, as
// Caddy's default file system, under another name: a file system the
// open-file cache does not know to be local, as a network file system or
// FUSE, so it sees no events there and revalidates by stat.
type unwatchedFS struct{}

// CaddyModule returns the Caddy module information.
func (unwatchedFS) CaddyModule() caddy.ModuleInfo {
	return caddy.ModuleInfo{ID: "caddy.fs.h2file_unwatched", New: func() caddy.Module { return unwatchedFS{} }}
}

// Open opens an OS path.
func (unwatchedFS) Open(name string) (fs.File, error) { return os.Open(name) }

// Stat stats an OS path.
func (unwatchedFS) Stat(name string) (fs.FileInfo, error) { return os.Stat(name) }

// responseSignature is what must be equal between the two servers.
func responseSignature(client *http.Client, url, accept string, stock bool) (string, error) {
	req, err := http.NewRequest(http.MethodGet, url, nil)
	if err != nil {
		return "", err
	}
	if accept != "" {
		req.Header.Set("Accept-Encoding", accept)
	}
	if stock {
		req.Header.Set("X-Stock", "1")
	}
	resp, err := client.Do(req)
	if err != nil {
		return "", err
	}
	defer resp.Body.Close()
	body, err := io.ReadAll(resp.Body)
	if err != nil {
		return "", fmt.Errorf("reading %s: %w", url, err)
	}
	h := resp.Header
	return fmt.Sprintf("%d|ce=%s|etag=%s|lm=%s|loc=%s|ct=%s|%q", resp.StatusCode, h.Get("Content-Encoding"),
		h.Get("Etag"), h.Get("Last-Modified"), h.Get("Location"), h.Get("Content-Type"), body), nil
}

// compareProbe requests p from file_server, then from h2_file_server, and
// reports whether they differ and when the h2_file_server request started.
func compareProbe(client *http.Client, base string, p probe) (stale bool, started time.Time, detail string, err error) {
	url := base + "/" + p.path
	want, err := responseSignature(client, url, p.accept, true)
	if err != nil {
		return false, time.Time{}, "", err
	}
	started = time.Now()
	got, err := responseSignature(client, url, p.accept, false)
	if err != nil {
		return false, time.Time{}, "", err
	}
	return got != want, started, fmt.Sprintf("%s: h2_file_server %s, file_server %s", url, got, want), nil
}

// runDeploySuite runs every scenario in both modes at once, each in its own
// directory of one root, and returns the stale windows.
func runDeploySuite(t *testing.T, unwatched bool, wrappers []any) map[staleKey]staleResult {
	t.Helper()
	root := t.TempDir()
	// registered first, so that it runs after Caddy has stopped: the
	// cache's watcher must be gone with it
	watchersBefore := harness.InotifyFDs(t)
	t.Cleanup(func() {
		if n := harness.InotifyFDs(t); n != watchersBefore {
			t.Errorf("%d inotify descriptors after Caddy stopped, want %d", n, watchersBefore)
		}
	})
	srv := startDeployServers(t, root, unwatched, wrappers)
	protos := []struct {
		name   string
		client *http.Client
	}{{"HTTP/2", srv.H2}, {"HTTP/1.1", srv.H1}}

	var (
		mu      sync.Mutex
		results = make(map[staleKey]staleResult)
		wg      sync.WaitGroup
	)
	for _, sc := range deployScenarios() {
		for _, m := range []deployMode{{settled: true}, {settled: false}} {
			dir := filepath.Join(root, sc.name+"-"+m.String())
			if err := os.MkdirAll(dir, 0o755); err != nil {
				t.Fatal(err)
			}
			sc.setup(t, dir, m)
			base := srv.URL + "/" + filepath.Base(dir)
			// warm the cache, and check that the servers agree before
			for _, pr := range protos {
				for range 3 {
					for _, p := range sc.probes {
						stale, _, detail, err := compareProbe(pr.client, base, p)
						if err != nil {
							t.Fatal(err)
						}
						if stale {
							t.Fatalf("%s %s %s: differs before the change: %s", sc.name, m, pr.name, detail)
						}
					}
				}
			}
			wg.Add(1)
			go func() {
				defer wg.Done()
				if err := sc.change(dir, m); err != nil {
					t.Errorf("%s %s: %v", sc.name, m, err)
					return
				}
				changed := time.Now()
				rows := make(map[string]staleResult)
				for tick := 0; time.Since(changed) < deployProbeFor; tick++ {
					for _, pr := range protos {
						row := rows[pr.name]
						for _, p := range sc.probes {
							stale, started, detail, err := compareProbe(pr.client, base, p)
							if err != nil {
								t.Error(err)
								return
							}
							row.probes++
							if stale {
								row.stale++
								row.window = max(row.window, max(started.Sub(changed), time.Microsecond))
								if testing.Verbose() && row.stale == 1 {
									t.Logf("%s %s %s stale at %v: %s", sc.name, m, pr.name, started.Sub(changed), detail)
								}
							}
						}
						rows[pr.name] = row
					}
					time.Sleep(time.Until(changed.Add(time.Duration(tick+1) * deployProbeEvery)))
				}
				mu.Lock()
				defer mu.Unlock()
				for proto, row := range rows {
					results[staleKey{sc.name, proto, m.String()}] = row
				}
			}()
		}
	}
	wg.Wait()
	return results
}

// logStaleTable writes the results as a table to the test log.
func logStaleTable(t *testing.T, title string, results map[staleKey]staleResult) {
	t.Helper()
	keys := make([]staleKey, 0, len(results))
	for k := range results {
		keys = append(keys, k)
	}
	sort.Slice(keys, func(i, j int) bool {
		a, b := keys[i], keys[j]
		if a.scenario != b.scenario {
			return a.scenario < b.scenario
		}
		if a.proto != b.proto {
			return a.proto < b.proto
		}
		return a.mode > b.mode
	})
	var sb strings.Builder
	fmt.Fprintf(&sb, "%s\n| scenario | protocol | files | longest stale window | stale/compared |\n|---|---|---|---|---|\n", title)
	for _, k := range keys {
		r := results[k]
		window := "0"
		if r.stale > 0 {
			window = r.window.Round(time.Millisecond).String()
			if r.window >= deployProbeFor-2*deployProbeEvery {
				window = ">= " + window + " (still stale at the end)"
			}
		}
		fmt.Fprintf(&sb, "| %s | %s | %s | %s | %d/%d |\n", k.scenario, k.proto, k.mode, window, r.stale, r.probes)
	}
	t.Log(sb.String())
}

// TestDeployNeverStaleWithEvents runs the deploy suite with file system
// events live: no response may differ from file_server's, over HTTP/2
// through Go's server and through the engine.
func TestDeployNeverStaleWithEvents(t *testing.T) {
	if testing.Short() {
		t.Skip("deploy suite takes seconds")
	}
	if !harness.FileEventsAvailable(t.TempDir()) {
		t.Skip("no file system events here; TestDeployStaleWithinRevalidate covers this platform")
	}
	for _, server := range []struct {
		name     string
		wrappers []any
	}{{"Go's server", nil}, {"engine", engineWrappers()}} {
		t.Run(server.name, func(t *testing.T) {
			results := runDeploySuite(t, false, server.wrappers)
			logStaleTable(t, "with file system events, "+server.name, results)
			for k, r := range results {
				if r.probes == 0 {
					t.Errorf("%v: nothing compared", k)
				}
				if r.stale > 0 {
					t.Errorf("%v: %d of %d responses stale, the last %v after the change", k, r.stale, r.probes, r.window)
				}
			}
		})
	}
}

// TestDeployStaleWithinRevalidate runs the deploy suite without file system
// events (as where there are none): a request that starts later than
// revalidate after the change must get what file_server sends.
func TestDeployStaleWithinRevalidate(t *testing.T) {
	if testing.Short() {
		t.Skip("deploy suite takes seconds")
	}
	results := runDeploySuite(t, true, nil)
	logStaleTable(t, "without file system events (stat revalidation only)", results)
	for k, r := range results {
		if r.probes == 0 {
			t.Errorf("%v: nothing compared", k)
		}
		if r.window > deployRevalidate {
			t.Errorf("%v: a response %v after the change was stale (revalidate %v)", k, r.window, deployRevalidate)
		}
	}
}
