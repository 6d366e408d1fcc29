package h2file

import (
	"errors"
	"fmt"
	"math"
	"strconv"
	"strings"
	"time"

	"github.com/caddyserver/caddy/v2"
	"github.com/caddyserver/caddy/v2/caddyconfig/caddyfile"
	"github.com/dustin/go-humanize"

	"github.com/h2file/caddy-h2file/internal/send"
)

// The Caddyfile options h2_file_server adds to file_server's. Unlike
// file_server's, they are checked strictly: each may be given once, and a
// value out of range is an error that states the range. Zero is an error
// too, although JSON reads 0 as "the default" (JSON cannot tell 0 from a
// missing field): in a Caddyfile, leave an option out for its default;
// `max_memory 0` or `max_files 0` would read as "none", which is written
// `max_memory off` and `cache off`.

// parseWriteChunk parses `write_chunk <size>`.
func (h *Handler) parseWriteChunk(d *caddyfile.Dispenser) error {
	if h.WriteChunk != 0 {
		return d.Err("write_chunk already specified")
	}
	if !d.NextArg() {
		return d.ArgErr()
	}
	val := d.Val()
	if d.NextArg() {
		return d.ArgErr()
	}
	n, err := parseSize(val, send.MaxWriteChunk)
	if err != nil {
		return d.Errf("bad write_chunk '%s': %v (leave it out for the default, %d bytes)", val, err, send.DefaultChunkSize)
	}
	h.WriteChunk = n
	return nil
}

// parseCache parses the cache subdirective: `cache off`, or a block of
// limits.
func (h *Handler) parseCache(d *caddyfile.Dispenser) error {
	if h.Cache != nil {
		return d.Err("cache already specified")
	}
	h.Cache = new(CacheConfig)
	if d.NextArg() {
		if d.Val() != "off" || d.NextArg() {
			return d.Errf("unrecognized cache argument '%s' (want 'off' or a block)", d.Val())
		}
		h.Cache.Disabled = true
		if d.NextBlock(d.Nesting()) {
			return d.Err("cache off takes no block")
		}
		return nil
	}
	seen := make(map[string]bool)
	for nesting := d.Nesting(); d.NextBlock(nesting); {
		name := d.Val()
		if seen[name] {
			return d.Errf("cache %s already specified", name)
		}
		seen[name] = true
		if !d.NextArg() {
			return d.ArgErr()
		}
		val := d.Val()
		if d.NextArg() {
			return d.ArgErr()
		}
		var err error
		switch name {
		case "max_files":
			h.Cache.MaxFiles, err = parseCount(val, defaultMaxFiles)
		case "max_memory":
			if val == "off" {
				h.Cache.MaxMemory = -1
				break
			}
			h.Cache.MaxMemory, err = parseSize(val, math.MaxInt64)
			if err != nil {
				err = fmt.Errorf("%v, or off to keep no file content in memory (leave it out for the default, %s)", err, humanize.IBytes(defaultMaxMemory))
			}
		case "small_file_max":
			h.Cache.SmallFileMax, err = parseSize(val, math.MaxInt64)
			if err != nil {
				err = fmt.Errorf("%v (leave it out for the default, %s)", err, humanize.IBytes(defaultSmallFileMax))
			}
		case "revalidate":
			h.Cache.Revalidate, err = parseDuration(val, defaultRevalidate)
		case "inactive":
			h.Cache.Inactive, err = parseDuration(val, defaultInactive)
		default:
			return d.Errf("unrecognized cache option '%s' (want max_files, max_memory, small_file_max, revalidate or inactive)", name)
		}
		if err != nil {
			return d.Errf("bad cache %s '%s': %v", name, val, err)
		}
	}
	return nil
}

// parseSize parses a byte size such as 4096, 64KiB or 1MB, from 1 byte to
// hi bytes. Its errors state that range.
func parseSize(s string, hi int64) (int64, error) {
	want := "must be at least 1 byte"
	if hi < math.MaxInt64 {
		want = fmt.Sprintf("must be from 1 byte to %s (%d bytes)", humanize.IBytes(uint64(hi)), hi)
	}
	if strings.HasPrefix(strings.TrimSpace(s), "-") {
		return 0, errors.New(want)
	}
	n, err := humanize.ParseBytes(s)
	if err != nil {
		return 0, fmt.Errorf("not a byte size such as 4096, 64KiB or 1MB; %s", want)
	}
	if n == 0 || n > uint64(hi) {
		return 0, errors.New(want)
	}
	return int64(n), nil
}

// parseCount parses a positive whole number.
func parseCount(s string, def int) (int, error) {
	want := fmt.Sprintf("must be a whole number of at least 1 (leave it out for the default, %d)", def)
	n, err := strconv.Atoi(s)
	if err != nil || n <= 0 {
		return 0, errors.New(want)
	}
	return n, nil
}

// parseDuration parses a positive duration such as 500ms, 2s or 1m.
func parseDuration(s string, def time.Duration) (caddy.Duration, error) {
	want := fmt.Sprintf("must be a duration longer than 0, such as 500ms, 2s or 1m (leave it out for the default, %s)", def)
	dur, err := caddy.ParseDuration(s)
	if err != nil || dur <= 0 {
		return 0, errors.New(want)
	}
	return caddy.Duration(dur), nil
}
