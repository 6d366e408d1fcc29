package h2file

import (
	"fmt"
	"math"
	"path/filepath"
	"strconv"
	"strings"

	"github.com/caddyserver/caddy/v2"
	"github.com/caddyserver/caddy/v2/caddyconfig"
	"github.com/caddyserver/caddy/v2/caddyconfig/caddyfile"
	"github.com/caddyserver/caddy/v2/caddyconfig/httpcaddyfile"
	"github.com/caddyserver/caddy/v2/modules/caddyhttp"
	"github.com/caddyserver/caddy/v2/modules/caddyhttp/encode"
	"github.com/caddyserver/caddy/v2/modules/caddyhttp/fileserver"
	"github.com/dustin/go-humanize"
)

func init() {
	httpcaddyfile.RegisterHandlerDirective("h2_file_server", parseCaddyfile)
	httpcaddyfile.RegisterDirectiveOrder("h2_file_server", httpcaddyfile.Before, "file_server")
}

// parseCaddyfile parses the h2_file_server directive and hides the
// Caddyfile (and every file it imports) from the file server.
func parseCaddyfile(h httpcaddyfile.Helper) (caddyhttp.MiddlewareHandler, error) {
	handler := new(Handler)
	if err := handler.UnmarshalCaddyfile(h.Dispenser); err != nil {
		return nil, err
	}
	for _, file := range h.Caddyfiles() {
		file = filepath.Clean(file)
		if fileHidden(file, handler.Hide) {
			continue
		}
		// a bare name would hide every file of that name; hide only this one
		if !strings.Contains(file, separator) {
			file = "." + separator + file
		}
		handler.Hide = append(handler.Hide, file)
	}
	return handler, nil
}

// UnmarshalCaddyfile sets up the handler from Caddyfile tokens. It accepts
// everything file_server accepts, with the same meaning:
//
//	h2_file_server [<matcher>] [browse] {
//		fs            <filesystem>
//		root          <path>
//		hide          <files...>
//		index         <files...>
//		browse        [<template_file>] {
//			reveal_symlinks
//			sort              <options...>
//			file_limit        <limit>
//			plain_time_format <layout>
//		}
//		precompressed [<formats...>]
//		status        <status>
//		disable_canonical_uris
//		pass_thru
//		etag_file_extensions <extensions...>
//
//		# h2_file_server's own tuning (file_server has no such options)
//		write_chunk <size>
//		cache off
//		cache {
//			max_files      <count>
//			max_memory     <size>|off
//			small_file_max <size>
//			revalidate     <duration>
//			inactive       <duration>
//		}
//	}
func (h *Handler) UnmarshalCaddyfile(d *caddyfile.Dispenser) error {
	d.Next() // consume directive name

	args := d.RemainingArgs()
	switch len(args) {
	case 0:
	case 1:
		if args[0] != "browse" {
			return d.ArgErr()
		}
		h.Browse = new(fileserver.Browse)
	default:
		return d.ArgErr()
	}

	for nesting := d.Nesting(); d.NextBlock(nesting); {
		var err error
		switch d.Val() {
		case "fs":
			err = h.parseFS(d)
		case "root":
			if h.Root != "" {
				return d.Err("root already specified")
			}
			if !d.Args(&h.Root) || d.NextArg() {
				return d.ArgErr()
			}
		case "hide":
			hide := d.RemainingArgs()
			if len(hide) == 0 {
				return d.ArgErr()
			}
			// repeated hide lines accumulate, so snippets compose
			h.Hide = append(h.Hide, hide...)
		case "index":
			if h.IndexNames != nil {
				return d.Err("index already specified")
			}
			h.IndexNames = d.RemainingArgs()
			if len(h.IndexNames) == 0 {
				return d.ArgErr()
			}
		case "browse":
			err = h.parseBrowse(d)
		case "cache":
			err = h.parseCache(d)
		case "write_chunk":
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
			h.WriteChunk, err = parsePositiveSize(val)
			if err == nil && h.WriteChunk > maxWriteChunk {
				err = fmt.Errorf("must be at most %d bytes", maxWriteChunk)
			}
			if err != nil {
				return d.Errf("bad write_chunk '%s': %v", val, err)
			}
		case "precompressed":
			err = h.parsePrecompressed(d)
		case "status":
			if h.StatusCode != "" {
				return d.Err("status already specified")
			}
			if !d.NextArg() {
				return d.ArgErr()
			}
			h.StatusCode = caddyhttp.WeakString(d.Val())
			if d.NextArg() {
				return d.ArgErr()
			}
			if err := validateStatus(h.StatusCode.String()); err != nil {
				return d.Errf("bad status '%s': %v", h.StatusCode, err)
			}
		case "disable_canonical_uris":
			if d.NextArg() {
				return d.ArgErr()
			}
			if h.CanonicalURIs != nil {
				return d.Err("disable_canonical_uris already specified")
			}
			falseBool := false
			h.CanonicalURIs = &falseBool
		case "pass_thru":
			if d.NextArg() {
				return d.ArgErr()
			}
			if h.PassThru {
				return d.Err("pass_thru already specified")
			}
			h.PassThru = true
		case "etag_file_extensions":
			if h.EtagFileExtensions != nil {
				return d.Err("etag_file_extensions already specified")
			}
			h.EtagFileExtensions = d.RemainingArgs()
			if len(h.EtagFileExtensions) == 0 {
				return d.ArgErr()
			}
		default:
			return d.Errf("unrecognized subdirective '%s'", d.Val())
		}
		if err != nil {
			return err
		}
	}
	return nil
}

