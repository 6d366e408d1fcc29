package h2file

import (
	"encoding/json"
	"reflect"
	"strings"
	"testing"

	"github.com/caddyserver/caddy/v2"
	"github.com/caddyserver/caddy/v2/caddyconfig/caddyfile"
	"github.com/caddyserver/caddy/v2/modules/caddyhttp/fileserver"

	// the precompressed encoders, and the directives used around
	// h2_file_server in the adapter tests (handle_path, encode, ...)
	_ "github.com/caddyserver/caddy/v2/modules/standard"
)

// cfgParse parses input, which starts with the h2_file_server directive,
// with (*Handler).UnmarshalCaddyfile.
func cfgParse(input string) (*Handler, error) {
	h := new(Handler)
	err := h.UnmarshalCaddyfile(caddyfile.NewTestDispenser(input))
	return h, err
}

// cfgParseFileServer parses input with Caddy's own file_server parser, after
// renaming the directive.
func cfgParseFileServer(input string) (*fileserver.FileServer, error) {
	input = strings.Replace(input, "h2_file_server", "file_server", 1)
	fsrv := new(fileserver.FileServer)
	err := fsrv.UnmarshalCaddyfile(caddyfile.NewTestDispenser(input))
	return fsrv, err
}

// cfgJSON renders v as indented JSON for failure messages.
func cfgJSON(v any) string {
	b, err := json.MarshalIndent(v, "", "  ")
	if err != nil {
		return err.Error()
	}
	return string(b)
}

func cfgBool(b bool) *bool { return &b }

// cfgPrecompressed is the module map the parser builds for formats.
func cfgPrecompressed(formats ...string) caddy.ModuleMap {
	m := make(caddy.ModuleMap, len(formats))
	for _, f := range formats {
		m[f] = json.RawMessage(`{}`)
	}
	return m
}

