package integration

import (
	"errors"
	"os"
	"os/exec"
	"path/filepath"
	"testing"
	"time"

	"github.com/h2file/caddy-h2file/internal/harness"
)

// Contents of one size: a deploy that changes only bytes.
const (
	release1 = "build-0001\n"
	release2 = "build-0002\n"
)

// putFile writes a file of the initial tree, creating its directory; a
// settled file is dated deployEpoch.
func putFile(t *testing.T, name, content string, m deployMode) {
	t.Helper()
	if err := writeDated(name, content, m); err != nil {
		t.Fatal(err)
	}
}

// writeDated writes name and, in settled mode, dates it deployEpoch.
func writeDated(name, content string, m deployMode) error {
	if err := os.MkdirAll(filepath.Dir(name), 0o755); err != nil {
		return err
	}
	if err := os.WriteFile(name, []byte(content), 0o644); err != nil {
		return err
	}
	if m.settled {
		return os.Chtimes(name, deployEpoch, deployEpoch)
	}
	return nil
}

// sidecarScenarios are the precompressed sidecar changes, for each
// encoding.
func sidecarScenarios() []deployScenario {
	var out []deployScenario
	for _, enc := range []struct{ token, suffix string }{{"gzip", ".gz"}, {"br", ".br"}, {"zstd", ".zst"}} {
		probes := []probe{{"a.txt", enc.token}, {"a.txt", ""}}
		out = append(out,
			deployScenario{
				name:   "sidecar-added" + enc.suffix,
				probes: probes,
				setup:  func(t *testing.T, dir string, m deployMode) { putFile(t, filepath.Join(dir, "a.txt"), release1, m) },
				change: func(dir string, m deployMode) error {
					return writeDated(filepath.Join(dir, "a.txt"+enc.suffix), "compressed-0002", m)
				},
			},
			deployScenario{
				name:   "sidecar-rewritten" + enc.suffix,
				probes: probes,
				setup: func(t *testing.T, dir string, m deployMode) {
					putFile(t, filepath.Join(dir, "a.txt"), release1, m)
					putFile(t, filepath.Join(dir, "a.txt"+enc.suffix), "compressed-0001", m)
				},
				change: func(dir string, m deployMode) error {
					return harness.RewriteInPlace(filepath.Join(dir, "a.txt"+enc.suffix), "compressed-0002")
				},
			},
			deployScenario{
				name:   "sidecar-removed" + enc.suffix,
				probes: probes,
				setup: func(t *testing.T, dir string, m deployMode) {
					putFile(t, filepath.Join(dir, "a.txt"), release1, m)
					putFile(t, filepath.Join(dir, "a.txt"+enc.suffix), "compressed-0001", m)
				},
				change: func(dir string, m deployMode) error { return os.Remove(filepath.Join(dir, "a.txt"+enc.suffix)) },
			})
	}
	return out
}

