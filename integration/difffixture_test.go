package integration

// The fixture files of the differential test in diff_test.go, which
// proves that h2_file_server answers exactly like Caddy's file_server (its
// configurations are in diff_configs_test.go).

import (
	"fmt"
	"math/rand/v2"
	"os"
	"path/filepath"
	"testing"
	"time"

	"github.com/h2file/caddy-h2file/internal/harness"
)

// diffMtime is the modification time of every fixture, so that ETags and
// Last-Modified are stable: Last-Modified is "Thu, 04 Mar 2021 05:06:07 GMT".
var diffMtime = time.Date(2021, 3, 4, 5, 6, 7, 123456789, time.UTC)

// diffFixtureDirs are the directories built by diffFixture.
type diffFixtureDirs struct {
	base    string // parent of root and outside
	root    string // the site root shared by both sites
	outside string // a sibling of the root, for traversal attempts
}

// diffFixture builds the site root and a sibling directory outside of it.
// Sidecar files have contents different from the originals (they are not
// really compressed), so serving the wrong one shows in the body.
func diffFixture(t *testing.T) diffFixtureDirs {
	t.Helper()
	base := t.TempDir()
	d := diffFixtureDirs{
		base:    base,
		root:    filepath.Join(base, "root"),
		outside: filepath.Join(base, "outside"),
	}

	rng := rand.New(rand.NewPCG(20210304, 50607)) //nolint:gosec // deterministic test data
	random := func(n int) string {
		b := make([]byte, n)
		for i := range b {
			b[i] = byte(rng.UintN(256))
		}
		return string(b)
	}

	files := map[string]string{
		"index.html":  "<!doctype html><title>root index</title>\n",
		"hello.txt":   "Hello, world!\n",
		"empty.txt":   "",
		"page.html":   "<!doctype html><p>page</p>\n",
		"style.css":   "body { color: #123456; }\n",
		"app.js":      "console.log('app');\n",
		"data.json":   "{\"answer\": 42}\n",
		"image.svg":   "<svg xmlns=\"http://www.w3.org/2000/svg\"/>\n",
		"pixel.png":   "\x89PNG\r\n\x1a\n\x00\x00\x00\rIHDR\x00\x00\x00\x01\x00\x00\x00\x01\x08\x06\x00\x00\x00\x1f\x15\xc4\x89",
		"module.wasm": "\x00asm\x01\x00\x00\x00",
		"file.xyz":    "unknown extension\n",
		"README":      "no extension\n",
		"noext":       "<html>looks like html but has no extension</html>\n",
		"notes.txt":   "plain notes\n",
		"big.bin":     random(1<<20 + 12345),
		"random.dat":  random(300*1024 + 7),
		"mutable.txt": "original content\n",
		"mutable.bin": random(200 * 1024),

		// precompressed sidecars, each with its own content
		"style.css.br":      "BROTLI style.css sidecar\n",
		"style.css.zst":     "ZSTD style.css sidecar, a bit longer\n",
		"style.css.gz":      "GZIP style.css sidecar, longer still...\n",
		"app.js.gz":         "GZIP app.js sidecar\n",
		"data.json.zst":     "ZSTD data.json sidecar\n",
		"notes.txt.br":      "BROTLI notes sidecar (hidden by *.txt.br)\n",
		"notes.txt.gz":      "GZIP notes sidecar\n",
		"big.bin.gz":        "GZIP big.bin sidecar\n",
		"only.txt.gz":       "GZIP sidecar without an original\n",
		"only.css.br":       "BROTLI sidecar without an original\n",
		"dir/index.html.gz": "GZIP dir index sidecar\n",
		"empty.txt.gz":      "GZIP sidecar of an empty file\n",

		// ETag sidecars
		"hello.txt.etag":     "\"hello-sidecar-etag\"\n",
		"style.css.gz.etag":  "\"gz-sidecar-etag\"\n",
		"weak.txt":           "weak etag file\n",
		"weak.txt.etag":      "W/\"weak-one\"",
		"badetag.txt":        "unquoted etag file\n",
		"badetag.txt.etag":   "no-quotes\n\n",
		"emptyetag.txt":      "empty etag sidecar\n",
		"emptyetag.txt.etag": "",

		// useless modification times (set below)
		"epoch.txt": "mtime at the Unix epoch\n",
		"one.txt":   "mtime one second after the epoch\n",

		// names
		"with space.txt": "with space\n",
		"café.txt":       "café (NFC)\n",
		"日本/語.txt":       "日本語\n",
		"emoji-😀.txt":    "emoji\n",
		"100%.txt":       "one hundred percent\n",
		"a%20b.txt":      "literal percent-two-zero in the name\n",
		"plus+sign.txt":  "plus\n",
		"semi;colon.txt": "semicolon\n",
		"q?mark.txt":     "question mark\n",
		"UPPER.TXT":      "upper case name\n",
		"dots..txt":      "two dots inside the name\n",
		"trailing.":      "name ends with a dot\n",
		"-dash.txt":      "leading dash\n",
		"x.gz":           "a file that only looks precompressed\n",
		"hello.txt.orig": "not a sidecar\n",

		// dot-files
		".env":        "SECRET_KEY=dotenv\n",
		".git/config": "[core]\n\tbare = false\n",
		".git/HEAD":   "ref: refs/heads/main\n",
		".htaccess":   "Deny from all\n",
		"dir/.hidden": "dot-file in a directory\n",

		// directories
		"dir/index.html":           "<!doctype html><title>dir index</title>\n",
		"dir/sub/file.txt":         "dir/sub/file\n",
		"dir/sub/deeper/index.txt": "deeper index.txt\n",
		"dir2/default.htm":         "<p>dir2 default.htm</p>\n",
		"dir2/other.txt":           "dir2 other\n",
		"dir3/index.txt":           "dir3 index.txt\n",
		"dir.html/index.html":      "<p>a directory named like a file</p>\n",
		"dir.html/inner.txt":       "inside dir.html\n",
		"idxhidden/index.html":     "<p>hidden index</p>\n",
		"idxhidden/default.htm":    "<p>idxhidden default.htm</p>\n",
		"both/index.html":          "<p>both: index.html</p>\n",
		"both/default.htm":         "<p>both: default.htm</p>\n",

		// hidden things (hidden in the "hide" configurations)
		"Caddyfile":                "localhost {\n\tfile_server\n}\n",
		"Caddyfile.gz":             "GZIP Caddyfile sidecar\n",
		"secret.secret":            "a secret\n",
		"secret.secret.gz":         "GZIP secret sidecar\n",
		"public.txt":               "public, but its gzip sidecar is hidden\n",
		"public.txt.gz":            "GZIP public.txt sidecar (hidden by path)\n",
		"private/key.txt":          "private key\n",
		"private/index.html":       "<p>private index</p>\n",
		"privateer.txt":            "not private: only shares a prefix\n",
		"hidden_dir/file.txt":      "hidden_dir file\n",
		"hidden_dir/index.html":    "<p>hidden_dir index</p>\n",
		"sub/hidden_dir/x.txt":     "nested hidden_dir file\n",
		"sub/hidden_dir_not/y.txt": "similar name, not hidden\n",
		"sub/visible.txt":          "visible\n",

		// error pages for handle_errors
		"errors/400.html": "<p>error page 400</p>\n",
		"errors/403.html": "<p>error page 403</p>\n",
		"errors/404.html": "<p>error page 404</p>\n",
		"errors/405.html": "<p>error page 405</p>\n",

		// header precedence (see the "errors_headers" configuration)
		"hdr/file.txt":    "Etag set by the headers handler\n",
		"ctype/file.json": "{\"content_type\": \"set by the headers handler\"}\n",
		"ctype/noext":     "no extension, Content-Type from headers\n",
	}
	// sidecars of sizes around net/http's 512-byte sniff copy and 2048-byte
	// buffer, for the HTTP/1.1 framing of bodies sent without a
	// Content-Length
	for _, size := range []int{511, 512, 1028, 2048, 2049} {
		name := fmt.Sprintf("framing/f%d.txt", size)
		files[name] = fmt.Sprintf("%0*d", size, size)
		files[name+".gz"] = fmt.Sprintf("GZIP%0*d", size-4, size)
	}
	harness.WriteTree(t, d.root, files)
	harness.WriteTree(t, d.outside, map[string]string{"secret.txt": "TOP SECRET: outside the root\n"})
	for _, dir := range []string{"emptydir", "dir/emptysub"} {
		if err := os.MkdirAll(filepath.Join(d.root, dir), 0o755); err != nil {
			t.Fatal(err)
		}
	}

	// symlinks: inside the root, out of the root, to a directory, dangling
	links := map[string]string{
		"link-in.txt":  "hello.txt",
		"link-out.txt": filepath.Join("..", "outside", "secret.txt"),
		"link-dir":     "dir",
		"link-outdir":  filepath.Join("..", "outside"),
		"broken-link":  "does-not-exist.txt",
	}
	harness.LinkTree(t, d.root, links)

	// fixed times for everything, so ETags, Last-Modified and listings are
	// stable; symlinks themselves keep theirs (they are the same for both)
	harness.SetMtimes(t, d.root, diffMtime)
	harness.SetMtimes(t, d.outside, diffMtime)
	for name, mtime := range map[string]time.Time{
		"epoch.txt": time.Unix(0, 0),
		"one.txt":   time.Unix(1, 0),
	} {
		if err := os.Chtimes(filepath.Join(d.root, name), mtime, mtime); err != nil {
			t.Fatal(err)
		}
	}
	return d
}
