package h2file

import (
	"encoding/json"
	"os"
	"path/filepath"
	"reflect"
	"sort"
	"strconv"
	"strings"
	"testing"

	"github.com/caddyserver/caddy/v2"
	"github.com/caddyserver/caddy/v2/caddyconfig"
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

func TestCaddyfileErrors(t *testing.T) {
	for _, tc := range []struct {
		name  string
		input string
		// every string must be in the error message
		want []string
		// if not 0, the line the error must point to
		line int
	}{
		// unknown tokens
		{
			name:  "unknown subdirective",
			input: "h2_file_server {\n\tbogus\n}",
			want:  []string{"unrecognized subdirective 'bogus'"},
			line:  2,
		},
		{
			name:  "unknown subdirective with args",
			input: "h2_file_server {\n\troot /srv\n\tbrowze on\n}",
			want:  []string{"unrecognized subdirective 'browze'"},
			line:  3,
		},
		{
			name:  "file_server-only typo in browse block",
			input: "h2_file_server {\n\tbrowse {\n\t\tbogus\n\t}\n}",
			want:  []string{"unknown subdirective 'bogus'"},
			line:  3,
		},
		{
			name:  "inline argument other than browse",
			input: "h2_file_server listing",
			want:  []string{"wrong argument count", "'listing'"},
		},
		{
			name:  "two inline arguments",
			input: "h2_file_server browse browse",
			want:  []string{"wrong argument count"},
		},

		// missing arguments
		{name: "fs without arg", input: "h2_file_server {\n\tfs\n}", want: []string{"wrong argument count", "'fs'"}, line: 2},
		{name: "root without arg", input: "h2_file_server {\n\troot\n}", want: []string{"wrong argument count", "'root'"}, line: 2},
		{name: "hide without arg", input: "h2_file_server {\n\thide\n}", want: []string{"wrong argument count", "'hide'"}, line: 2},
		{name: "index without arg", input: "h2_file_server {\n\tindex\n}", want: []string{"wrong argument count", "'index'"}, line: 2},
		{name: "status without arg", input: "h2_file_server {\n\tstatus\n}", want: []string{"wrong argument count", "'status'"}, line: 2},
		{name: "etag_file_extensions without arg", input: "h2_file_server {\n\tetag_file_extensions\n}", want: []string{"wrong argument count", "'etag_file_extensions'"}, line: 2},
		{name: "file_limit without arg", input: "h2_file_server {\n\tbrowse {\n\t\tfile_limit\n\t}\n}", want: []string{"file_limit should have an integer value"}, line: 3},
		{name: "plain_time_format without arg", input: "h2_file_server {\n\tbrowse {\n\t\tplain_time_format\n\t}\n}", want: []string{"plain_time_format is missing a time layout argument"}, line: 3},
		{name: "plain_time_format empty arg", input: "h2_file_server {\n\tbrowse {\n\t\tplain_time_format \"\"\n\t}\n}", want: []string{"plain_time_format requires a non-empty time layout argument"}, line: 3},
		{name: "sort without arg", input: "h2_file_server {\n\tbrowse {\n\t\tsort\n\t}\n}", want: []string{"wrong argument count", "'sort'"}, line: 3},
		{name: "root with a block instead of an arg", input: "h2_file_server {\n\troot {\n\t}\n}", want: []string{"wrong argument count", "'root'"}, line: 2},

		// extra arguments
		{name: "fs extra arg", input: "h2_file_server {\n\tfs a b\n}", want: []string{"wrong argument count", "'b'"}, line: 2},
		{name: "root extra arg", input: "h2_file_server {\n\troot /a /b\n}", want: []string{"wrong argument count", "'/b'"}, line: 2},
		{name: "status extra arg", input: "h2_file_server {\n\tstatus 404 500\n}", want: []string{"wrong argument count", "'500'"}, line: 2},
		{name: "disable_canonical_uris extra arg", input: "h2_file_server {\n\tdisable_canonical_uris yes\n}", want: []string{"wrong argument count", "'yes'"}, line: 2},
		{name: "pass_thru extra arg", input: "h2_file_server {\n\tpass_thru yes\n}", want: []string{"wrong argument count", "'yes'"}, line: 2},
		{name: "browse extra arg", input: "h2_file_server {\n\tbrowse a.html b.html\n}", want: []string{"wrong argument count", "'b.html'"}, line: 2},
		{name: "reveal_symlinks extra arg", input: "h2_file_server {\n\tbrowse {\n\t\treveal_symlinks yes\n\t}\n}", want: []string{"wrong argument count", "'yes'"}, line: 3},
		{name: "file_limit extra arg", input: "h2_file_server {\n\tbrowse {\n\t\tfile_limit 1 2\n\t}\n}", want: []string{"file_limit should have an integer value"}, line: 3},
		{name: "plain_time_format extra arg", input: "h2_file_server {\n\tbrowse {\n\t\tplain_time_format 2006 01\n\t}\n}", want: []string{"plain_time_format accepts exactly one time layout argument"}, line: 3},

		// duplicates
		{name: "root twice", input: "h2_file_server {\n\troot /a\n\troot /b\n}", want: []string{"root already specified"}, line: 3},
		{name: "fs twice", input: "h2_file_server {\n\tfs a\n\tfs b\n}", want: []string{"file system already specified"}, line: 3},
		{name: "index twice", input: "h2_file_server {\n\tindex a.html\n\tindex b.html\n}", want: []string{"index already specified"}, line: 3},
		{name: "status twice", input: "h2_file_server {\n\tstatus 200\n\tstatus 404\n}", want: []string{"status already specified"}, line: 3},
		{name: "disable_canonical_uris twice", input: "h2_file_server {\n\tdisable_canonical_uris\n\tdisable_canonical_uris\n}", want: []string{"disable_canonical_uris already specified"}, line: 3},
		{name: "pass_thru twice", input: "h2_file_server {\n\tpass_thru\n\tpass_thru\n}", want: []string{"pass_thru already specified"}, line: 3},
		{name: "etag_file_extensions twice", input: "h2_file_server {\n\tetag_file_extensions .a\n\tetag_file_extensions .b\n}", want: []string{"etag_file_extensions already specified"}, line: 3},
		{name: "precompressed twice", input: "h2_file_server {\n\tprecompressed gzip\n\tprecompressed br\n}", want: []string{"precompressed already specified"}, line: 3},
		{name: "precompressed twice without args", input: "h2_file_server {\n\tprecompressed\n\tprecompressed\n}", want: []string{"precompressed already specified"}, line: 3},
		{name: "precompressed format listed twice", input: "h2_file_server {\n\tprecompressed gzip br gzip\n}", want: []string{"precompressed format 'gzip' listed twice"}, line: 2},
		{name: "browse twice", input: "h2_file_server {\n\tbrowse\n\tbrowse\n}", want: []string{"browsing is already configured"}, line: 3},
		{name: "browse inline and as block", input: "h2_file_server browse {\n\tbrowse {\n\t\tfile_limit 3\n\t}\n}", want: []string{"browsing is already configured"}, line: 2},
		{name: "browse inline and as subdirective", input: "h2_file_server browse {\n\tbrowse\n}", want: []string{"browsing is already configured"}, line: 2},
		{name: "reveal_symlinks twice", input: "h2_file_server {\n\tbrowse {\n\t\treveal_symlinks\n\t\treveal_symlinks\n\t}\n}", want: []string{"Symlinks path reveal is already enabled"}, line: 4},
		{name: "sort twice", input: "h2_file_server {\n\tbrowse {\n\t\tsort size\n\t\tsort desc\n\t}\n}", want: []string{"sort already specified"}, line: 4},
		{name: "file_limit twice", input: "h2_file_server {\n\tbrowse {\n\t\tfile_limit 1\n\t\tfile_limit 2\n\t}\n}", want: []string{"file_limit is already enabled"}, line: 4},
		{name: "sort twice, first without options", input: "h2_file_server {\n\tbrowse {\n\t\tsort\n\t\tsort desc\n\t}\n}", want: []string{"sort"}, line: 3},
		{name: "file_limit twice, first 0", input: "h2_file_server {\n\tbrowse {\n\t\tfile_limit 0\n\t\tfile_limit 2\n\t}\n}", want: []string{"file_limit is already enabled"}, line: 4},
		{name: "plain_time_format twice", input: "h2_file_server {\n\tbrowse {\n\t\tplain_time_format 2006\n\t\tplain_time_format 01\n\t}\n}", want: []string{"plain_time_format is already set"}, line: 4},

		// bad values
		{name: "unknown precompressed format", input: "h2_file_server {\n\tprecompressed br bogus\n}", want: []string{"http.precompressed.bogus"}, line: 2},
		{name: "bad browse sort option", input: "h2_file_server {\n\tbrowse {\n\t\tsort size upwards\n\t}\n}", want: []string{"unknown sort option 'upwards'"}, line: 3},
		{name: "bad file_limit", input: "h2_file_server {\n\tbrowse {\n\t\tfile_limit many\n\t}\n}", want: []string{"file_limit should have an integer value"}, line: 3},
		{name: "fractional file_limit", input: "h2_file_server {\n\tbrowse {\n\t\tfile_limit 1.5\n\t}\n}", want: []string{"file_limit should have an integer value"}, line: 3},
	} {
		t.Run(tc.name, func(t *testing.T) {
			_, err := cfgParse(tc.input)
			if err == nil {
				t.Fatalf("UnmarshalCaddyfile accepted:\n%s", tc.input)
			}
			t.Logf("error: %v", err)
			for _, w := range tc.want {
				if !strings.Contains(err.Error(), w) {
					t.Errorf("error %q does not contain %q", err, w)
				}
			}
			if tc.line != 0 {
				if w := ", at Testfile:" + strconv.Itoa(tc.line); !strings.HasSuffix(err.Error(), w) {
					t.Errorf("error %q does not point to line %d", err, tc.line)
				}
			}
		})
	}
}

// cfgAdapt adapts a Caddyfile to JSON with the caddyfile adapter; filename
// is the name the adapter is told, "" for its default.
func cfgAdapt(t *testing.T, body, filename string) []byte {
	t.Helper()
	adapter := caddyconfig.GetAdapter("caddyfile")
	if adapter == nil {
		t.Fatal("no caddyfile adapter")
	}
	opts := map[string]any{}
	if filename != "" {
		opts["filename"] = filename
	}
	out, warnings, err := adapter.Adapt([]byte(body), opts)
	if err != nil {
		t.Fatalf("adapting:\n%s\nerror: %v", body, err)
	}
	for _, w := range warnings {
		t.Logf("adapter warning: %s", w)
	}
	return out
}

// cfgHandlers returns every handler object of an adapted config, in the
// order they appear in the routes.
func cfgHandlers(t *testing.T, cfgJSON []byte) []map[string]any {
	t.Helper()
	var cfg any
	if err := json.Unmarshal(cfgJSON, &cfg); err != nil {
		t.Fatalf("adapted config is not JSON: %v", err)
	}
	var handlers []map[string]any
	var walk func(v any)
	walk = func(v any) {
		switch v := v.(type) {
		case map[string]any:
			if _, ok := v["handler"].(string); ok {
				handlers = append(handlers, v)
			}
			keys := make([]string, 0, len(v))
			for k := range v {
				keys = append(keys, k)
			}
			sort.Strings(keys)
			for _, k := range keys {
				walk(v[k])
			}
		case []any:
			for _, e := range v {
				walk(e)
			}
		}
	}
	walk(cfg)
	return handlers
}

// cfgHandlerNames returns the "handler" value of each handler.
func cfgHandlerNames(handlers []map[string]any) []string {
	names := make([]string, len(handlers))
	for i, h := range handlers {
		names[i], _ = h["handler"].(string)
	}
	return names
}

// cfgOnlyHandler returns the one handler named name.
func cfgOnlyHandler(t *testing.T, cfgJSON []byte, name string) map[string]any {
	t.Helper()
	var found []map[string]any
	for _, h := range cfgHandlers(t, cfgJSON) {
		if h["handler"] == name {
			found = append(found, h)
		}
	}
	if len(found) != 1 {
		t.Fatalf("want one %s handler, got %d in %s", name, len(found), cfgJSON)
	}
	return found[0]
}

// cfgStrings converts a JSON array of strings.
func cfgStrings(v any) []string {
	arr, _ := v.([]any)
	out := make([]string, 0, len(arr))
	for _, e := range arr {
		s, _ := e.(string)
		out = append(out, s)
	}
	return out
}

func TestCaddyfileAdapterHidesCaddyfile(t *testing.T) {
	sep := string(filepath.Separator)
	for _, tc := range []struct {
		name     string
		body     string
		filename string
		want     []string
	}{
		{
			name: "default file name",
			body: ":80\n\nh2_file_server\n",
			want: []string{"." + sep + "Caddyfile"},
		},
		{
			name:     "absolute file name",
			body:     ":80\n\nh2_file_server\n",
			filename: filepath.Join(sep, "etc", "caddy", "Caddyfile"),
			want:     []string{filepath.Join(sep, "etc", "caddy", "Caddyfile")},
		},
		{
			name:     "relative file name in a folder",
			body:     ":80\n\nh2_file_server\n",
			filename: filepath.Join("conf", "Caddyfile"),
			want:     []string{filepath.Join("conf", "Caddyfile")},
		},
		{
			name:     "bare file name gets a separator",
			body:     ":80\n\nh2_file_server\n",
			filename: "site.caddy",
			want:     []string{"." + sep + "site.caddy"},
		},
		{
			name:     "after the user's hide list",
			body:     ":80\n\nh2_file_server {\n\thide .git *.bak\n}\n",
			filename: filepath.Join(sep, "etc", "caddy", "Caddyfile"),
			want:     []string{".git", "*.bak", filepath.Join(sep, "etc", "caddy", "Caddyfile")},
		},
		{
			name:     "not twice when already hidden by name",
			body:     ":80\n\nh2_file_server {\n\thide Caddyfile\n}\n",
			filename: filepath.Join(sep, "etc", "caddy", "Caddyfile"),
			want:     []string{"Caddyfile"},
		},
		{
			name:     "not twice when already hidden by glob",
			body:     ":80\n\nh2_file_server {\n\thide /etc/caddy/*\n}\n",
			filename: filepath.Join(sep, "etc", "caddy", "Caddyfile"),
			want:     []string{"/etc/caddy/*"},
		},
		{
			name: "browse and matcher do not matter",
			body: ":80\n\nh2_file_server /pub/* browse\n",
			want: []string{"." + sep + "Caddyfile"},
		},
	} {
		t.Run(tc.name, func(t *testing.T) {
			h := cfgOnlyHandler(t, cfgAdapt(t, tc.body, tc.filename), "h2_file_server")
			if got := cfgStrings(h["hide"]); !reflect.DeepEqual(got, tc.want) {
				t.Errorf("hide = %q, want %q", got, tc.want)
			}
			// file_server hides the same files
			fsBody := strings.ReplaceAll(tc.body, "h2_file_server", "file_server")
			fsh := cfgOnlyHandler(t, cfgAdapt(t, fsBody, tc.filename), "file_server")
			if got, want := cfgStrings(h["hide"]), cfgStrings(fsh["hide"]); !reflect.DeepEqual(got, want) {
				t.Errorf("h2_file_server hides %q, file_server hides %q", got, want)
			}
		})
	}
}

// Every file the site block's directives come from is hidden, imported
// ones too, as file_server does.
func TestCaddyfileAdapterHidesImportedFiles(t *testing.T) {
	dir := t.TempDir()
	main := filepath.Join(dir, "Caddyfile")
	snippet := filepath.Join(dir, "site.caddy")
	if err := os.WriteFile(snippet, []byte("h2_file_server {\n\thide .git\n}\n"), 0o600); err != nil {
		t.Fatal(err)
	}
	body := ":80 {\n\troot * /srv\n\timport " + snippet + "\n}\n"
	if err := os.WriteFile(main, []byte(body), 0o600); err != nil {
		t.Fatal(err)
	}
	h := cfgOnlyHandler(t, cfgAdapt(t, body, main), "h2_file_server")
	got := cfgStrings(h["hide"])
	want := []string{".git", main, snippet}
	if len(got) > 1 {
		sort.Strings(got[1:])
	}
	sort.Strings(want[1:])
	if !reflect.DeepEqual(got, want) {
		t.Errorf("hide = %q, want %q", got, want)
	}

	if err := os.WriteFile(snippet, []byte("file_server {\n\thide .git\n}\n"), 0o600); err != nil {
		t.Fatal(err)
	}
	fsh := cfgOnlyHandler(t, cfgAdapt(t, body, main), "file_server")
	if fsHide := cfgStrings(fsh["hide"]); !reflect.DeepEqual(cfgStrings(h["hide"]), fsHide) {
		t.Errorf("h2_file_server hides %q, file_server hides %q", cfgStrings(h["hide"]), fsHide)
	}
}

func TestCaddyfileDirectiveOrder(t *testing.T) {
	for _, tc := range []struct {
		name string
		body string
		want []string
	}{
		{
			name: "file_server written first",
			body: ":80\n\nfile_server\nh2_file_server\n",
			want: []string{"h2_file_server", "file_server"},
		},
		{
			name: "h2_file_server written first",
			body: ":80\n\nh2_file_server\nfile_server\n",
			want: []string{"h2_file_server", "file_server"},
		},
		{
			name: "among other directives",
			body: ":80\n\nfile_server\nh2_file_server\nreverse_proxy 127.0.0.1:9\nencode gzip\nheader X-A b\n",
			want: []string{"headers", "encode", "h2_file_server", "file_server"},
		},
	} {
		t.Run(tc.name, func(t *testing.T) {
			var got []string
			for _, name := range cfgHandlerNames(cfgHandlers(t, cfgAdapt(t, tc.body, ""))) {
				// reverse_proxy sorts before both file servers; only
				// relative order matters here
				if name != "reverse_proxy" {
					got = append(got, name)
				}
			}
			if !reflect.DeepEqual(got, tc.want) {
				t.Errorf("handlers in order %q, want %q", got, tc.want)
			}
		})
	}
}
