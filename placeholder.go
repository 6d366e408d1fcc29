package h2file

import (
	"strings"

	"github.com/caddyserver/caddy/v2"
)

// replaceAll is repl.ReplaceAll(input, empty), without the string builder
// ReplaceAll fills when input is one placeholder and nothing else, as
// file_server's default root, {http.vars.root}, is. The result is then
// the placeholder's value as a string, or empty if that is "" or the
// placeholder is unknown: what ReplaceAll makes of such an input (see
// caddy.Replacer's replace), with the same lookup.
func replaceAll(repl *caddy.Replacer, input, empty string) string {
	key, ok := lonePlaceholder(input)
	if !ok {
		return repl.ReplaceAll(input, empty)
	}
	val, _ := repl.Get(key)
	if s := caddy.ToString(val); s != "" {
		return s
	}
	return empty
}

// lonePlaceholder returns the key of s if s is exactly one placeholder:
// "{key}", with no brace or escape inside; {file.*} placeholders, which
// ReplaceAll reads through a cache of its own, are left to ReplaceAll.
func lonePlaceholder(s string) (string, bool) {
	if len(s) < 2 || s[0] != '{' || s[len(s)-1] != '}' {
		return "", false
	}
	key := s[1 : len(s)-1]
	if strings.ContainsAny(key, `{}\`) || strings.HasPrefix(key, "file.") {
		return "", false
	}
	return key, true
}