func (h *Handler) parseFS(d *caddyfile.Dispenser) error {
	if !d.NextArg() {
		return d.ArgErr()
	}
	if h.FileSystem != "" {
		return d.Err("file system already specified")
	}
	h.FileSystem = d.Val()
	if d.NextArg() {
		return d.ArgErr()
	}
	return nil
}

// parseBrowse parses the browse subdirective and its block, as file_server
// does.
func (h *Handler) parseBrowse(d *caddyfile.Dispenser) error {
	if h.Browse != nil {
		return d.Err("browsing is already configured")
	}
	h.Browse = new(fileserver.Browse)
	d.Args(&h.Browse.TemplateFile)
	if d.NextArg() {
		return d.ArgErr()
	}
	seen := make(map[string]bool)
	for nesting := d.Nesting(); d.NextBlock(nesting); {
		if seen[d.Val()] {
			if msg, ok := browseDuplicateErrors[d.Val()]; ok {
				return d.Err(msg)
			}
		}
		seen[d.Val()] = true
		switch d.Val() {
		case "reveal_symlinks":
			if d.NextArg() {
				return d.ArgErr()
			}
			h.Browse.RevealSymlinks = true
		case "sort":
			if !d.NextArg() {
				return d.ArgErr()
			}
			for more := true; more; more = d.NextArg() {
				switch opt := d.Val(); opt {
				case "name", "namedirfirst", "size", "time", "asc", "desc":
					h.Browse.SortOptions = append(h.Browse.SortOptions, opt)
				default:
					return d.Errf("unknown sort option '%s'", opt)
				}
			}
		case "file_limit":
			limit := d.RemainingArgs()
			if len(limit) != 1 {
				return d.Err("file_limit should have an integer value")
			}
			val, err := strconv.Atoi(limit[0])
			if err != nil || val < 0 {
				return d.Err("file_limit should have an integer value (0 or more)")
			}
			h.Browse.FileLimit = val
		case "plain_time_format":
			layout := d.RemainingArgs()
			if len(layout) == 0 {
				return d.Err("plain_time_format is missing a time layout argument")
			}
			if len(layout) > 1 {
				return d.Err("plain_time_format accepts exactly one time layout argument; enclose layouts containing spaces in quotes")
			}
			if layout[0] == "" {
				return d.Err("plain_time_format requires a non-empty time layout argument")
			}
			h.Browse.PlainTimeFormat = layout[0]
		default:
			return d.Errf("unknown subdirective '%s'", d.Val())
		}
	}
	return nil
}

// browseDuplicateErrors are the errors for browse options given twice,
// worded as file_server words them.
var browseDuplicateErrors = map[string]string{
	"reveal_symlinks":   "Symlinks path reveal is already enabled",
	"sort":              "sort already specified",
	"file_limit":        "file_limit is already enabled",
	"plain_time_format": "plain_time_format is already set",
}

// parsePrecompressed parses the precompressed subdirective: the formats in
// order of preference, by default br, zstd and gzip.
func (h *Handler) parsePrecompressed(d *caddyfile.Dispenser) error {
	if h.PrecompressedOrder != nil {
		return d.Err("precompressed already specified")
	}
	h.PrecompressedOrder = d.RemainingArgs()
	if len(h.PrecompressedOrder) == 0 {
		h.PrecompressedOrder = []string{"br", "zstd", "gzip"}
	}
	for _, format := range h.PrecompressedOrder {
		modID := "http.precompressed." + format
		mod, err := caddy.GetModule(modID)
		if err != nil {
			return d.Errf("getting module named '%s': %v", modID, err)
		}
		inst := mod.New()
		precompress, ok := inst.(encode.Precompressed)
		if !ok {
			return d.Errf("module %s is not a precompressor; is %T", modID, inst)
		}
		if h.PrecompressedRaw == nil {
			h.PrecompressedRaw = make(caddy.ModuleMap)
		}
		if _, dup := h.PrecompressedRaw[format]; dup {
			return d.Errf("precompressed format '%s' listed twice", format)
		}
		h.PrecompressedRaw[format] = caddyconfig.JSON(precompress, nil)
	}
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
			h.Cache.MaxFiles, err = strconv.Atoi(val)
			if err == nil && h.Cache.MaxFiles <= 0 {
				err = fmt.Errorf("must be positive")
			}
		case "max_memory":
			if val == "off" {
				h.Cache.MaxMemory = -1
			} else {
				h.Cache.MaxMemory, err = parsePositiveSize(val)
			}
		case "small_file_max":
			h.Cache.SmallFileMax, err = parsePositiveSize(val)
		case "revalidate":
			h.Cache.Revalidate, err = parsePositiveDuration(val)
		case "inactive":
			h.Cache.Inactive, err = parsePositiveDuration(val)
		default:
			return d.Errf("unrecognized cache option '%s'", name)
		}
		if err != nil {
			return d.Errf("bad cache %s '%s': %v", name, val, err)
		}
	}
	return nil
}

// parsePositiveSize parses a byte size such as 64KiB or 1MB.
func parsePositiveSize(s string) (int64, error) {
	n, err := humanize.ParseBytes(s)
	if err != nil {
		return 0, err
	}
	if n == 0 || n > math.MaxInt64 {
		return 0, fmt.Errorf("must be between 1 byte and %d bytes", int64(math.MaxInt64))
	}
	return int64(n), nil
}

// parsePositiveDuration parses a duration such as 1s or 2m.
func parsePositiveDuration(s string) (caddy.Duration, error) {
	dur, err := caddy.ParseDuration(s)
	if err != nil {
		return 0, err
	}
	if dur <= 0 {
		return 0, fmt.Errorf("must be positive")
	}
	return caddy.Duration(dur), nil
}

// Interface guards
var _ caddyfile.Unmarshaler = (*Handler)(nil)
