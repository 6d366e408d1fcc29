package h2file

import (
	"errors"
	"fmt"
	"math"
	"strconv"
	"strings"

	"github.com/caddyserver/caddy/v2/caddyconfig/caddyfile"
	"github.com/caddyserver/caddy/v2/modules/caddyhttp/encode"
	"github.com/dustin/go-humanize"
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
				return errAt(tok, "compress brotli given twice")
			}
			cfg.Brotli = new(BrotliConfig)
			if i+1 < len(seg) && seg[i+1].Line == tok.Line && seg[i+1].Text != "}" {
				level, err := strconv.Atoi(seg[i+1].Text)
				// 0 is JSON's "the default": the Caddyfile takes no 0, as
				// for h2file's other options
				if err != nil || level < 1 || level > 11 || (i+2 < len(seg) && seg[i+2].Line == tok.Line && seg[i+2].Text != "}") {
					return errAt(tok, "compress brotli takes one level, 1 to 11: '%s' (leave it out for the default, %d)",
						seg[i+1].Text, defaultBrotliLevel)
				}
				cfg.Brotli.Level = level
				i++
			}
			continue
		case depth == 1 && (tok.Text == "max_memory" || tok.Text == "max_file_size") && seg[i-1].Line != tok.Line:
			if i+1 >= len(seg) || seg[i+1].Line != tok.Line || (i+2 < len(seg) && seg[i+2].Line == tok.Line) {
				return errAt(tok, "compress %s takes one size, such as 32MiB", tok.Text)
			}
			if err := cfg.setLimit(tok.Text, seg[i+1].Text); err != nil {
				return errAt(tok, "bad compress %s '%s': %v (leave it out for the default, %s)",
					tok.Text, seg[i+1].Text, err, compressLimitDefault(tok.Text))
			}
			i++
			continue
		}
		rest = append(rest, tok)
	}
	if err := checkCompressTokens(rest); err != nil {
		return err
	}
	enc := new(encode.Encode)
	if err := enc.UnmarshalCaddyfile(caddyfile.NewDispenser(rest)); err != nil {
		return compressErr(caddyfile.NewDispenser(rest), "", err)
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

// errAt is a Caddyfile error at tok's line (parseCompress has read the
// whole compress segment when it finds a mistake in it).
func errAt(tok caddyfile.Token, format string, args ...any) error {
	d := caddyfile.NewDispenser([]caddyfile.Token{tok})
	d.Next()
	return d.Errf(format, args...)
}

// compressLimitDefault is the default of max_memory or max_file_size.
func compressLimitDefault(name string) string {
	if name == "max_file_size" {
		return humanize.IBytes(defaultVariantFileMax)
	}
	return humanize.IBytes(defaultVariantMemory)
}

// checkCompressTokens checks what parseCompress hands to encode's parser
// (the compress line and its block, without h2file's own options), so
// that a mistake is reported as compress's, with what it accepts: encode's
// parser names neither, and leaves some errors without their line.
func checkCompressTokens(toks []caddyfile.Token) error {
	d := caddyfile.NewDispenser(toks)
	d.Next() // compress
	for d.NextArg() {
		if _, err := compressEncoding(d.Val()); err != nil {
			return d.Errf("compress: %v", err)
		}
	}
	for d.NextBlock(0) {
		switch name := d.Val(); name {
		case "minimum_length":
			args := d.RemainingArgs()
			if len(args) != 1 {
				return d.Errf("compress minimum_length takes one length in bytes, such as 512 (the default)")
			}
			if _, err := strconv.Atoi(args[0]); err != nil {
				return d.Errf("bad compress minimum_length '%s': must be a whole number of bytes, such as 512 (the default)", args[0])
			}
		case "match":
			d.NextSegment() // encode's own response matcher; its errors have their line
		default:
			mod, err := compressEncoding(name)
			if err != nil {
				return d.Errf("compress: %v", err)
			}
			unm, ok := mod.New().(caddyfile.Unmarshaler)
			if !ok {
				return d.Errf("compress: the %s encoding has no Caddyfile options; list it on the compress line", name)
			}
			seg := d.NextSegment()
			if err := unm.UnmarshalCaddyfile(caddyfile.NewDispenser(seg)); err != nil {
				return compressErr(caddyfile.NewDispenser(seg), name, err)
			}
		}
	}
	return nil
}

// encodingLevels says what the levels of Caddy's standard encodings are,
// for errors that would not say it.
var encodingLevels = map[string]string{
	"gzip": "gzip takes one level, a whole number from 1 (fastest) to 9 (smallest)",
	"zstd": "zstd takes one level: fastest, default, better or best",
}

// compressErr is err, from the parser of encode or of the encoding named
// (if any) reading d's tokens, prefixed with compress and the encoding
// and, where the parser gave none, the line of d's first token and what
// the encoding accepts.
func compressErr(d *caddyfile.Dispenser, encoding string, err error) error {
	prefix := "compress"
	if encoding != "" {
		prefix += " " + encoding
	}
	d.Next()
	if strings.Contains(err.Error(), fmt.Sprintf(", at %s:", d.File())) {
		return fmt.Errorf("%s: %w", prefix, err)
	}
	if levels, ok := encodingLevels[encoding]; ok {
		return d.Errf("%s: %v (%s)", prefix, err, levels)
	}
	return d.Errf("%s: %v", prefix, err)
}
