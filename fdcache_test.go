package h2file

import (
	"context"
	"path/filepath"
	"reflect"
	"strings"
	"testing"
	"time"

	"github.com/caddyserver/caddy/v2"
	"github.com/caddyserver/caddy/v2/caddyconfig/caddyfile"
	"github.com/prometheus/client_golang/prometheus/testutil"
	"go.uber.org/zap"
	"go.uber.org/zap/zapcore"
	"go.uber.org/zap/zaptest/observer"

	"github.com/h2file/caddy-h2file/internal/fdcache"
	"github.com/h2file/caddy-h2file/internal/harness"
)

func TestCacheCaddyfile(t *testing.T) {
	for _, tc := range []struct {
		input   string
		want    *CacheConfig
		wantErr string
	}{
		{input: `h2_file_server {
			cache off
		}`, want: &CacheConfig{Disabled: true}},
		{input: `h2_file_server {
			cache {
				max_files 100
				max_memory 32MiB
				small_file_max 16KiB
				revalidate 250ms
				inactive 2m
			}
		}`, want: &CacheConfig{MaxFiles: 100, MaxMemory: 32 << 20, SmallFileMax: 16 << 10, Revalidate: caddy.Duration(250 * time.Millisecond), Inactive: caddy.Duration(2 * time.Minute)}},
		{input: `h2_file_server {
			cache {
				max_memory off
			}
		}`, want: &CacheConfig{MaxMemory: -1}},
		{input: `h2_file_server {
			cache on
		}`, wantErr: "unrecognized cache argument 'on'"},
		{input: `h2_file_server {
			cache off extra
		}`, wantErr: "unrecognized cache argument"},
		{input: `h2_file_server {
			cache off {
				max_files 1
			}
		}`, wantErr: "cache off takes no block"},
		{input: `h2_file_server {
			cache off
			cache off
		}`, wantErr: "cache already specified"},
		{input: `h2_file_server {
			cache {
				max_files 1
				max_files 2
			}
		}`, wantErr: "cache max_files already specified"},
		{input: `h2_file_server {
			cache {
				max_fils 1
			}
		}`, wantErr: "unrecognized cache option 'max_fils'"},
		{input: `h2_file_server {
			cache {
				max_files
			}
		}`, wantErr: "wrong argument count"},
		{input: `h2_file_server {
			cache {
				max_files 1 2
			}
		}`, wantErr: "wrong argument count"},
		{input: `h2_file_server {
			cache {
				max_files -3
			}
		}`, wantErr: "bad cache max_files '-3'"},
		{input: `h2_file_server {
			cache {
				max_memory lots
			}
		}`, wantErr: "bad cache max_memory 'lots'"},
		{input: `h2_file_server {
			cache {
				small_file_max 0
			}
		}`, wantErr: "bad cache small_file_max '0'"},
		{input: `h2_file_server {
			cache {
				revalidate soon
			}
		}`, wantErr: "bad cache revalidate 'soon'"},
		{input: `h2_file_server {
			cache {
				inactive -1s
			}
		}`, wantErr: "bad cache inactive '-1s'"},
	} {
		var h Handler
		err := h.UnmarshalCaddyfile(caddyfile.NewTestDispenser(tc.input))
		if tc.wantErr != "" {
			if err == nil || !strings.Contains(err.Error(), tc.wantErr) {
				t.Errorf("%s\nerror = %v, want one containing %q", tc.input, err, tc.wantErr)
			}
			continue
		}
		if err != nil {
			t.Errorf("%s\nunexpected error: %v", tc.input, err)
			continue
		}
		if !reflect.DeepEqual(h.Cache, tc.want) {
			t.Errorf("%s\ncache = %+v, want %+v", tc.input, h.Cache, tc.want)
		}
	}
}

