// Package h2file is a Caddy v2 plugin that serves static files over HTTP/2
// as fast as nginx and h2o do. Its handler, h2_file_server, is a drop-in
// replacement for Caddy's file_server: it takes the same configuration and
// gives the same responses, header for header and byte for byte.
package h2file

import (
	"encoding/json"
	"fmt"
	"path/filepath"
	"strings"

	"github.com/caddyserver/caddy/v2"
	"github.com/caddyserver/caddy/v2/modules/caddyhttp"
	"github.com/caddyserver/caddy/v2/modules/caddyhttp/encode"
	"github.com/caddyserver/caddy/v2/modules/caddyhttp/fileserver"
	"go.uber.org/zap"

	"github.com/h2file/caddy-h2file/internal/send"
)

func init() {
	caddy.RegisterModule(Handler{})
}

// Handler serves static files like Caddy's file_server, and takes the same
// configuration: a JSON config written for file_server works by changing
// only the handler name to h2_file_server.
//
// Regular files are served on a fast path built for HTTP/2. Directory
// listings (browse) are handed to Caddy's own file server, configured
// with the same fields, so they look exactly as they do there.
//
// The path of the file to serve is the site root joined with the sanitized
// request path. A site root is not a sandbox: files and links inside the
// root may be accessed by request path, so keep only trustworthy files
// there. Files matched by `hide` (and the Caddyfile itself) are never
// served.
type Handler struct {
	// The file system implementation to use. By default, Caddy uses the
	// local disk file system. A non-default file system must first be
	// registered in the global options. Default: `{http.vars.fs}`.
	FileSystem string `json:"fs,omitempty"`

	// The path to the root of the site. Default is `{http.vars.root}` if
	// set, or the current working directory otherwise. This should be a
	// trusted value.
	Root string `json:"root,omitempty"`

	// A list of files or folders to hide; the file server pretends they do
	// not exist. Accepts glob patterns like `*.ext` or `/foo/*/bar` as well
	// as placeholders. These are file system paths, not request paths;
	// relative paths are relative to the current working directory, not
	// the site root. Entries without a path separator match any file or
	// folder of that name anywhere. Comparisons are case-sensitive.
	Hide []string `json:"hide,omitempty"`

	// The names of files to try as index files if a folder is requested.
	// Default: index.html, index.txt.
	IndexNames []string `json:"index_names,omitempty"`

	// Enables file listings if a directory was requested and no index file
	// is present. Listings are rendered by Caddy's own file server.
	Browse *fileserver.Browse `json:"browse,omitempty"`

	// Use redirects to enforce trailing slashes for directories, or to
	// remove the trailing slash from URIs of files. Default: true.
	// Canonicalization does not happen if the last element of the request
	// path was changed by an internal rewrite.
	CanonicalURIs *bool `json:"canonical_uris,omitempty"`

	// Override the status code written when successfully serving a file,
	// e.g. when serving a file as an error page. A placeholder may be used.
	// By default the status is 200, or 206 for partial content.
	StatusCode caddyhttp.WeakString `json:"status_code,omitempty"`

	// If enabled and the requested file is not found, the next handler in
	// the chain is invoked instead of returning a 404 error. Default: false.
	PassThru bool `json:"pass_thru,omitempty"`

	// Encodings to check for precompressed sidecar files (for example
	// `file.css.br` next to `file.css`), by encoder module.
	PrecompressedRaw caddy.ModuleMap `json:"precompressed,omitempty" caddy:"namespace=http.precompressed"`

	// If the client has no strong preference (q-factor), choose these
	// encodings in order. If empty, the first encoding from the
	// Accept-Encoding header that both client and server support is used.
	PrecompressedOrder []string `json:"precompressed_order,omitempty"`

	// File extensions of sidecar files to read ETags from. If set, a
	// file's ETag is read from `<file><ext>` for the first of these that
	// exists, instead of being computed. Values must be quoted ETags.
	EtagFileExtensions []string `json:"etag_file_extensions,omitempty"`

	// Serves files compressed once per version, from memory, as the
	// `encode` handler in front would compress them for every request:
	// give it the same settings as that `encode` (see CompressConfig).
	// Needs the open-file cache.
	Compress *CompressConfig `json:"compress,omitempty"`

	// Tunes h2_file_server's open-file cache. This and anything else
	// h2_file_server adds to file_server's fields has no effect on which
	// responses are sent, only on how fast.
	Cache *CacheConfig `json:"cache,omitempty"`

	// The size, in bytes, of the writes a file body is sent in (HTTP/1.1
	// over plain TCP uses sendfile instead). The default, 16375, makes
	// each HTTP/2 DATA frame plus its 9-byte header exactly one 16 KiB TLS
	// record. On connections through the coalesce listener wrapper, a
	// larger body starts with a write of four times this, and each
	// following write is twice the previous one, up to 262000 bytes: fewer
	// trips through the HTTP/2 server's write loop (within a process-wide
	// 32 MiB of such buffers). On HTTP/2, writes grow only up to a quarter
	// of the client's smaller flow-control window, as the wrapper above
	// TLS reads it (below TLS it cannot, and they do not grow). Behind
	// h2file's HTTP/2 engine (h2_engine), the engine says how large the
	// writes are (it frames and batches each itself), at most 262000
	// bytes, and write_chunk does not apply. At most 16 MiB.
	WriteChunk int64 `json:"write_chunk,omitempty"`

	// hideHasPlaceholders is set when a hide entry must be resolved per
	// request.
	hideHasPlaceholders bool

	// precompressors maps an Accept-Encoding token to its sidecar suffix.
	precompressors map[string]encode.Precompressed

	// fallback is Caddy's own file server with the same configuration; it
	// renders directory listings.
	fallback *fileserver.FileServer

	// cache is the open-file cache shared through cachePool under
	// cacheKey; nil when disabled.
	cache    *fileCache
	shared   *sharedCache
	cacheKey string

	// compressor serves compressed variants (see CompressConfig); nil
	// without the compress option.
	compressor *compressor

	fsmap  caddy.FileSystems
	logger *zap.Logger
	memos  *requestMemos // joined paths, sidecar names, accepted encodings (memo.go)
}

