package h2file

import (
	"context"
	"path/filepath"
	"reflect"
	"sort"
	"strings"
	"testing"

	"github.com/caddyserver/caddy/v2"
	"go.uber.org/zap"
	"go.uber.org/zap/zapcore"
	"go.uber.org/zap/zaptest/observer"

	"github.com/h2file/caddy-h2file/internal/harness"
)

// cfgProvision provisions h in a fresh Caddy context, which is cancelled
// (and h cleaned up) when the test ends.
func cfgProvision(t *testing.T, h *Handler) error {
	t.Helper()
	ctx, cancel := caddy.NewContext(caddy.Context{Context: context.Background()})
	t.Cleanup(cancel)
	err := h.Provision(ctx)
	if err == nil {
		t.Cleanup(func() {
			if cu, ok := any(h).(caddy.CleanerUpper); ok {
				if err := cu.Cleanup(); err != nil {
					t.Errorf("Cleanup: %v", err)
				}
			}
		})
	}
	return err
}

// cfgDecodeHandler strictly decodes a handler config (without "handler").
func cfgDecodeHandler(t *testing.T, raw string) *Handler {
	t.Helper()
	h := new(Handler)
	if err := cfgStrictDecode([]byte(raw), h); err != nil {
		t.Fatalf("decoding %s: %v", raw, err)
	}
	return h
}

func TestProvisionDefaults(t *testing.T) {
	h := new(Handler)
	if err := cfgProvision(t, h); err != nil {
		t.Fatalf("Provision: %v", err)
	}
	if h.Root != "{http.vars.root}" {
		t.Errorf("Root = %q, want {http.vars.root}", h.Root)
	}
	if h.FileSystem != "{http.vars.fs}" {
		t.Errorf("FileSystem = %q, want {http.vars.fs}", h.FileSystem)
	}
	if want := []string{"index.html", "index.txt"}; !reflect.DeepEqual(h.IndexNames, want) {
		t.Errorf("IndexNames = %q, want %q", h.IndexNames, want)
	}
	if h.Browse != nil || h.CanonicalURIs != nil || h.StatusCode != "" || h.PassThru ||
		h.PrecompressedOrder != nil || h.EtagFileExtensions != nil {
		t.Errorf("Provision set options nobody asked for: %s", cfgJSON(h))
	}
	if len(h.precompressors) != 0 {
		t.Errorf("precompressors = %v, want none", h.precompressors)
	}
	// only a relative data directory (it holds private keys) is hidden
	var wantHide []string
	if dataDir := caddy.AppDataDir(); !filepath.IsAbs(dataDir) {
		abs, _ := caddy.FastAbs(dataDir)
		wantHide = []string{abs}
	}
	if len(h.Hide) != len(wantHide) || (len(wantHide) > 0 && !reflect.DeepEqual(h.Hide, wantHide)) {
		t.Errorf("Hide = %q, want %q", h.Hide, wantHide)
	}

	// the file server for listings has the same configuration
	if h.fallback == nil {
		t.Fatal("no fallback file server")
	}
	if h.fallback.Root != h.Root || h.fallback.FileSystem != h.FileSystem || !reflect.DeepEqual(h.fallback.IndexNames, h.IndexNames) {
		t.Errorf("fallback has root %q fs %q index %q", h.fallback.Root, h.fallback.FileSystem, h.fallback.IndexNames)
	}
}

func TestProvisionKeepsConfiguredValues(t *testing.T) {
	h := cfgDecodeHandler(t, `{
		"fs": "myfs",
		"root": "/srv/www",
		"index_names": ["home.html"],
		"status_code": "{http.vars.code}",
		"browse": {"sort": ["time", "desc"], "file_limit": 20}
	}`)
	if err := cfgProvision(t, h); err != nil {
		t.Fatalf("Provision: %v", err)
	}
	if h.FileSystem != "myfs" || h.Root != "/srv/www" || !reflect.DeepEqual(h.IndexNames, []string{"home.html"}) ||
		h.StatusCode != "{http.vars.code}" || h.Browse == nil || h.Browse.FileLimit != 20 {
		t.Errorf("Provision changed the configuration: %s", cfgJSON(h))
	}
	if h.fallback.Browse != h.Browse || h.fallback.Root != "/srv/www" || h.fallback.StatusCode != h.StatusCode {
		t.Errorf("fallback does not share the configuration")
	}
}

