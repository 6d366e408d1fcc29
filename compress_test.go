package h2file

import (
	"bytes"
	"encoding/json"
	"path/filepath"
	"slices"
	"strings"
	"testing"

	"github.com/caddyserver/caddy/v2/caddyconfig/caddyfile"

	"github.com/h2file/caddy-h2file/internal/harness"
)

// TestCompressCaddyfile: compress takes what encode takes, parsed by
// encode, plus its two limits.
func TestCompressCaddyfile(t *testing.T) {
	for _, tc := range []struct {
		input            string
		encodings        []string
		prefer           []string
		minLength        int
		matcher          bool
		maxMemory, maxFS int64
	}{
		{"h2_file_server {\n\tcompress\n}", []string{"gzip", "zstd"}, []string{"zstd", "gzip"}, 0, false, 0, 0},
		{"h2_file_server {\n\tcompress gzip\n}", []string{"gzip"}, []string{"gzip"}, 0, false, 0, 0},
		{"h2_file_server {\n\tcompress {\n\t\tgzip 9\n\t\tzstd\n\t\tminimum_length 1024\n\t\tmax_memory 16MiB\n\t\tmax_file_size 1MB\n\t\tmatch header Content-Type text/*\n\t}\n\troot /srv\n}",
			[]string{"gzip", "zstd"}, []string{"gzip", "zstd"}, 1024, true, 16 << 20, 1_000_000},
	} {
		h := new(Handler)
		if err := h.UnmarshalCaddyfile(caddyfile.NewTestDispenser(tc.input)); err != nil {
			t.Errorf("%q: %v", tc.input, err)
			continue
		}
		c := h.Compress
		if c == nil {
			t.Errorf("%q: no compress config", tc.input)
			continue
		}
		var names []string
		for name := range c.EncodingsRaw {
			names = append(names, name)
		}
		slices.Sort(names)
		if !slices.Equal(names, tc.encodings) || !slices.Equal(c.Prefer, tc.prefer) || c.MinLength != tc.minLength ||
			(c.Matcher != nil) != tc.matcher || c.MaxMemory != tc.maxMemory || c.MaxFileSize != tc.maxFS {
			t.Errorf("%q: got encodings %v, prefer %v, minimum_length %d, matcher %v, max_memory %d, max_file_size %d",
				tc.input, names, c.Prefer, c.MinLength, c.Matcher != nil, c.MaxMemory, c.MaxFileSize)
		}
	}
	if h := new(Handler); h.UnmarshalCaddyfile(caddyfile.NewTestDispenser("h2_file_server {\n\tcompress {\n\t\tgzip 9\n\t}\n\troot /srv\n}")) != nil || h.Root != "/srv" {
		t.Error("the subdirective after a compress block was lost")
	}

	for _, tc := range []struct{ input, want string }{
		{"h2_file_server {\n\tcompress\n\tcompress\n}", "compress already specified"},
		{"h2_file_server {\n\tcompress bogus\n}", "bogus"},
		{"h2_file_server {\n\tcompress {\n\t\tmax_memory\n\t}\n}", "compress max_memory takes one size"},
		{"h2_file_server {\n\tcompress {\n\t\tmax_memory 1 2\n\t}\n}", "compress max_memory takes one size"},
		{"h2_file_server {\n\tcompress {\n\t\tmax_file_size -1\n\t}\n}", "bad compress max_file_size '-1'"},
		{"h2_file_server {\n\tcompress {\n\t\tmax_memory 1MiB\n\t\tmax_memory 2MiB\n\t}\n}", "given twice"},
	} {
		err := new(Handler).UnmarshalCaddyfile(caddyfile.NewTestDispenser(tc.input))
		if err == nil || !strings.Contains(err.Error(), tc.want) {
			t.Errorf("%q: error %v, want one with %q", tc.input, err, tc.want)
		}
	}
}

// TestCompressProvisionErrors: what compress refuses, with encode's own
// checks for encode's settings.
func TestCompressProvisionErrors(t *testing.T) {
	for _, tc := range []struct{ json, want string }{
		{`{"compress": {}}`, "compress: no encodings"},
		{`{"compress": {"encodings": {"gzip": {}}}, "cache": {"disabled": true}}`, "compress: needs the open-file cache, which is disabled"},
		{`{"compress": {"encodings": {"gzip": {}}, "prefer": ["zstd"]}}`, `compress: prefer names "zstd", which is not among the encodings (gzip)`},
		{`{"compress": {"encodings": {"gzip": {}, "zstd": {}}, "prefer": ["zstd", "zstd"]}}`, "compress: encoding zstd is duplicated in prefer"},
		{`{"compress": {"encodings": {"gzip": {"level": 99}}}}`, "compress: loading encoder modules: module name 'gzip': http.encoders.gzip: invalid configuration: quality too high; must be <= 9"},
		{`{"compress": {"encodings": {"foo": {}}}}`, `compress: encodings: unknown encoding "foo" (accepted: the http.encoders modules of this build: gzip, zstd)`},
		{`{"compress": {"encodings": {"br": {}}}}`, `compress: encodings: unknown encoding "br" (accepted: the http.encoders modules of this build: gzip, zstd; brotli variants are compress's own brotli option`},
		{`{"compress": {"encodings": {"gzip": {}}, "max_memory": -1}}`, "compress: max_memory must be a number of bytes, or 0 for the default (32 MiB): -1"},
		{`{"compress": {"encodings": {"gzip": {}}, "max_file_size": -1}}`, "compress: max_file_size must be a number of bytes, or 0 for the default (8.0 MiB): -1"},
		{`{"compress": {"encodings": {"gzip": {}}, "brotli": {"level": 12}}}`, "compress: brotli level must be from 0 to 11, 0 for the default (6): 12"},
	} {
		err := cfgProvision(t, cfgDecodeHandler(t, tc.json))
		if err == nil || !strings.Contains(err.Error(), tc.want) {
			t.Errorf("%s: error %v, want one with %q", tc.json, err, tc.want)
		}
	}
	h := cfgDecodeHandler(t, `{"compress": {"encodings": {"gzip": {}, "zstd": {}}}}`)
	if err := cfgProvision(t, h); err != nil {
		t.Fatal(err)
	}
	cp := h.compressor
	if cp == nil || !slices.Equal(cp.prefer, []string{"zstd", "gzip"}) || cp.minLength != 512 || cp.matcher == nil || cp.maxFile != defaultVariantFileMax {
		t.Errorf("defaults: %+v; want encode's (prefer zstd, gzip; minimum_length 512; its type list) and 8 MiB files", cp)
	}
}

