package h2file

import (
	"path/filepath"
	"strings"

	"github.com/caddyserver/caddy/v2"
)

// transformHidePaths resolves placeholders in the hide list and makes
// entries with a path separator absolute, as file_server does. Without
// placeholders that is the list Provision made, returned as is (callers
// only read it).
func (h *Handler) transformHidePaths(repl *caddy.Replacer) []string {
	if !h.hideHasPlaceholders {
		return h.Hide
	}
	hide := make([]string, len(h.Hide))
	for i := range h.Hide {
		hide[i] = repl.ReplaceAll(h.Hide[i], "")
		if strings.Contains(hide[i], separator) {
			if abs, err := caddy.FastAbs(hide[i]); err == nil {
				hide[i] = abs
			}
		}
	}
	return hide
}

// fileHidden reports whether filename (a file system path, not a request
// path) is hidden by the hide list, whose entries are absolute paths or
// bare names. It is file_server's rule, kept identical:
//   - a bare name (no separator) hides every file or folder of that name;
//   - a path hides itself and everything below it;
//   - any entry also matches as a glob against the whole path.
func fileHidden(filename string, hide []string) bool {
	if len(hide) == 0 {
		return false
	}
	if abs, err := caddy.FastAbs(filename); err == nil {
		filename = abs
	}
	var components []string
	for _, h := range hide {
		if !strings.Contains(h, separator) {
			if components == nil {
				components = strings.Split(filename, separator)
			}
			for _, c := range components {
				if hidden, _ := filepath.Match(h, c); hidden {
					return true
				}
			}
		} else if rest, ok := strings.CutPrefix(filename, h); ok && strings.HasPrefix(rest, separator) {
			return true
		}
		if hidden, _ := filepath.Match(h, filename); hidden {
			return true
		}
	}
	return false
}