// Static hide paths with a separator are made absolute; names, globs and
// placeholders are left alone.
func TestProvisionHidePaths(t *testing.T) {
	h := &Handler{Hide: []string{
		filepath.Join("private", "keys"),
		".git",
		"*.bak",
		filepath.Join("{env.HOME}", "secret"),
		filepath.Join(string(filepath.Separator), "etc", "passwd"),
	}}
	if err := cfgProvision(t, h); err != nil {
		t.Fatalf("Provision: %v", err)
	}
	abs, err := caddy.FastAbs(filepath.Join("private", "keys"))
	if err != nil {
		t.Fatal(err)
	}
	want := []string{
		abs,
		".git",
		"*.bak",
		filepath.Join("{env.HOME}", "secret"),
		filepath.Join(string(filepath.Separator), "etc", "passwd"),
	}
	if got := h.Hide[:min(len(h.Hide), len(want))]; !reflect.DeepEqual(got, want) {
		t.Errorf("Hide = %q, want %q first", h.Hide, want)
	}
}

func TestProvisionPrecompressed(t *testing.T) {
	h := cfgDecodeHandler(t, `{
		"precompressed": {"br": {}, "gzip": {}, "zstd": {}},
		"precompressed_order": ["zstd", "br", "gzip"]
	}`)
	if err := cfgProvision(t, h); err != nil {
		t.Fatalf("Provision: %v", err)
	}
	suffixes := map[string]string{}
	for ae, p := range h.precompressors {
		suffixes[ae] = p.Suffix()
	}
	if want := map[string]string{"br": ".br", "gzip": ".gz", "zstd": ".zst"}; !reflect.DeepEqual(suffixes, want) {
		t.Errorf("precompressor suffixes = %v, want %v", suffixes, want)
	}
	if !reflect.DeepEqual(h.PrecompressedOrder, []string{"zstd", "br", "gzip"}) {
		t.Errorf("PrecompressedOrder = %q", h.PrecompressedOrder)
	}
}

// What the Caddyfile parser produces can be provisioned.
func TestProvisionFromCaddyfile(t *testing.T) {
	h, err := cfgParse(`h2_file_server browse {
		root /srv/www
		hide .git
		index index.htm
		precompressed
		status 203
		disable_canonical_uris
		pass_thru
		etag_file_extensions .etag
	}`)
	if err != nil {
		t.Fatal(err)
	}
	if err := cfgProvision(t, h); err != nil {
		t.Fatalf("Provision: %v", err)
	}
	var encodings []string
	for ae := range h.precompressors {
		encodings = append(encodings, ae)
	}
	sort.Strings(encodings)
	if want := []string{"br", "gzip", "zstd"}; !reflect.DeepEqual(encodings, want) {
		t.Errorf("precompressors for %q, want %q", encodings, want)
	}
}

