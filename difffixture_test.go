package h2file

// Fixtures and Caddy configurations for the differential test in
// diff_test.go, which proves that h2_file_server answers exactly like
// Caddy's file_server.

import (
	"encoding/json"
	"fmt"
	"math/rand/v2"
	"net"
	"os"
	"path/filepath"
	"testing"
	"time"
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
	for name, content := range files {
		diffWriteFile(t, filepath.Join(d.root, name), content)
	}
	diffWriteFile(t, filepath.Join(d.outside, "secret.txt"), "TOP SECRET: outside the root\n")
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
	for name, target := range links {
		if err := os.Symlink(target, filepath.Join(d.root, name)); err != nil {
			t.Fatal(err)
		}
	}

	// fixed times for everything, so ETags, Last-Modified and listings are
	// stable; symlinks themselves keep theirs (they are the same for both)
	for _, dir := range []string{d.root, d.outside} {
		err := filepath.Walk(dir, func(path string, info os.FileInfo, err error) error {
			if err != nil {
				return err
			}
			if info.Mode()&os.ModeSymlink != 0 {
				return nil
			}
			return os.Chtimes(path, diffMtime, diffMtime)
		})
		if err != nil {
			t.Fatal(err)
		}
	}
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

func diffWriteFile(t *testing.T, name, content string) {
	t.Helper()
	if err := os.MkdirAll(filepath.Dir(name), 0o755); err != nil {
		t.Fatal(err)
	}
	if err := os.WriteFile(name, []byte(content), 0o644); err != nil {
		t.Fatal(err)
	}
}

// diffConfig is one handler configuration, served by two sites: one with
// file_server and one with h2_file_server.
type diffConfig struct {
	name string
	// opts are the handler's fields, the same for both handlers; "root"
	// is added.
	opts map[string]any
	// routes wraps the file handler into the site's routes; nil means a
	// single route with just the file handler.
	routes func(file map[string]any) []any
	// errors, if set, gives the site's handle_errors routes.
	errors func(file map[string]any) []any
	// h2Root, if set, is the root of the h2_file_server site instead of
	// the shared one (only for the sanity check that differences show).
	h2Root string

	// the sites, set by diffStartCaddy: over TLS (HTTP/2 and HTTP/1.1)
	// and over cleartext HTTP/1.1
	fs, h2, fsPlain, h2Plain diffSite
}

// diffSite is one server of the Caddy config.
type diffSite struct {
	name string // Caddy server name
	port int
	tls  bool
}

// sites returns the file_server and h2_file_server sites for a client.
func (c *diffConfig) sites(dc diffClient) (fs, h2 diffSite) {
	if dc.plain {
		return c.fsPlain, c.h2Plain
	}
	return c.fs, c.h2
}

// allSites lists the four sites of c, and whether each is h2_file_server's.
func (c *diffConfig) allSites() []struct {
	site diffSite
	h2   bool
} {
	return []struct {
		site diffSite
		h2   bool
	}{{c.fs, false}, {c.h2, true}, {c.fsPlain, false}, {c.h2Plain, true}}
}

// diffConfigs lists the configurations the corpus runs against. The
// Caddyfile in the root is hidden in all of them, as the Caddyfile adapter
// does.
func diffConfigs(d diffFixtureDirs) []*diffConfig {
	caddyfile := filepath.Join(d.root, "Caddyfile")
	hideCaddyfile := []string{caddyfile}
	falseVal := false

	return []*diffConfig{
		{
			name: "defaults",
			opts: map[string]any{"hide": hideCaddyfile},
		},
		{
			name: "precompressed_hide_index",
			opts: map[string]any{
				"precompressed": map[string]any{
					"br": map[string]any{}, "zstd": map[string]any{}, "gzip": map[string]any{},
				},
				"precompressed_order": []string{"br", "zstd", "gzip"},
				"hide": []string{
					"*.secret",
					filepath.Join(d.root, "private"),
					"hidden_dir",
					"*.txt.br",
					filepath.Join(d.root, "public.txt.gz"),
					filepath.Join(d.root, "idxhidden", "index.html"),
					caddyfile,
				},
				"index_names": []string{"index.html", "default.htm"},
			},
		},
		{
			name: "etag_files",
			opts: map[string]any{
				"etag_file_extensions": []string{".etag"},
				"precompressed":        map[string]any{"gzip": map[string]any{}},
				"hide":                 hideCaddyfile,
			},
		},
		{
			name: "status_418",
			opts: map[string]any{"status_code": "418", "hide": hideCaddyfile},
		},
		{
			name: "pass_thru",
			opts: map[string]any{"pass_thru": true, "hide": hideCaddyfile},
			routes: func(file map[string]any) []any {
				return []any{map[string]any{"handle": []any{
					file,
					map[string]any{
						"handler":     "static_response",
						"status_code": 299,
						"headers":     map[string][]string{"X-Pass-Thru": {"yes"}},
						"body":        "passed through: {http.request.uri.path}\n",
					},
				}}}
			},
		},
		{
			name: "no_canonical_uris",
			opts: map[string]any{"canonical_uris": falseVal, "hide": hideCaddyfile},
		},
		{
			name: "browse",
			opts: map[string]any{"browse": map[string]any{}, "hide": hideCaddyfile},
		},
		{
			name: "no_index",
			opts: map[string]any{"index_names": []string{}, "browse": map[string]any{}, "hide": []string{caddyfile, "*.secret"}},
		},
		{
			// handle_errors serves error pages with the handler under
			// test, and a headers handler sets Etag or Content-Type
			// before it
			name: "errors_headers",
			opts: map[string]any{"hide": hideCaddyfile},
			routes: func(file map[string]any) []any {
				return []any{
					map[string]any{
						"match": []any{map[string]any{"path": []string{"/hdr/*"}}},
						"handle": []any{map[string]any{
							"handler":  "headers",
							"response": map[string]any{"set": map[string][]string{"Etag": {`"from-headers"`}}},
						}},
					},
					map[string]any{
						"match": []any{map[string]any{"path": []string{"/ctype/*"}}},
						"handle": []any{map[string]any{
							"handler":  "headers",
							"response": map[string]any{"set": map[string][]string{"Content-Type": {"text/x-custom"}}},
						}},
					},
					map[string]any{"handle": []any{file}},
				}
			},
			errors: func(file map[string]any) []any {
				return []any{map[string]any{"handle": []any{
					map[string]any{"handler": "rewrite", "uri": "/errors/{http.error.status_code}.html"},
					file,
				}}}
			},
		},
	}
}

// diffSanityConfig serves the h2_file_server site from another root, so
// that responses must differ: it proves the comparison can fail.
func diffSanityConfig(d diffFixtureDirs) *diffConfig {
	return &diffConfig{
		name:   "sanity_other_root",
		opts:   map[string]any{},
		h2Root: filepath.Join(d.root, "dir"),
	}
}

// diffFreePorts returns n distinct free TCP ports on 127.0.0.1.
func diffFreePorts(t *testing.T, n int) []int {
	t.Helper()
	var lns []net.Listener
	defer func() {
		for _, ln := range lns {
			ln.Close()
		}
	}()
	ports := make([]int, 0, n)
	for range n {
		ln, err := net.Listen("tcp", "127.0.0.1:0")
		if err != nil {
			t.Fatal(err)
		}
		lns = append(lns, ln)
		ports = append(ports, ln.Addr().(*net.TCPAddr).Port)
	}
	return ports
}

// diffHandlerJSON returns the JSON of a file handler for a site.
func diffHandlerJSON(handler, root string, opts map[string]any) map[string]any {
	m := make(map[string]any, len(opts)+2)
	for k, v := range opts {
		m[k] = v
	}
	m["handler"] = handler
	m["root"] = root
	return m
}

// diffServerJSON returns one server, with TLS (HTTP/1.1 and HTTP/2) or
// without (HTTP/1.1 only).
func diffServerJSON(site diffSite, routes, errorRoutes []any) map[string]any {
	srv := map[string]any{
		"listen":          []string{fmt.Sprintf("127.0.0.1:%d", site.port)},
		"protocols":       []string{"h1", "h2"},
		"routes":          routes,
		"automatic_https": map[string]any{"disable_redirects": true},
	}
	if site.tls {
		srv["tls_connection_policies"] = []any{map[string]any{}}
	} else {
		// h1 and h2, as by default: with h1 alone, Caddy wraps every
		// connection to refuse HTTP/2 prefaces, which hides the TCP
		// connection from net/http and with it net/http's ReadFrom (the
		// 512-byte sniff copy, then sendfile), and so the framing a body
		// without a Content-Length gets by default
		srv["protocols"] = []string{"h1", "h2"}
	}
	if errorRoutes != nil {
		srv["errors"] = map[string]any{"routes": errorRoutes}
	}
	return srv
}

// diffCaddyJSON builds the whole Caddy config: four servers per diffConfig
// (file_server and h2_file_server, each with and without TLS) plus an
// "echo" server that answers with the request-target it received.
func diffCaddyJSON(d diffFixtureDirs, storage string, httpPort int, echo diffSite, logOutput string, cfgs []*diffConfig) ([]byte, error) {
	servers := map[string]any{}
	for _, c := range cfgs {
		for _, s := range c.allSites() {
			handler, root := "file_server", d.root
			if s.h2 {
				handler = "h2_file_server"
				if c.h2Root != "" {
					root = c.h2Root
				}
			}
			file := diffHandlerJSON(handler, root, c.opts)
			routes := []any{map[string]any{"handle": []any{file}}}
			if c.routes != nil {
				routes = c.routes(file)
			}
			var errorRoutes []any
			if c.errors != nil {
				errorRoutes = c.errors(diffHandlerJSON(handler, root, c.opts))
			}
			servers[s.site.name] = diffServerJSON(s.site, routes, errorRoutes)
		}
	}
	servers[echo.name] = diffServerJSON(echo, []any{map[string]any{"handle": []any{map[string]any{
		"handler":     "static_response",
		"status_code": 200,
		"body":        "{http.request.orig_uri}",
	}}}}, nil)

	cfg := map[string]any{
		"admin":   map[string]any{"disabled": true, "config": map[string]any{"persist": false}},
		"storage": map[string]any{"module": "file_system", "root": storage},
		"logging": map[string]any{"logs": map[string]any{"default": map[string]any{
			"level":  "ERROR",
			"writer": map[string]any{"output": logOutput},
		}}},
		"apps": map[string]any{
			"http": map[string]any{
				"http_port":    httpPort,
				"grace_period": "1ns",
				"servers":      servers,
			},
			"tls": map[string]any{
				"certificates": map[string]any{"automate": []string{"localhost"}},
				"automation": map[string]any{"policies": []any{map[string]any{
					"subjects": []string{"localhost"},
					"issuers":  []any{map[string]any{"module": "internal"}},
				}}},
			},
			"pki": map[string]any{"certificate_authorities": map[string]any{
				"local": map[string]any{"install_trust": false},
			}},
		},
	}
	return json.MarshalIndent(cfg, "", "  ")
}