func TestCacheLimits(t *testing.T) {
	defaults, err := (*CacheConfig)(nil).limits(0)
	if err != nil {
		t.Fatal(err)
	}
	want := fdcache.Limits{MaxFiles: 4096, MaxMemory: 64 << 20, SmallFileMax: 256 << 10, Revalidate: time.Second, Inactive: time.Minute}
	if defaults != want {
		t.Fatalf("defaults = %+v, want %+v", defaults, want)
	}

	// never more than a quarter of the descriptor limit
	capped, _ := (&CacheConfig{MaxFiles: 100000}).limits(1024)
	if capped.MaxFiles != 256 {
		t.Fatalf("max_files with RLIMIT_NOFILE 1024 = %d, want 256", capped.MaxFiles)
	}
	if off, _ := (&CacheConfig{MaxMemory: -1}).limits(0); off.MaxMemory != 0 {
		t.Fatalf("max_memory -1 gave %d bytes", off.MaxMemory)
	}

	for _, bad := range []CacheConfig{
		{MaxFiles: -1},
		{MaxMemory: -2},
		{SmallFileMax: -1},
		{Revalidate: caddy.Duration(-time.Second)},
		{Inactive: caddy.Duration(-time.Second)},
	} {
		if _, err := bad.limits(0); err == nil {
			t.Errorf("%+v: no error", bad)
		}
	}

	a, _ := (&CacheConfig{MaxFiles: 10}).limits(0)
	b, _ := (&CacheConfig{MaxFiles: 11}).limits(0)
	if cachePoolKey(a) == cachePoolKey(b) {
		t.Fatal("different limits share a pool key")
	}
	if again, _ := (&CacheConfig{MaxFiles: 10}).limits(0); cachePoolKey(again) != cachePoolKey(a) {
		t.Fatal("equal limits have different pool keys")
	}
}

// TestOwnOptionMessages checks that h2_file_server's own Caddyfile options
// are refused with the range they take, in words, not a parser's error.
func TestOwnOptionMessages(t *testing.T) {
	for _, tc := range []struct {
		option string
		want   []string
	}{
		{"write_chunk 0", []string{"bad write_chunk '0'", "from 1 byte to 16 MiB (16777216 bytes)", "default, 16375 bytes"}},
		{"write_chunk -1", []string{"bad write_chunk '-1'", "from 1 byte to 16 MiB"}},
		{"write_chunk 17MiB", []string{"bad write_chunk '17MiB'", "from 1 byte to 16 MiB"}},
		{"write_chunk lots", []string{"bad write_chunk 'lots'", "not a byte size", "from 1 byte to 16 MiB"}},
		{"cache {\n\t\tmax_memory lots\n\t}", []string{"bad cache max_memory 'lots'", "not a byte size", "or off", "default, 64 MiB"}},
		{"cache {\n\t\tmax_memory -1\n\t}", []string{"bad cache max_memory '-1'", "at least 1 byte, or off"}},
		{"cache {\n\t\tmax_memory 0\n\t}", []string{"bad cache max_memory '0'", "at least 1 byte, or off"}},
		{"cache {\n\t\tmax_memory 20EiB\n\t}", []string{"bad cache max_memory '20EiB'", "at least 1 byte"}},
		{"cache {\n\t\tsmall_file_max 0\n\t}", []string{"bad cache small_file_max '0'", "at least 1 byte", "default, 256 KiB"}},
		{"cache {\n\t\tmax_files 0\n\t}", []string{"bad cache max_files '0'", "at least 1", "default, 4096"}},
		{"cache {\n\t\tmax_files many\n\t}", []string{"bad cache max_files 'many'", "whole number"}},
		{"cache {\n\t\tmax_files 99999999999999999999\n\t}", []string{"whole number"}},
		{"cache {\n\t\trevalidate 0\n\t}", []string{"bad cache revalidate '0'", "longer than 0", "default, 1s"}},
		{"cache {\n\t\tinactive soon\n\t}", []string{"bad cache inactive 'soon'", "duration", "default, 1m0s"}},
		{"cache {\n\t\tmax_fils 1\n\t}", []string{"unrecognized cache option 'max_fils'", "max_files, max_memory"}},
	} {
		input := "h2_file_server {\n\t" + tc.option + "\n}"
		_, err := cfgParse(input)
		if err == nil {
			t.Errorf("%s: accepted", input)
			continue
		}
		for _, w := range tc.want {
			if !strings.Contains(err.Error(), w) {
				t.Errorf("%s:\nerror %q does not contain %q", input, err, w)
			}
		}
		for _, bad := range []string{"strconv", "ParseFloat", "invalid syntax", "9223372036854775807", "time: "} {
			if strings.Contains(err.Error(), bad) {
				t.Errorf("%s:\nerror %q shows a parser's message (%q)", input, err, bad)
			}
		}
	}
}