// TestCompressRefusesChangedFile: a file rewritten in place after its
// entry was made is not compressed under that entry's identity.
func TestCompressRefusesChangedFile(t *testing.T) {
	dir := t.TempDir()
	name := harness.WriteFile(t, filepath.Join(dir, "big.js"), bytes.Repeat([]byte("var a = 1;\n"), 100_000))
	h := cfgDecodeHandler(t, `{"compress": {"encodings": {"gzip": {}}}, "cache": {"small_file_max": 1024}}`)
	if err := cfgProvision(t, h); err != nil {
		t.Fatal(err)
	}
	e, err := h.cache.Lookup(harness.OSFS{}, "", name)
	if err != nil {
		t.Fatal(err)
	}
	held, ok := e.Open()
	if !ok {
		t.Fatal("no handle on the cached file")
	}
	defer held.Close()
	if _, err := h.compressor.compress("gzip", &held, e.Info()); err != nil {
		t.Fatalf("compressing the unchanged file: %v", err)
	}
	if err := harness.RewriteInPlace(name, strings.Repeat("x", int(e.Info().Size()))); err != nil {
		t.Fatal(err)
	}
	if data, err := h.compressor.compress("gzip", &held, e.Info()); err == nil {
		t.Fatalf("compressed %d bytes of a file rewritten since its entry was made", len(data))
	}
}

// TestCompressBrotliConfig: brotli in the Caddyfile and JSON, its place in
// the preference order, and the levels raised where none is given.
func TestCompressBrotliConfig(t *testing.T) {
	for _, tc := range []struct {
		input string
		level int
		err   string
	}{
		{"h2_file_server {\n\tcompress {\n\t\tbrotli\n\t}\n}", 0, ""},
		{"h2_file_server {\n\tcompress zstd gzip {\n\t\tbrotli 11\n\t}\n}", 11, ""},
		{"h2_file_server {\n\tcompress {\n\t\tbrotli 12\n\t}\n}", 0, "compress brotli takes one level, 1 to 11"},
		{"h2_file_server {\n\tcompress {\n\t\tbrotli 1 2\n\t}\n}", 0, "compress brotli takes one level"},
		{"h2_file_server {\n\tcompress {\n\t\tbrotli\n\t\tbrotli\n\t}\n}", 0, "given twice"},
	} {
		h := new(Handler)
		err := h.UnmarshalCaddyfile(caddyfile.NewTestDispenser(tc.input))
		switch {
		case tc.err != "" && (err == nil || !strings.Contains(err.Error(), tc.err)):
			t.Errorf("%q: error %v, want one with %q", tc.input, err, tc.err)
		case tc.err == "" && (err != nil || h.Compress.Brotli == nil || h.Compress.Brotli.Level != tc.level):
			t.Errorf("%q: %v, brotli %+v; want level %d", tc.input, err, h.Compress, tc.level)
		}
	}
	for _, tc := range []struct {
		json   string
		prefer []string
	}{
		{`{"compress": {"encodings": {"gzip": {}, "zstd": {}}, "brotli": {}}}`, []string{"zstd", "br", "gzip"}},
		{`{"compress": {"encodings": {"gzip": {}}, "brotli": {"level": 4}}}`, []string{"br", "gzip"}},
		{`{"compress": {"encodings": {"gzip": {}, "zstd": {}}, "prefer": ["gzip", "zstd"], "brotli": {}}}`, []string{"gzip", "zstd", "br"}},
	} {
		h := cfgDecodeHandler(t, tc.json)
		if err := cfgProvision(t, h); err != nil {
			t.Fatalf("%s: %v", tc.json, err)
		}
		if !slices.Equal(h.compressor.prefer, tc.prefer) || h.compressor.encodings["br"] == nil {
			t.Errorf("%s: prefer %v, want %v with a br encoder", tc.json, h.compressor.prefer, tc.prefer)
		}
	}
	if err := cfgProvision(t, cfgDecodeHandler(t, `{"compress": {"encodings": {"gzip": {}}, "brotli": {"level": 12}}}`)); err == nil ||
		!strings.Contains(err.Error(), "brotli level must be from 0 to 11") {
		t.Errorf("brotli level 12: %v", err)
	}

	c := &CompressConfig{EncodingsRaw: map[string]json.RawMessage{
		"gzip": json.RawMessage(`{}`), "zstd": json.RawMessage(`{"level": "fastest"}`),
	}}
	if err := c.raiseDefaultLevels(); err != nil {
		t.Fatal(err)
	}
	if string(c.EncodingsRaw["gzip"]) != `{"level":9}` || string(c.EncodingsRaw["zstd"]) != `{"level": "fastest"}` {
		t.Errorf("levels: gzip %s, zstd %s; want gzip raised to 9 and zstd's own kept", c.EncodingsRaw["gzip"], c.EncodingsRaw["zstd"])
	}
}
