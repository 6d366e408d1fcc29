package h2file

import (
	"go/build"
	"os"
	"path/filepath"
	"slices"
	"strings"
	"testing"
)

// modulePath is this module's import path.
const modulePath = "github.com/h2file/caddy-h2file"

// layoutRule is one import a group of packages must never make.
type layoutRule struct {
	packages  string // import path prefix, below the module
	forbidden string // import path prefix that they must not import
	why       string
}

// layoutRules are the package layout's walls (shared LAYOUT.md): the
// subsystems under internal/ stand below the root, free of Caddy, and each
// knows only what it needs.
var layoutRules = []layoutRule{
	{"internal/", modulePath + "$", "nothing under internal/ imports the root"},
	{"internal/fdcache", "github.com/caddyserver/", "the open-file cache is free of Caddy"},
	{"internal/fdcache", "net/http$", "the open-file cache knows nothing of HTTP"},
	{"internal/watch", "github.com/caddyserver/", "the watcher is free of Caddy"},
	{"internal/watch", "net/http$", "the watcher knows nothing of HTTP"},
	{"internal/watch", modulePath + "/internal/fdcache", "the watcher does not know the cache"},
	{"internal/prom", "github.com/caddyserver/", "metric names are free of Caddy"},
	{"internal/variants", "github.com/caddyserver/", "the compressed-variant store is free of Caddy"},
	{"internal/variants", "net/http$", "the compressed-variant store knows nothing of HTTP"},
	{"internal/variants", modulePath + "/internal/fdcache", "the variant store does not know the cache (a version is any value)"},
	{"internal/coalesce", "github.com/caddyserver/", "the write-behind connection is free of Caddy"},
	{"internal/coalesce", modulePath + "/internal/send", "the connection does not know the body writer"},
	{"internal/coalesce", modulePath + "/internal/fdcache", "the connection does not know the cache"},
	{"internal/send", modulePath + "/internal/fdcache", "the body writer reads handles, not the cache"},
	{"internal/send", modulePath + "/internal/watch", "the body writer does not know the watcher"},
	{"internal/send", "github.com/caddyserver/caddy/v2/modules/caddyhttp/fileserver", "the body writer does not lean on file_server"},
	{"internal/h2/wire", modulePath + "/internal/", "the wire format stands below every other package"},
	{"internal/h2", "github.com/caddyserver/", "the HTTP/2 engine is free of Caddy"},
	{"internal/h2", modulePath + "/internal/send", "the engine knows a conn and a handler, not the body writer"},
	{"internal/h2", modulePath + "/internal/fdcache", "the engine does not know the cache"},
	{"internal/h2", modulePath + "/internal/coalesce", "the engine does not know the wrapper"},
}

// TestLayoutRules lists the imports of every package of the module (tests
// included, except internal/harness's users, which may import anything)
// and fails on an import a rule forbids.
func TestLayoutRules(t *testing.T) {
	pkgs := modulePackages(t)
	if !slices.Contains(pkgs, "internal/fdcache") || !slices.Contains(pkgs, "internal/watch") ||
		!slices.Contains(pkgs, "internal/coalesce") || !slices.Contains(pkgs, "internal/send") ||
		!slices.Contains(pkgs, "internal/h2/wire") {
		t.Fatalf("packages found: %v; the layout's subsystems are missing", pkgs)
	}
	for _, rel := range pkgs {
		p, err := build.ImportDir(rel, 0)
		if err != nil {
			t.Fatalf("%s: %v", rel, err)
		}
		imports := p.Imports
		if rel != "internal/harness" {
			// a package's own tests are bound by its rules too
			imports = append(slices.Concat(imports, p.TestImports), p.XTestImports...)
		}
		for _, imp := range imports {
			for _, r := range layoutRules {
				if violates(rel, imp, r) {
					t.Errorf("%s imports %s: %s", rel, imp, r.why)
				}
			}
		}
	}
}

// TestLayoutRulesCatchViolations checks that the rules see a broken one.
func TestLayoutRulesCatchViolations(t *testing.T) {
	for _, c := range []struct {
		pkg, imp string
		want     bool
	}{
		{"internal/fdcache", "github.com/caddyserver/caddy/v2", true},
		{"internal/fdcache", "net/http", true},
		{"internal/fdcache", "net/http/httptest", false},
		{"internal/watch", modulePath + "/internal/fdcache", true},
		{"internal/fdcache", modulePath + "/internal/watch", false},
		{"internal/fdcache", modulePath, true},
		{"internal/fdcache", modulePath + "/internal/prom", false},
		{"internal/h2/wire", modulePath + "/internal/coalesce", true},
		{"internal/send", modulePath + "/internal/coalesce", false},
		{"internal/send", modulePath + "/internal/fdcache", true},
		{"internal/coalesce", modulePath + "/internal/send", true},
		{".", "github.com/caddyserver/caddy/v2", false},
	} {
		got := false
		for _, r := range layoutRules {
			got = got || violates(c.pkg, c.imp, r)
		}
		if got != c.want {
			t.Errorf("%s importing %s: violation %v, want %v", c.pkg, c.imp, got, c.want)
		}
	}
}

// violates reports whether the package rel importing imp breaks r. A
// forbidden prefix ending in $ matches that import path exactly.
func violates(rel, imp string, r layoutRule) bool {
	if !strings.HasPrefix(rel+"/", strings.TrimSuffix(r.packages, "/")+"/") {
		return false
	}
	if exact, ok := strings.CutSuffix(r.forbidden, "$"); ok {
		return imp == exact
	}
	return strings.HasPrefix(imp, r.forbidden)
}

// modulePackages returns the directories (relative, slash-separated) of
// the module's Go packages, "." for the root.
func modulePackages(t *testing.T) []string {
	t.Helper()
	var pkgs []string
	err := filepath.WalkDir(".", func(path string, d os.DirEntry, err error) error {
		if err != nil {
			return err
		}
		if d.IsDir() {
			if base := d.Name(); path != "." && (strings.HasPrefix(base, ".") || base == "testdata" || base == "out") {
				return filepath.SkipDir
			}
			return nil
		}
		if strings.HasSuffix(path, ".go") {
			dir := filepath.ToSlash(filepath.Dir(path))
			if len(pkgs) == 0 || pkgs[len(pkgs)-1] != dir {
				pkgs = append(pkgs, dir)
			}
		}
		return nil
	})
	if err != nil {
		t.Fatal(err)
	}
	return slices.Compact(pkgs)
}