// deployScenarios are the changes the suite makes.
func deployScenarios() []deployScenario {
	oneFile := func(t *testing.T, dir string, m deployMode) { putFile(t, filepath.Join(dir, "a.txt"), release1, m) }
	aTxt := []probe{{"a.txt", ""}}
	scenarios := []deployScenario{
		{name: "rename-over", probes: aTxt, setup: oneFile, change: func(dir string, _ deployMode) error {
			return harness.RenameOver(filepath.Join(dir, "a.txt"), release2)
		}},
		{name: "rewrite-in-place", probes: aTxt, setup: oneFile, change: func(dir string, _ deployMode) error {
			return harness.RewriteInPlace(filepath.Join(dir, "a.txt"), release2)
		}},
		{name: "delete-recreate", probes: aTxt, setup: oneFile, change: func(dir string, _ deployMode) error {
			return harness.Recreate(filepath.Join(dir, "a.txt"), release2)
		}},
		{name: "mtime-only", probes: aTxt, setup: oneFile, change: func(dir string, _ deployMode) error {
			later := deployEpoch.Add(24 * time.Hour)
			return os.Chtimes(filepath.Join(dir, "a.txt"), later, later)
		}},
		{name: "file-to-dir", probes: []probe{{"a.txt", ""}, {"a.txt/", ""}}, setup: oneFile, change: func(dir string, m deployMode) error {
			if err := os.Remove(filepath.Join(dir, "a.txt")); err != nil {
				return err
			}
			return writeDated(filepath.Join(dir, "a.txt", "index.html"), release2, m)
		}},
		{name: "dir-to-file", probes: []probe{{"a.txt", ""}, {"a.txt/", ""}}, setup: func(t *testing.T, dir string, m deployMode) {
			putFile(t, filepath.Join(dir, "a.txt", "index.html"), release1, m)
		}, change: func(dir string, m deployMode) error {
			if err := os.RemoveAll(filepath.Join(dir, "a.txt")); err != nil {
				return err
			}
			return writeDated(filepath.Join(dir, "a.txt"), release2, m)
		}},
		{name: "new-file-after-404", probes: []probe{{"b.txt", ""}, {"new/b.txt", ""}}, setup: oneFile, change: func(dir string, m deployMode) error {
			if err := writeDated(filepath.Join(dir, "b.txt"), release2, m); err != nil {
				return err
			}
			return writeDated(filepath.Join(dir, "new", "b.txt"), release2, m)
		}},
		{name: "new-index", probes: []probe{{"d/", ""}, {"e/", ""}}, setup: func(t *testing.T, dir string, m deployMode) {
			putFile(t, filepath.Join(dir, "d", "index.txt"), release1, m)
			if err := os.MkdirAll(filepath.Join(dir, "e"), 0o755); err != nil {
				t.Fatal(err)
			}
		}, change: func(dir string, m deployMode) error {
			if err := writeDated(filepath.Join(dir, "d", "index.html"), release2, m); err != nil {
				return err
			}
			return writeDated(filepath.Join(dir, "e", "index.html"), release2, m)
		}},
		{name: "symlink-switch", probes: []probe{{"current/a.txt", ""}, {"current/", ""}, {"current/sub/b.txt", ""}}, setup: func(t *testing.T, dir string, m deployMode) {
			for rel, content := range map[string]string{"r1": release1, "r2": release2} {
				putFile(t, filepath.Join(dir, rel, "a.txt"), content, m)
				putFile(t, filepath.Join(dir, rel, "index.html"), content, m)
				putFile(t, filepath.Join(dir, rel, "sub", "b.txt"), content, m)
			}
			if err := os.Symlink("r1", filepath.Join(dir, "current")); err != nil {
				t.Fatal(err)
			}
		}, change: func(dir string, _ deployMode) error {
			tmp := filepath.Join(dir, ".current.tmp")
			if err := os.Symlink("r2", tmp); err != nil {
				return err
			}
			return os.Rename(tmp, filepath.Join(dir, "current"))
		}},
		{name: "tar-over-tree", probes: []probe{{"", ""}, {"a.txt", ""}, {"a.txt", "gzip"}, {"sub/b.txt", ""}}, setup: setupTarRelease, change: func(dir string, _ deployMode) error {
			out, err := exec.Command("tar", "-xf", filepath.Join(filepath.Dir(dir), filepath.Base(dir)+".tar"), "-C", dir).CombinedOutput()
			if err != nil {
				return errors.New("tar: " + err.Error() + ": " + string(out))
			}
			return nil
		}},
	}
	return append(scenarios, sidecarScenarios()...)
}

// setupTarRelease writes release 1 into dir and packs release 2, same
// names and sizes, with GNU tar and normalised times, beside dir.
func setupTarRelease(t *testing.T, dir string, m deployMode) {
	t.Helper()
	if _, err := exec.LookPath("tar"); err != nil {
		t.Skip("no tar")
	}
	staging := t.TempDir()
	for _, tree := range []struct {
		dir     string
		content string
		mode    deployMode
	}{{dir, release1, m}, {staging, release2, deployMode{settled: true}}} {
		for _, name := range []string{"index.html", "a.txt", "a.txt.gz", "sub/b.txt"} {
			putFile(t, filepath.Join(tree.dir, name), tree.content, tree.mode)
		}
	}
	tarball := filepath.Join(filepath.Dir(dir), filepath.Base(dir)+".tar")
	cmd := exec.Command("tar", "--mtime=2000-01-01 00:00:00", "--owner=0", "--group=0", "--sort=name", "-cf", tarball, "-C", staging, ".")
	if out, err := cmd.CombinedOutput(); err != nil {
		t.Fatalf("tar: %v: %s", err, out)
	}
}
