package h2file

import (
	"reflect"
	"strings"
	"testing"
	"time"

	"github.com/caddyserver/caddy/v2"
	"github.com/caddyserver/caddy/v2/caddyconfig/caddyfile"
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
	want := cacheLimits{maxFiles: 4096, maxMemory: 64 << 20, smallFileMax: 64 << 10, revalidate: time.Second, inactive: time.Minute}
	if defaults != want {
		t.Fatalf("defaults = %+v, want %+v", defaults, want)
	}

	// never more than a quarter of the descriptor limit
	capped, _ := (&CacheConfig{MaxFiles: 100000}).limits(1024)
	if capped.maxFiles != 256 {
		t.Fatalf("max_files with RLIMIT_NOFILE 1024 = %d, want 256", capped.maxFiles)
	}
	if off, _ := (&CacheConfig{MaxMemory: -1}).limits(0); off.maxMemory != 0 {
		t.Fatalf("max_memory -1 gave %d bytes", off.maxMemory)
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
	if a.poolKey() == b.poolKey() {
		t.Fatal("different limits share a pool key")
	}
	if again, _ := (&CacheConfig{MaxFiles: 10}).limits(0); again.poolKey() != a.poolKey() {
		t.Fatal("equal limits have different pool keys")
	}
}