func TestCaddyfileSubdirectives(t *testing.T) {
	for _, tc := range []struct {
		name  string
		input string
		want  Handler
	}{
		{
			name:  "bare",
			input: `h2_file_server`,
			want:  Handler{},
		},
		{
			name:  "empty block",
			input: "h2_file_server {\n}",
			want:  Handler{},
		},
		{
			name:  "inline browse",
			input: `h2_file_server browse`,
			want:  Handler{Browse: &fileserver.Browse{}},
		},
		{
			name: "inline browse with a block",
			input: `h2_file_server browse {
				root /srv
			}`,
			want: Handler{Browse: &fileserver.Browse{}, Root: "/srv"},
		},
		{
			name: "fs",
			input: `h2_file_server {
				fs myfs
			}`,
			want: Handler{FileSystem: "myfs"},
		},
		{
			name: "root",
			input: `h2_file_server {
				root /var/www/site
			}`,
			want: Handler{Root: "/var/www/site"},
		},
		{
			name: "root placeholder",
			input: `h2_file_server {
				root {http.vars.other}
			}`,
			want: Handler{Root: "{http.vars.other}"},
		},
		{
			name: "hide one",
			input: `h2_file_server {
				hide .git
			}`,
			want: Handler{Hide: []string{".git"}},
		},
		{
			name: "hide many",
			input: `h2_file_server {
				hide .git *.bak /etc/secret
			}`,
			want: Handler{Hide: []string{".git", "*.bak", "/etc/secret"}},
		},
		{
			name: "repeated hide accumulates",
			input: `h2_file_server {
				hide .git
				hide *.bak /etc/secret
				hide {env.SECRET}
			}`,
			want: Handler{Hide: []string{".git", "*.bak", "/etc/secret", "{env.SECRET}"}},
		},
		{
			name: "index",
			input: `h2_file_server {
				index index.htm default.html
			}`,
			want: Handler{IndexNames: []string{"index.htm", "default.html"}},
		},
		{
			name: "browse subdirective",
			input: `h2_file_server {
				browse
			}`,
			want: Handler{Browse: &fileserver.Browse{}},
		},
		{
			name: "browse template file",
			input: `h2_file_server {
				browse /etc/caddy/listing.html
			}`,
			want: Handler{Browse: &fileserver.Browse{TemplateFile: "/etc/caddy/listing.html"}},
		},
		{
			name: "browse empty block",
			input: `h2_file_server {
				browse {
				}
			}`,
			want: Handler{Browse: &fileserver.Browse{}},
		},
		{
			name: "browse reveal_symlinks",
			input: `h2_file_server {
				browse {
					reveal_symlinks
				}
			}`,
			want: Handler{Browse: &fileserver.Browse{RevealSymlinks: true}},
		},
		{
			name: "browse sort",
			input: `h2_file_server {
				browse {
					sort size desc
				}
			}`,
			want: Handler{Browse: &fileserver.Browse{SortOptions: []string{"size", "desc"}}},
		},
		{
			// the order is only checked by Provision, as in file_server
			name: "browse sort accepts every option word",
			input: `h2_file_server {
				browse {
					sort name namedirfirst size time asc desc
				}
			}`,
			want: Handler{Browse: &fileserver.Browse{SortOptions: []string{"name", "namedirfirst", "size", "time", "asc", "desc"}}},
		},
		{
			name: "browse file_limit",
			input: `h2_file_server {
				browse {
					file_limit 250
				}
			}`,
			want: Handler{Browse: &fileserver.Browse{FileLimit: 250}},
		},
		{
			name: "browse plain_time_format",
			input: `h2_file_server {
				browse {
					plain_time_format "2006-01-02 15:04:05"
				}
			}`,
			want: Handler{Browse: &fileserver.Browse{PlainTimeFormat: "2006-01-02 15:04:05"}},
		},
		{
			name: "browse template file and full block",
			input: `h2_file_server {
				browse listing.html {
					reveal_symlinks
					sort time asc
					file_limit 10
					plain_time_format 2006-01-02
				}
			}`,
			want: Handler{Browse: &fileserver.Browse{
				TemplateFile:    "listing.html",
				RevealSymlinks:  true,
				SortOptions:     []string{"time", "asc"},
				FileLimit:       10,
				PlainTimeFormat: "2006-01-02",
			}},
		},
		{
			name: "precompressed without args defaults to br zstd gzip",
			input: `h2_file_server {
				precompressed
			}`,
			want: Handler{
				PrecompressedRaw:   cfgPrecompressed("br", "zstd", "gzip"),
				PrecompressedOrder: []string{"br", "zstd", "gzip"},
			},
		},
		{
			name: "precompressed one format",
			input: `h2_file_server {
				precompressed gzip
			}`,
			want: Handler{
				PrecompressedRaw:   cfgPrecompressed("gzip"),
				PrecompressedOrder: []string{"gzip"},
			},
		},
		{
			name: "precompressed formats keep their order",
			input: `h2_file_server {
				precompressed zstd gzip br
			}`,
			want: Handler{
				PrecompressedRaw:   cfgPrecompressed("br", "zstd", "gzip"),
				PrecompressedOrder: []string{"zstd", "gzip", "br"},
			},
		},
		{
			name: "status",
			input: `h2_file_server {
				status 404
			}`,
			want: Handler{StatusCode: "404"},
		},
		{
			name: "status placeholder",
			input: `h2_file_server {
				status {err.status_code}
			}`,
			want: Handler{StatusCode: "{err.status_code}"},
		},
		{
			name: "disable_canonical_uris",
			input: `h2_file_server {
				disable_canonical_uris
			}`,
			want: Handler{CanonicalURIs: cfgBool(false)},
		},
		{
			name: "pass_thru",
			input: `h2_file_server {
				pass_thru
			}`,
			want: Handler{PassThru: true},
		},
		{
			name: "etag_file_extensions",
			input: `h2_file_server {
				etag_file_extensions .etag .sha256
			}`,
			want: Handler{EtagFileExtensions: []string{".etag", ".sha256"}},
		},
		// repeated subdirectives mean what they mean to file_server
		{name: "root twice: the last wins", input: "h2_file_server {\n\troot /a\n\troot /b\n}", want: Handler{Root: "/b"}},
		{name: "index twice: the last wins", input: "h2_file_server {\n\tindex a.html\n\tindex b.html c.html\n}", want: Handler{IndexNames: []string{"b.html", "c.html"}}},
		{name: "status twice: the last wins", input: "h2_file_server {\n\tstatus 200\n\tstatus 404\n}", want: Handler{StatusCode: "404"}},
		{name: "status not a number", input: "h2_file_server {\n\tstatus abc\n}", want: Handler{StatusCode: "abc"}},
		{name: "status out of range", input: "h2_file_server {\n\tstatus 1000\n}", want: Handler{StatusCode: "1000"}},
		{name: "etag_file_extensions twice: the last wins", input: "h2_file_server {\n\tetag_file_extensions .a\n\tetag_file_extensions .b\n}", want: Handler{EtagFileExtensions: []string{".b"}}},
		{name: "flags twice", input: "h2_file_server {\n\tpass_thru\n\tdisable_canonical_uris\n\tpass_thru\n\tdisable_canonical_uris\n}", want: Handler{PassThru: true, CanonicalURIs: cfgBool(false)}},
		{
			name:  "precompressed twice: the order is replaced, the formats add up",
			input: "h2_file_server {\n\tprecompressed gzip\n\tprecompressed br\n}",
			want:  Handler{PrecompressedRaw: cfgPrecompressed("gzip", "br"), PrecompressedOrder: []string{"br"}},
		},
		{
			name:  "precompressed format listed twice",
			input: "h2_file_server {\n\tprecompressed gzip gzip\n}",
			want:  Handler{PrecompressedRaw: cfgPrecompressed("gzip"), PrecompressedOrder: []string{"gzip", "gzip"}},
		},
		{
			name:  "a token left on the line is the next subdirective",
			input: "h2_file_server {\n\troot /srv pass_thru\n}",
			want:  Handler{Root: "/srv", PassThru: true},
		},
		{
			name:  "browse sort twice: the options add up",
			input: "h2_file_server {\n\tbrowse {\n\t\tsort size\n\t\tsort desc\n\t}\n}",
			want:  Handler{Browse: &fileserver.Browse{SortOptions: []string{"size", "desc"}}},
		},
		{
			name:  "bare browse sort keeps the default",
			input: "h2_file_server {\n\tbrowse {\n\t\tsort\n\t}\n}",
			want:  Handler{Browse: &fileserver.Browse{}},
		},
		{
			name:  "browse file_limit 0 then 5",
			input: "h2_file_server {\n\tbrowse {\n\t\tfile_limit 0\n\t\tfile_limit 5\n\t}\n}",
			want:  Handler{Browse: &fileserver.Browse{FileLimit: 5}},
		},
		{
			name:  "browse file_limit -1",
			input: "h2_file_server {\n\tbrowse {\n\t\tfile_limit -1\n\t}\n}",
			want:  Handler{Browse: &fileserver.Browse{FileLimit: -1}},
		},
		{
			name: "everything",
			input: `h2_file_server {
				fs myfs
				root /srv/www
				hide .git
				hide *.bak
				index index.htm
				browse tpl.html {
					reveal_symlinks
					sort namedirfirst desc
					file_limit 500
					plain_time_format "Jan 2 2006"
				}
				precompressed br gzip
				status 203
				disable_canonical_uris
				pass_thru
				etag_file_extensions .etag
			}`,
			want: Handler{
				FileSystem: "myfs",
				Root:       "/srv/www",
				Hide:       []string{".git", "*.bak"},
				IndexNames: []string{"index.htm"},
				Browse: &fileserver.Browse{
					TemplateFile:    "tpl.html",
					RevealSymlinks:  true,
					SortOptions:     []string{"namedirfirst", "desc"},
					FileLimit:       500,
					PlainTimeFormat: "Jan 2 2006",
				},
				CanonicalURIs:      cfgBool(false),
				StatusCode:         "203",
				PassThru:           true,
				PrecompressedRaw:   cfgPrecompressed("br", "gzip"),
				PrecompressedOrder: []string{"br", "gzip"},
				EtagFileExtensions: []string{".etag"},
			},
		},
	} {
		t.Run(tc.name, func(t *testing.T) {
			got, err := cfgParse(tc.input)
			if err != nil {
				t.Fatalf("UnmarshalCaddyfile: unexpected error: %v", err)
			}
			if !reflect.DeepEqual(*got, tc.want) {
				t.Errorf("parsed handler:\n%s\nwant:\n%s\n(%#v)", cfgJSON(got), cfgJSON(tc.want), *got)
			}

			// whatever file_server accepts, it must read the same way
			fsrv, err := cfgParseFileServer(tc.input)
			if err != nil {
				t.Fatalf("file_server rejects the input: %v", err)
			}
			if g, w := cfgJSON(got), cfgJSON(fsrv); g != w {
				t.Errorf("h2_file_server parsed:\n%s\nfile_server parsed:\n%s", g, w)
			}
		})
	}
}