// CaddyModule returns the Caddy module information.
func (Handler) CaddyModule() caddy.ModuleInfo {
	return caddy.ModuleInfo{
		ID:  "http.handlers.h2_file_server",
		New: func() caddy.Module { return new(Handler) },
	}
}

// Provision sets up the handler. It opens no files, so that `caddy
// validate` stays side-effect free.
func (h *Handler) Provision(ctx caddy.Context) error {
	h.logger = ctx.Logger()
	h.fsmap = ctx.FileSystems()
	h.memos = new(requestMemos)

	// what file_server accepts, h2_file_server accepts; the odd parts of
	// it are worth a warning
	h.warnOddConfig(h.logger)
	if h.WriteChunk < 0 || h.WriteChunk > send.MaxWriteChunk {
		return fmt.Errorf("write_chunk must be from 1 byte to 16 MiB (%d bytes), or 0 for the default (%d bytes): %d",
			send.MaxWriteChunk, send.DefaultChunkSize, h.WriteChunk)
	}
	if h.WriteChunk == 0 {
		h.WriteChunk = send.DefaultChunkSize
	}

	if h.FileSystem == "" {
		h.FileSystem = "{http.vars.fs}"
	}
	if h.Root == "" {
		h.Root = "{http.vars.root}"
	}
	if h.IndexNames == nil {
		h.IndexNames = defaultIndexNames
	}

	originalHide := append([]string(nil), h.Hide...)

	// a relative data directory sits under the working directory and holds
	// private keys
	if dataDir := caddy.AppDataDir(); !filepath.IsAbs(dataDir) {
		if abs, err := caddy.FastAbs(dataDir); err == nil {
			h.Hide = append(h.Hide, abs)
		}
	}
	// static hide paths are made absolute once, here
	for i, hide := range h.Hide {
		if strings.Contains(hide, "{") {
			h.hideHasPlaceholders = true
		} else if strings.Contains(hide, separator) {
			if abs, err := caddy.FastAbs(hide); err == nil {
				h.Hide[i] = abs
			}
		}
	}

	// loading a module map consumes it: Caddy's file server, configured
	// identically to render listings, gets a copy
	fallbackPrecompressed := copyModuleMap(h.PrecompressedRaw)
	if err := h.loadPrecompressors(ctx); err != nil {
		return err
	}
	fallback, err := h.newFallback(ctx, originalHide, fallbackPrecompressed)
	if err != nil {
		return err
	}
	h.fallback = fallback
	if err := h.provisionCache(ctx); err != nil {
		return err
	}
	return h.provisionCompress(ctx)
}

