package integration

// Reliability suite, part 3 (f): an exhausted RLIMIT_NOFILE, in a
// subprocess (see leak_test.go for the suite).

import (
	"bytes"
	"context"
	"crypto/sha256"
	"fmt"
	"io"
	"net/http"
	"os"
	"os/exec"
	"strconv"
	"strings"
	"sync"
	"sync/atomic"
	"testing"
	"time"

	"github.com/prometheus/client_golang/prometheus/testutil"

	"github.com/h2file/caddy-h2file/internal/fdcache"
	"github.com/h2file/caddy-h2file/internal/harness"
)

// (f) RLIMIT_NOFILE exhausted while Caddy serves many distinct files:
// every response is 200 with the right bytes or 503 with Retry-After,
// nothing panics, and once descriptors are free again every request
// succeeds. It runs in a subprocess, which lowers its own limit.
func TestLeakOutOfDescriptors(t *testing.T) {
	if name := os.Getenv("LK_EMFILE_CHILD"); name != "" {
		lkEmfileChild(t, name)
		return
	}
	for _, pos := range []lkPosition{lkNone, lkBoth} {
		t.Run(pos.name, func(t *testing.T) {
			lkNeedWrapper(t, pos)
			ctx, cancel := context.WithTimeout(context.Background(), 60*time.Second)
			defer cancel()
			cmd := exec.CommandContext(ctx, os.Args[0], "-test.run=^TestLeakOutOfDescriptors$", "-test.count=1", "-test.v")
			cmd.Env = append(os.Environ(), "LK_EMFILE_CHILD="+pos.name)
			out, err := cmd.CombinedOutput()
			for _, line := range strings.Split(string(out), "\n") {
				if strings.HasPrefix(line, "LK-EMFILE: ") {
					t.Log(strings.TrimPrefix(line, "LK-EMFILE: "))
				}
			}
			tail := out
			if len(tail) > 8000 {
				tail = tail[len(tail)-8000:]
			}
			switch {
			case err != nil:
				t.Fatalf("child failed: %v\n%s", err, tail)
			case !bytes.Contains(out, []byte("LK-EMFILE-CHILD-OK")):
				t.Fatalf("child did not run its checks:\n%s", tail)
			case bytes.Contains(bytes.ToLower(out), []byte("panic")):
				t.Fatalf("child output mentions a panic:\n%s", tail)
			}
		})
	}
}

func lkPositionNamed(t *testing.T, name string) lkPosition {
	for _, p := range []lkPosition{lkNone, lkBelow, lkAbove, lkBoth} {
		if p.name == name {
			return p
		}
	}
	t.Fatalf("unknown wrapper position %q", name)
	return lkPosition{}
}