func TestProvisionErrors(t *testing.T) {
	for _, tc := range []struct {
		name string
		json string
		// every string must be in the error message
		want []string
		// none of these may be
		notWant []string
	}{
		{
			name: "unknown precompressed module",
			json: `{"precompressed": {"bogus": {}}}`,
			want: []string{"http.precompressed.bogus"},
		},
		{
			// browse is off: the error must not blame directory listings
			name:    "unknown precompressed module is not a listing error",
			json:    `{"precompressed": {"bogus": {}}}`,
			want:    []string{"bogus"},
			notWant: []string{"listing"},
		},
		{
			name: "bad precompressed module config",
			json: `{"precompressed": {"gzip": {"bogus_field": 5}}}`,
			want: []string{"http.precompressed.gzip", "unknown field", "bogus_field"},
		},
		{
			name: "bad first browse sort option",
			json: `{"browse": {"sort": ["bogus"]}}`,
			want: []string{"first option", "bogus"},
		},
		{
			name: "bad second browse sort option",
			json: `{"browse": {"sort": ["size", "sideways"]}}`,
			want: []string{"second option", "sideways"},
		},
		{
			name: "order before key",
			json: `{"browse": {"sort": ["desc", "size"]}}`,
			want: []string{"first option", "desc"},
		},
		{
			name: "too many browse sort options",
			json: `{"browse": {"sort": ["size", "asc", "name"]}}`,
			want: []string{"only max 2 sort options"},
		},
	} {
		t.Run(tc.name, func(t *testing.T) {
			h := cfgDecodeHandler(t, tc.json)
			err := cfgProvision(t, h)
			if err == nil {
				t.Fatalf("Provision accepted %s", tc.json)
			}
			t.Logf("error: %v", err)
			for _, w := range tc.want {
				if !strings.Contains(err.Error(), w) {
					t.Errorf("error %q does not contain %q", err, w)
				}
			}
			for _, nw := range tc.notWant {
				if strings.Contains(err.Error(), nw) {
					t.Errorf("error %q is misleading: it mentions %q", err, nw)
				}
			}
		})
	}
}

// TestOddConfigWarnings checks the warnings for settings file_server takes
// and h2_file_server takes too, with the same effect, but that are
// unlikely to be meant.
func TestOddConfigWarnings(t *testing.T) {
	for _, tc := range []struct {
		json string
		want string // in the one warning; "" for none
	}{
		{`{}`, ""},
		{`{"status_code": 404}`, ""},
		{`{"status_code": "{http.vars.code}"}`, ""},
		{`{"status_code": "abc"}`, "500 Internal Server Error"},
		{`{"status_code": 99}`, "aborted"},
		{`{"status_code": 1000}`, "aborted"},
		{`{"status_code": -1}`, "ignored"},
		{`{"status_code": 0}`, ""},
		{`{"status_code": "150"}`, "informational"},
		{`{"browse": {"file_limit": -1}}`, "without a limit"},
		{`{"browse": {"file_limit": 5}}`, ""},
		{`{"precompressed_order": ["gzip", "br", "gzip"]}`, "more than once"},
		{`{"precompressed_order": ["gzip", "br"]}`, ""},
	} {
		core, logs := observer.New(zapcore.WarnLevel)
		cfgDecodeHandler(t, tc.json).warnOddConfig(zap.New(core))
		entries := logs.TakeAll()
		switch {
		case tc.want == "" && len(entries) != 0:
			t.Errorf("%s: unexpected warnings %+v", tc.json, entries)
		case tc.want != "" && (len(entries) != 1 || !strings.Contains(entries[0].Message, tc.want)):
			t.Errorf("%s: warnings %+v, want one containing %q", tc.json, entries, tc.want)
		}
	}
}

// TestMetricsRegisteredWithoutCache: `cache off` (and the one-liner's
// --no-cache) still registers h2file's metrics, as the docs promise
// whenever a config uses h2_file_server (none were registered before).
func TestMetricsRegisteredWithoutCache(t *testing.T) {
	for _, raw := range []string{`{"root": "."}`, `{"root": ".", "cache": {"disabled": true}}`} {
		h := cfgDecodeHandler(t, raw)
		ctx, cancel := caddy.NewContext(caddy.Context{Context: context.Background()})
		t.Cleanup(cancel)
		if err := h.Provision(ctx); err != nil {
			t.Fatal(err)
		}
		got := harness.Gather(t, ctx.GetMetricsRegistry(), "caddy_h2file_")
		for _, name := range []string{"caddy_h2file_cache_hits_total", "caddy_h2file_aborted_sends_total"} {
			if _, ok := got[name]; !ok {
				t.Errorf("%s: %s not registered", raw, name)
			}
		}
		if err := h.Cleanup(); err != nil {
			t.Error(err)
		}
	}
}
