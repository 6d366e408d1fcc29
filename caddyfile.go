package h2file

import (
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
// exactly what file_server accepts, with the same meaning and the same
// errors, and adds h2_file_server's own tuning options:
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
//		# h2_file_server's own options (file_server has no such options)
//		compress [<formats...>] {
//			max_memory    <size>
//			max_file_size <size>
//			brotli        [<level>]
//			# and what encode takes: levels, minimum_length, match
//		}
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
//
// As in file_server, a repeated hide adds up, and so do the formats of a
// repeated precompressed and the options of a repeated browse sort; a
// repeated root, index, status, etag_file_extensions or precompressed
// order replaces the earlier one. Like every Caddyfile block, a token left
// over on a subdirective's line is read as the next subdirective.
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
			if !d.NextArg() {
				return d.ArgErr()
			}
			if h.FileSystem != "" {
				return d.Err("file system already specified")
			}
			h.FileSystem = d.Val()
		case "hide":
			hide := d.RemainingArgs()
			if len(hide) == 0 {
				return d.ArgErr()
			}
			// repeated hide lines accumulate, so snippets compose
			h.Hide = append(h.Hide, hide...)
		case "index":
			h.IndexNames = d.RemainingArgs()
			if len(h.IndexNames) == 0 {
				return d.ArgErr()
			}
		case "root":
			if !d.Args(&h.Root) {
				return d.ArgErr()
			}
		case "browse":
			err = h.parseBrowse(d)
		case "precompressed":
			err = h.parsePrecompressed(d)
		case "status":
			if !d.NextArg() {
				return d.ArgErr()
			}
			h.StatusCode = caddyhttp.WeakString(d.Val())
		case "disable_canonical_uris":
			if d.NextArg() {
				return d.ArgErr()
			}
			falseBool := false
			h.CanonicalURIs = &falseBool
		case "pass_thru":
			if d.NextArg() {
				return d.ArgErr()
			}
			h.PassThru = true
		case "etag_file_extensions":
			extensions := d.RemainingArgs()
			if len(extensions) == 0 {
				return d.ArgErr()
			}
			h.EtagFileExtensions = extensions
		case "cache":
			err = h.parseCache(d)
		case "compress":
			err = h.parseCompress(d)
		case "write_chunk":
			err = h.parseWriteChunk(d)
		default:
			// file_server's wording
			return d.Errf("unknown subdirective '%s'", d.Val())
		}
		if err != nil {
			return err
		}
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
	for nesting := d.Nesting(); d.NextBlock(nesting); {
		switch d.Val() {
		case "reveal_symlinks":
			if h.Browse.RevealSymlinks {
				return d.Err("Symlinks path reveal is already enabled")
			}
			h.Browse.RevealSymlinks = true
		case "sort":
			// a bare sort keeps the default; options of repeated sort
			// lines add up, and Provision checks the result
			for d.NextArg() {
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
			if err != nil {
				return d.Err("file_limit should have an integer value")
			}
			// file_server's check: a limit of 0 (the default) may be
			// given again, any other may not
			if h.Browse.FileLimit != 0 {
				return d.Err("file_limit is already enabled")
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
			if h.Browse.PlainTimeFormat != "" {
				return d.Err("plain_time_format is already set")
			}
			h.Browse.PlainTimeFormat = layout[0]
		default:
			return d.Errf("unknown subdirective '%s'", d.Val())
		}
	}
	return nil
}

// parsePrecompressed parses the precompressed subdirective: the formats in
// order of preference, by default br, zstd and gzip. As in file_server, a
// repeated precompressed replaces the order and adds its formats to the
// encoders already configured.
func (h *Handler) parsePrecompressed(d *caddyfile.Dispenser) error {
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
		h.PrecompressedRaw[format] = caddyconfig.JSON(precompress, nil)
	}
	return nil
}

// Interface guards
var _ caddyfile.Unmarshaler = (*Handler)(nil)