// provisionCompress sets up the compress option: its variants are kept
// for the open-file cache's entries, so it needs the cache.
func (h *Handler) provisionCompress(ctx caddy.Context) error {
	if h.Compress == nil {
		return nil
	}
	if h.shared == nil {
		return fmt.Errorf("compress: needs the open-file cache, which is disabled (cache off): compressed files are kept " +
			"for the cache's entries; remove cache off, or compress")
	}
	cp, err := h.Compress.provision(ctx, h.logger)
	if err != nil {
		return err
	}
	h.compressor = cp
	h.shared.addStore(cp.store)
	return nil
}

// Cleanup releases this config's reference to the open-file cache; the last
// config to let go closes it.
func (h *Handler) Cleanup() error {
	if h.compressor != nil && h.shared != nil {
		h.shared.removeStore(h.compressor.store)
		h.compressor.store.Close()
	}
	return h.releaseCache()
}

// newFallback provisions Caddy's file server with this handler's
// configuration, given the hide list and precompressed config as they were
// before Provision changed them.
func (h *Handler) newFallback(ctx caddy.Context, hide []string, precompressed caddy.ModuleMap) (*fileserver.FileServer, error) {
	fsrv := &fileserver.FileServer{
		FileSystem:         h.FileSystem,
		Root:               h.Root,
		Hide:               hide,
		PrecompressedRaw:   precompressed,
		IndexNames:         h.IndexNames,
		Browse:             h.Browse,
		CanonicalURIs:      h.CanonicalURIs,
		StatusCode:         h.StatusCode,
		PassThru:           h.PassThru,
		PrecompressedOrder: h.PrecompressedOrder,
		EtagFileExtensions: h.EtagFileExtensions,
	}
	if err := fsrv.Provision(ctx); err != nil {
		// file_server's own error for the same config, worded as it
		// words it (Caddy names the module around it)
		return nil, err
	}
	return fsrv, nil
}

// copyModuleMap returns a deep copy of m.
func copyModuleMap(m caddy.ModuleMap) caddy.ModuleMap {
	if m == nil {
		return nil
	}
	out := make(caddy.ModuleMap, len(m))
	for name, raw := range m {
		out[name] = append(json.RawMessage(nil), raw...)
	}
	return out
}

// loadPrecompressors loads the precompressed sidecar encoders, with the same
// checks as file_server.
func (h *Handler) loadPrecompressors(ctx caddy.Context) error {
	mods, err := ctx.LoadModule(h, "PrecompressedRaw")
	if err != nil {
		return fmt.Errorf("loading encoder modules: %w", err)
	}
	for modName, modIface := range mods.(map[string]any) {
		p, ok := modIface.(encode.Precompressed)
		if !ok {
			return fmt.Errorf("module %s is not precompressor", modName)
		}
		ae := p.AcceptEncoding()
		if ae == "" {
			return fmt.Errorf("precompressor does not specify an Accept-Encoding value")
		}
		if p.Suffix() == "" {
			return fmt.Errorf("precompressor does not specify a Suffix value")
		}
		if _, ok := h.precompressors[ae]; ok {
			return fmt.Errorf("precompressor already added: %s", ae)
		}
		if h.precompressors == nil {
			h.precompressors = make(map[string]encode.Precompressed)
		}
		h.precompressors[ae] = p
	}
	return nil
}

var defaultIndexNames = []string{"index.html", "index.txt"}

const separator = string(filepath.Separator)

// Interface guards
var (
	_ caddy.Provisioner           = (*Handler)(nil)
	_ caddy.CleanerUpper          = (*Handler)(nil)
	_ caddyhttp.MiddlewareHandler = (*Handler)(nil)
)
