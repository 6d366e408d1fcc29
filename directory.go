package h2file

import (
	"io/fs"
	"net/http"
	"path"
	"strings"
	"time"

	"github.com/caddyserver/caddy/v2"
	"github.com/caddyserver/caddy/v2/modules/caddyhttp"
	"go.uber.org/zap"
	"go.uber.org/zap/zapcore"

	"github.com/h2file/caddy-h2file/internal/fdcache"
)

// Requests for directories: index files, listings and canonical
// redirects, out of line so that ServeHTTP's stack frame stays small (see
// reserveStack).

// serveDirectory handles a request for the directory dirname: it returns
// the entry and name of its first index file that is there and not
// hidden, or answers the request itself (handled): with a listing if
// browse is on, else not found.
//
//go:noinline
func (h *Handler) serveDirectory(w http.ResponseWriter, r *http.Request, next caddyhttp.Handler, since time.Time, fileSystem fs.FS, fsName, dirname string, dir *cacheEntry, filesToHide []string) (entry *cacheEntry, filename string, handled bool, err error) {
	entry, filename = dir, dirname
	repl := r.Context().Value(caddy.ReplacerCtxKey).(*caddy.Replacer)
	for _, indexPage := range h.IndexNames {
		indexPath := caddyhttp.SanitizedPathJoin(dirname, repl.ReplaceAll(indexPage, ""))
		if fileHidden(indexPath, filesToHide) {
			h.logHidden("hiding index file", indexPath, filesToHide)
			continue
		}
		indexEntry, err := h.lookup(since, fileSystem, fsName, indexPath)
		if fdcache.IsTooManyFiles(err) {
			return nil, "", true, h.retryLater(w, indexPath, err)
		}
		if err != nil {
			continue
		}
		entry, filename = indexEntry, indexPath
		h.logFile("located index file", filename)
		break
	}
	if !entry.Info().IsDir() {
		return entry, filename, false, nil
	}

	// still a directory: a listing, or not found
	if c := h.logger.Check(zapcore.DebugLevel, "no index file in directory"); c != nil {
		c.Write(zap.String("path", filename), zap.Strings("index_filenames", h.IndexNames))
	}
	if h.Browse != nil && !fileHidden(filename, filesToHide) {
		// Caddy's file server renders the listing; with debug on, it logs
		// the path decisions above a second time
		return nil, "", true, h.fallback.ServeHTTP(w, r, next)
	}
	return nil, "", true, h.notFound(w, r, next)
}

// canonicalRedirect returns where to redirect a request whose path does
// not end as its target's does (directories with a slash, files without),
// unless the file name was rewritten, in which case a redirect could loop.
//
//go:noinline
func (h *Handler) canonicalRedirect(r *http.Request, implicitIndexFile bool) (string, bool) {
	origReq := r.Context().Value(caddyhttp.OriginalRequestCtxKey).(http.Request)
	if path.Base(origReq.URL.Path) != path.Base(r.URL.Path) {
		return "", false
	}
	// the log messages are file_server's, unbalanced parenthesis and all
	if implicitIndexFile && !strings.HasSuffix(origReq.URL.Path, "/") {
		to := origReq.URL.Path + "/"
		if c := h.logger.Check(zapcore.DebugLevel, "redirecting to canonical URI (adding trailing slash for directory"); c != nil {
			c.Write(zap.String("from_path", origReq.URL.Path), zap.String("to_path", to))
		}
		return to, true
	} else if !implicitIndexFile && strings.HasSuffix(origReq.URL.Path, "/") {
		to := origReq.URL.Path[:len(origReq.URL.Path)-1]
		if c := h.logger.Check(zapcore.DebugLevel, "redirecting to canonical URI (removing trailing slash for file"); c != nil {
			c.Write(zap.String("from_path", origReq.URL.Path), zap.String("to_path", to))
		}
		return to, true
	}
	return "", false
}