func lkEmfileChild(t *testing.T, posName string) {
	pos := lkPositionNamed(t, posName)
	root := t.TempDir()
	// many distinct files, most held open by the cache (larger than
	// small_file_max)
	files := append(
		harness.WriteSiteFiles(t, root, "open", 100, func(i int) int { return int(defaultSmallFileMax) + 6_000 + i*1_009 }),
		harness.WriteSiteFiles(t, root, "mem", 40, func(i int) int { return 100 + i*397 })...)
	s := lkStart(t, root, nil, pos, nil)
	// LK_EMFILE_DEBUG=1: Caddy logs at DEBUG level in the child, which
	// shows why a request failed
	if os.Getenv("LK_EMFILE_DEBUG") != "" {
		cfg, _ := s.RunningConfig()
		cfg["logging"].(map[string]any)["logs"].(map[string]any)["default"].(map[string]any)["level"] = "DEBUG"
		if err := s.Load(cfg); err != nil {
			t.Fatal(err)
		}
	}
	if err := harness.FetchFile(context.Background(), s.H2, s.URL, files[0]); err != nil { // the client's one connection
		t.Fatal(err)
	}

	limit := harness.OpenFDsNow() + 64
	restoreLimit, err := harness.LowerOpenFileLimit(limit, false)
	if err != nil {
		t.Skipf("cannot lower RLIMIT_NOFILE: %v", err)
	}
	defer restoreLimit()
	// take every descriptor but a few
	hog := harness.HogDescriptors(t)
	const spare = 4
	for _, f := range hog[len(hog)-spare:] {
		f.Close()
	}
	hog = hog[:len(hog)-spare]

	// tally counts the outcomes of a phase; every failure is counted, and
	// the first few of each phase reported in full
	type tally struct {
		ok, unavailable, failed int
		failures                []string
	}
	const requests = 400
	run := func(phase string, allowUnavailable bool) *tally {
		var mu sync.Mutex
		tl := &tally{}
		var wg sync.WaitGroup
		next := atomic.Int64{}
		for range 48 {
			wg.Go(func() {
				for {
					i := int(next.Add(1)) - 1
					if i >= requests {
						return
					}
					f := files[(i*7)%len(files)]
					status, retryAfter, err := lkFetchOr503(s.H2, s.URL, f)
					var failure string
					switch {
					case err != nil:
						failure = err.Error()
					case status == http.StatusOK:
					case !allowUnavailable:
						failure = fmt.Sprintf("%s: status %d, want 200", f.Path, status)
					default:
						if n, err := strconv.Atoi(retryAfter); err != nil || n < minBackoff || n > maxBackoff {
							failure = fmt.Sprintf("%s: 503 with Retry-After %q, want %d to %d seconds", f.Path, retryAfter, minBackoff, maxBackoff)
						}
					}
					mu.Lock()
					switch {
					case failure != "":
						tl.failed++
						if len(tl.failures) < 5 {
							tl.failures = append(tl.failures, failure)
						}
					case status == http.StatusOK:
						tl.ok++
					default:
						tl.unavailable++
					}
					mu.Unlock()
				}
			})
		}
		wg.Wait()
		if tl.failed > 0 {
			t.Errorf("%s: %d of %d requests failed; the first: %s", phase, tl.failed, requests, strings.Join(tl.failures, "; "))
		}
		return tl
	}
	evictions := testutil.ToFloat64(fdcache.SharedMetrics.Evictions)
	exhausted := run("out of descriptors", true)
	evicted := testutil.ToFloat64(fdcache.SharedMetrics.Evictions) - evictions
	fmt.Printf("LK-EMFILE: %s: limit %d, %d free: %d ok, %d 503 with Retry-After, %d failed, %v cached files closed to free descriptors\n",
		posName, limit, spare, exhausted.ok, exhausted.unavailable, exhausted.failed, evicted)
	if exhausted.unavailable+exhausted.failed == 0 && evicted == 0 {
		t.Errorf("the descriptor limit was never hit: every request succeeded and no cached file was given back")
	}

	// descriptors free again: every request succeeds, on the old connection
	// and on a new one
	for _, f := range hog {
		f.Close()
	}
	recovered := run("descriptors free again", false)
	if err := harness.FetchFile(context.Background(), harness.NewClient(t, "h2", s.Cert.ClientTLS()), s.URL, files[len(files)/2]); err != nil {
		t.Errorf("new connection after recovery: %v", err)
	}
	fmt.Printf("LK-EMFILE: %s: descriptors free again: %d of %d ok\n", posName, recovered.ok, requests)
	if recovered.ok != requests {
		t.Errorf("after recovery %d of %d requests succeeded", recovered.ok, requests)
	}
	if !t.Failed() {
		fmt.Println("LK-EMFILE-CHILD-OK")
	}
}

// lkFetchOr503 GETs f: a 200 must have exactly f's bytes; a 503 is
// returned with its Retry-After; an error otherwise.
func lkFetchOr503(c *http.Client, base string, f harness.SiteFile) (status int, retryAfter string, err error) {
	resp, err := c.Get(base + f.Path)
	if err != nil {
		return 0, "", err
	}
	defer resp.Body.Close()
	h := sha256.New()
	n, err := io.Copy(h, resp.Body)
	if err != nil {
		return 0, "", fmt.Errorf("%s: status %d, reading body after %d bytes: %w", f.Path, resp.StatusCode, n, err)
	}
	switch resp.StatusCode {
	case http.StatusOK:
		if n != f.Size || !bytes.Equal(h.Sum(nil), f.Sum[:]) {
			return 0, "", fmt.Errorf("%s: 200 with %d bytes (want %d), content matches: %v", f.Path, n, f.Size, bytes.Equal(h.Sum(nil), f.Sum[:]))
		}
	case http.StatusServiceUnavailable:
	default:
		return 0, "", fmt.Errorf("%s: status %d, want 200 or 503", f.Path, resp.StatusCode)
	}
	return resp.StatusCode, resp.Header.Get("Retry-After"), nil
}
