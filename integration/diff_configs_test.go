package integration

// The configurations of the differential test (diff_test.go): each is
// served by a file_server site and an h2_file_server site with the same
// handler options. A new configuration is one more entry of diffConfigs.

import (
	"path/filepath"
)

// diffConfig is one handler configuration, served by two sites: one with
// file_server and one with h2_file_server.
type diffConfig struct {
	name string
	// opts are the handler's fields, the same for both handlers; "root"
	// is added.
	opts map[string]any
	// h2Opts are more fields of the h2_file_server handler only.
	h2Opts map[string]any
	// routes wraps the file handler into the site's routes; nil means a
	// single route with just the file handler.
	routes func(file map[string]any) []any
	// errors, if set, gives the site's handle_errors routes.
	errors func(file map[string]any) []any
	// h2Root, if set, is the root of the h2_file_server site instead of
	// the shared one (only for the sanity check that differences show).
	h2Root string

	// the sites, set by diffStartCaddy: over TLS (HTTP/2 and HTTP/1.1)
	// and over cleartext HTTP/1.1; h2Engine is h2_file_server behind
	// h2file's own HTTP/2 engine (engineWrappers)
	fs, h2, fsPlain, h2Plain, h2Engine diffSite
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
	if dc.engine {
		return c.fs, c.h2Engine
	}
	return c.fs, c.h2
}

// allSites lists the five sites of c, whether each is h2_file_server's,
// and whether it is behind the engine.
func (c *diffConfig) allSites() []struct {
	site       diffSite
	h2, engine bool
} {
	return []struct {
		site       diffSite
		h2, engine bool
	}{{c.fs, false, false}, {c.h2, true, false}, {c.fsPlain, false, false}, {c.h2Plain, true, false}, {c.h2Engine, true, true}}
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
			// encode in front, as most sites have it; h2_file_server
			// serves compressed variants kept in memory with the same
			// settings, file_server's responses are compressed by encode
			name:   "encode_compress",
			opts:   map[string]any{"hide": hideCaddyfile},
			h2Opts: map[string]any{"compress": diffEncodeSettings()},
			routes: func(file map[string]any) []any {
				enc := diffEncodeSettings()
				enc["handler"] = "encode"
				return []any{map[string]any{"handle": []any{enc, file}}}
			},
		},
		{
			// sidecar files still win where precompressed is configured
			name:   "encode_compress_precompressed",
			opts:   map[string]any{"hide": hideCaddyfile, "precompressed": map[string]any{"zstd": map[string]any{}, "gzip": map[string]any{}}},
			h2Opts: map[string]any{"compress": diffEncodeSettings()},
			routes: func(file map[string]any) []any {
				enc := diffEncodeSettings()
				enc["handler"] = "encode"
				return []any{map[string]any{"handle": []any{enc, file}}}
			},
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

// diffEncodeSettings are the encode_compress configuration's encodings,
// for encode and for h2_file_server's compress alike.
func diffEncodeSettings() map[string]any {
	return map[string]any{
		"encodings": map[string]any{"zstd": map[string]any{}, "gzip": map[string]any{"level": 6}},
		"prefer":    []string{"zstd", "gzip"},
	}
}
