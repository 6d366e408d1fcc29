package integration

// The differential test's last part (diff_test.go): files change between
// requests, and both sites must serve the new state.

import (
	"bytes"
	"net/http"
	"os"
	"path/filepath"
	"strconv"
	"testing"
	"time"

	_ "github.com/caddyserver/caddy/v2/modules/standard"
)

// diffRevalidateMax is how long h2_file_server may serve a changed file's
// previous version: its cache's default revalidation interval (1s, see
// h2file.CacheConfig.Revalidate) plus a margin for slow (-race) runs.
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
