package h2file

// The names compress takes, checked against the encodings of this build,
// so that a wrong one is an error that names compress and lists them.

import (
	"fmt"
	"maps"
	"slices"
	"strings"

	"github.com/caddyserver/caddy/v2"
	"github.com/caddyserver/caddy/v2/modules/caddyhttp/encode"
)

// checkEncodings checks the names of the encodings and of prefer, so
// that their errors name compress's fields and what they accept (encode's
// name neither).
func (c *CompressConfig) checkEncodings() error {
	names := slices.Sorted(maps.Keys(c.EncodingsRaw))
	for _, name := range names {
		if _, err := compressEncoding(name); err != nil {
			return fmt.Errorf("compress: encodings: %w", err)
		}
	}
	for _, name := range c.Prefer {
		if !slices.Contains(names, name) {
			return fmt.Errorf("compress: prefer names %q, which is not among the encodings (%s); brotli, if on, takes its place by itself",
				name, strings.Join(names, ", "))
		}
	}
	return nil
}

// compressEncoding is the http.encoders module of an encoding name, or
// an error that lists those this build has.
func compressEncoding(name string) (caddy.ModuleInfo, error) {
	mod, err := caddy.GetModule("http.encoders." + name)
	if err == nil {
		if _, ok := mod.New().(encode.Encoding); ok {
			return mod, nil
		}
	}
	var names []string
	for _, m := range caddy.GetModules("http.encoders") {
		if _, ok := m.New().(encode.Encoding); ok {
			names = append(names, m.ID.Name())
		}
	}
	slices.Sort(names)
	hint := ""
	if name == "br" || name == "brotli" {
		hint = `; brotli variants are compress's own brotli option: brotli [<level>] on a line of its block, "brotli" in JSON`
	}
	return caddy.ModuleInfo{}, fmt.Errorf("unknown encoding %q (accepted: the http.encoders modules of this build: %s%s)",
		name, strings.Join(names, ", "), hint)
}
