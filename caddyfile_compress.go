package h2file

import (
	"errors"
	"math"
	"strconv"

	"github.com/caddyserver/caddy/v2/caddyconfig/caddyfile"
	"github.com/caddyserver/caddy/v2/modules/caddyhttp/encode"
)

// parseCompress parses the compress subdirective. It takes what the
// encode directive takes, parsed by encode itself, and two limits of its
// own:
//
//	compress [<formats...>] {
//	    gzip           [<level>]
//	    zstd           [<level>]
//	    minimum_length <length>
//	    match          { ... }
//	    max_memory     <size>
//	    max_file_size  <size>
//	    brotli         [<level>]
//	}
func (h *Handler) parseCompress(d *caddyfile.Dispenser) error {
	if h.Compress != nil {
		return d.Err("compress already specified")
	}
	cfg := new(CompressConfig)
	var rest []caddyfile.Token
	seg := d.NextSegment()
	depth := 0
	for i := 0; i < len(seg); i++ {
		tok := seg[i]
		switch {
		case tok.Text == "{":
			depth++
		case tok.Text == "}":
			depth--
		case depth == 1 && tok.Text == "brotli" && seg[i-1].Line != tok.Line:
			if cfg.Brotli != nil {
				return d.Err("compress brotli given twice")
			}
			cfg.Brotli = new(BrotliConfig)
			if i+1 < len(seg) && seg[i+1].Line == tok.Line && seg[i+1].Text != "}" {
				level, err := strconv.Atoi(seg[i+1].Text)
				if err != nil || level < 0 || level > 11 || (i+2 < len(seg) && seg[i+2].Line == tok.Line && seg[i+2].Text != "}") {
					return d.Errf("compress brotli takes one level, 0 to 11: '%s'", seg[i+1].Text)
				}
				cfg.Brotli.Level = level
				i++
			}
			continue
		case depth == 1 && (tok.Text == "max_memory" || tok.Text == "max_file_size") && seg[i-1].Line != tok.Line:
			if i+1 >= len(seg) || seg[i+1].Line != tok.Line || (i+2 < len(seg) && seg[i+2].Line == tok.Line) {
				return d.Errf("compress %s takes one size", tok.Text)
			}
			if err := cfg.setLimit(tok.Text, seg[i+1].Text); err != nil {
				return d.Errf("bad compress %s '%s': %v", tok.Text, seg[i+1].Text, err)
			}
			i++
			continue
		}
		rest = append(rest, tok)
	}
	enc := new(encode.Encode)
	if err := enc.UnmarshalCaddyfile(caddyfile.NewDispenser(rest)); err != nil {
		return err
	}
	cfg.EncodingsRaw, cfg.Prefer, cfg.MinLength, cfg.Matcher = enc.EncodingsRaw, enc.Prefer, enc.MinLength, enc.Matcher
	h.Compress = cfg
	return nil
}

// setLimit sets max_memory or max_file_size from a size such as 32MiB.
func (c *CompressConfig) setLimit(name, val string) error {
	field := &c.MaxMemory
	if name == "max_file_size" {
		field = &c.MaxFileSize
	}
	if *field != 0 {
		return errors.New("given twice")
	}
	n, err := parseSize(val, math.MaxInt64)
	*field = n
	return err
}