// TestOwnOptionJSONMessages checks the Provision errors for h2_file_server's
// own fields: they state the range, and that 0 is the default.
func TestOwnOptionJSONMessages(t *testing.T) {
	for _, tc := range []struct {
		json string
		want string
	}{
		{`{"write_chunk": -1}`, "write_chunk must be from 1 byte to 16 MiB (16777216 bytes), or 0 for the default (16375 bytes): -1"},
		{`{"write_chunk": 16777217}`, "write_chunk must be from 1 byte to 16 MiB"},
		{`{"cache": {"max_files": -1}}`, "cache max_files must be 0 (the default, 4096) or more: -1"},
		{`{"cache": {"max_memory": -2}}`, "cache max_memory must be -1 (no file content in memory), 0 (the default, 67108864 bytes) or a number of bytes: -2"},
		{`{"cache": {"small_file_max": -1}}`, "cache small_file_max must be 0 (the default, 262144 bytes) or a number of bytes: -1"},
		{`{"cache": {"revalidate": -1}}`, "cache revalidate must be 0 (the default, 1s) or longer"},
		{`{"cache": {"inactive": "-2s"}}`, "cache inactive must be 0 (the default, 1m0s) or longer: -2s"},
	} {
		err := cfgProvision(t, cfgDecodeHandler(t, tc.json))
		if err == nil || !strings.Contains(err.Error(), tc.want) {
			t.Errorf("%s: error %v, want one containing %q", tc.json, err, tc.want)
		}
	}
}

// TestCacheMaxFilesCapWarning checks that a max_files above a quarter of
// RLIMIT_NOFILE is lowered with one warning, and a default one silently.
func TestCacheMaxFilesCapWarning(t *testing.T) {
	core, logs := observer.New(zapcore.WarnLevel)
	h := &Handler{Cache: &CacheConfig{MaxFiles: 99999999}, logger: zap.New(core)}
	limits, err := h.cacheLimits(1024)
	if err != nil || limits.MaxFiles != 256 {
		t.Fatalf("max_files %d, error %v; want 256", limits.MaxFiles, err)
	}
	entries := logs.TakeAll()
	if len(entries) != 1 || !strings.Contains(entries[0].Message, "max_files") {
		t.Fatalf("want one max_files warning, got %+v", entries)
	}
	if f := entries[0].ContextMap(); f["max_files"] != int64(99999999) || f["rlimit_nofile"] != uint64(1024) || f["using"] != int64(256) {
		t.Errorf("warning fields %v", f)
	}

	for _, quiet := range []*Handler{{}, {Cache: &CacheConfig{MaxFiles: 100}}} {
		quiet.logger = zap.New(core)
		if _, err := quiet.cacheLimits(1024); err != nil {
			t.Fatal(err)
		}
		if n := logs.Len(); n != 0 {
			t.Errorf("cache %+v: %d warnings, want none", quiet.Cache, n)
		}
	}
}

// TestReloadRechecksCacheEntries: a second config with the same cache
// settings shares the first one's cache, and makes it check every entry
// against the file system again before its next use.
func TestReloadRechecksCacheEntries(t *testing.T) {
	dir := t.TempDir()
	name := harness.WriteFile(t, filepath.Join(dir, "a.txt"), []byte("a"))
	provision := func() *Handler {
		h := &Handler{Root: dir}
		ctx, cancel := caddy.NewContext(caddy.Context{Context: context.Background()})
		t.Cleanup(cancel)
		if err := h.Provision(ctx); err != nil {
			t.Fatal(err)
		}
		t.Cleanup(func() { h.Cleanup() })
		return h
	}
	fsys, _ := (&caddy.Context{}).FileSystems().Get("")
	first := provision()
	e, err := first.lookup(time.Time{}, fsys, "", name)
	if err != nil {
		t.Fatal(err)
	}
	revalidations := testutil.ToFloat64(fileCacheMetrics.Revalidations)
	if again, _ := first.lookup(time.Time{}, fsys, "", name); again != e || testutil.ToFloat64(fileCacheMetrics.Revalidations) != revalidations {
		t.Fatal("a fresh entry was not answered from the cache without a stat")
	}
	second := provision()
	if second.cache != first.cache {
		t.Fatal("a config with the same cache settings got a cache of its own")
	}
	if again, _ := second.lookup(time.Time{}, fsys, "", name); again != e {
		t.Fatal("an unchanged entry did not survive the recheck")
	}
	if got := testutil.ToFloat64(fileCacheMetrics.Revalidations) - revalidations; got != 1 {
		t.Fatalf("revalidations after a reload = %v, want 1", got)
	}
}
