package h2file

import (
	"encoding/json"
	"os"
	"path/filepath"
	"reflect"
	"sort"
	"strings"
	"testing"

	"github.com/caddyserver/caddy/v2/caddyconfig"
)

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
