package h2file

import (
	"bytes"
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"io/fs"
	"net/http"
	"runtime"
	"slices"
	"strings"
	"sync"
	"time"

	"github.com/andybalholm/brotli"
	"github.com/caddyserver/caddy/v2"
	"github.com/caddyserver/caddy/v2/modules/caddyhttp"
	"github.com/caddyserver/caddy/v2/modules/caddyhttp/encode"
	"github.com/dustin/go-humanize"
	"go.uber.org/zap"
	"go.uber.org/zap/zapcore"
	"golang.org/x/net/http/httpguts"

	"github.com/h2file/caddy-h2file/internal/fdcache"
	"github.com/h2file/caddy-h2file/internal/send"
	"github.com/h2file/caddy-h2file/internal/variants"
)

// CompressConfig makes h2_file_server answer as `encode` in front of it
// would, with each file compressed once per version and kept in memory,
// instead of again for every request. It takes what `encode` takes, and
// must be given the same as the `encode` in front of the file server
// (which stays, for every response this leaves to it: ranges, conditional
// requests, error pages, other handlers' responses). h2_file_server cannot
// read the `encode` handler's settings: they live in unexported fields.
type CompressConfig struct {
	// The encodings, as `encode`'s: `gzip` and `zstd` with their levels.
	EncodingsRaw caddy.ModuleMap `json:"encodings,omitempty" caddy:"namespace=http.encoders"`

	// If the client has no strong preference, choose these encodings in
	// order (as `encode`'s `prefer`).
	Prefer []string `json:"prefer,omitempty"`

	// Only files of more than this many bytes are compressed (as
	// `encode`'s; default 512).
	MinLength int `json:"minimum_length,omitempty"`

	// Only responses that match are compressed (as `encode`'s; default:
	// `encode`'s list of text-based Content-Types).
	Matcher *caddyhttp.ResponseMatcher `json:"match,omitempty"`

	// The bytes of compressed variants kept in memory, in all; the least
	// recently used leave first. Default 32 MiB.
	MaxMemory int64 `json:"max_memory,omitempty"`

	// Files larger than this are compressed by `encode` for every request,
	// as without this option. Default 8 MiB.
	MaxFileSize int64 `json:"max_file_size,omitempty"`

	// Also keeps brotli (`br`) variants, chosen for clients that accept br
	// as `encode` would choose br if it had a brotli encoder (after zstd
	// in the preference order). This is the one place where answers
	// differ from `encode`'s: Caddy has no brotli encoder, so `encode`
	// answers those clients with zstd or gzip.
	Brotli *BrotliConfig `json:"brotli,omitempty"`
}

// BrotliConfig sets up brotli variants (andybalholm/brotli, pure Go).
type BrotliConfig struct {
	// The brotli quality, 0 to 11; 0 means the default, 6: on Caddy's
	// encode test assets, 6 gave 38.0% of a 158 KB script in 14 ms, 9
	// 38.0% in 28 ms, 11 34.6% in 300 ms (which the first request for a
	// file waits for).
	Level int `json:"level,omitempty"`
}

// defaultBrotliLevel is BrotliConfig's default quality.
const defaultBrotliLevel = 6

// brotliEncoder is a brotli writer as encode's Encoder.
type brotliEncoder struct{ *brotli.Writer }

var _ encode.Encoder = brotliEncoder{}

const (
	defaultVariantMemory  = 32 << 20
	defaultVariantFileMax = 8 << 20
)

// compressor is a provisioned CompressConfig.
type compressor struct {
	encodings map[string]*sync.Pool // of encode.Encoder, by coding
	prefer    []string
	minLength int64
	matcher   *caddyhttp.ResponseMatcher
	maxFile   int64
	store     *variants.Store
	logger    *zap.Logger
	// workers holds a token per variant being made (one per CPU at most)
	workers chan struct{}
}

// provision resolves c with `encode`'s own defaults and checks: an
// `encode` handler is provisioned with c's settings, and its results are
// taken over.
func (c *CompressConfig) provision(ctx caddy.Context, logger *zap.Logger) (*compressor, error) {
	if len(c.EncodingsRaw) == 0 {
		return nil, fmt.Errorf("compress: no encodings (give those of the encode handler in front, e.g. zstd and gzip)")
	}
	if c.MaxMemory < 0 {
		return nil, fmt.Errorf("compress: max_memory must be a number of bytes, or 0 for the default (%s): %d",
			humanize.IBytes(defaultVariantMemory), c.MaxMemory)
	}
	if c.MaxFileSize < 0 {
		return nil, fmt.Errorf("compress: max_file_size must be a number of bytes, or 0 for the default (%s): %d",
			humanize.IBytes(defaultVariantFileMax), c.MaxFileSize)
	}
	if err := c.checkEncodings(); err != nil {
		return nil, err
	}
	shadow := &encode.Encode{EncodingsRaw: copyModuleMap(c.EncodingsRaw), Prefer: c.Prefer, MinLength: c.MinLength, Matcher: c.Matcher}
	if err := shadow.Provision(ctx); err != nil {
		return nil, fmt.Errorf("compress: %w", err)
	}
	if err := shadow.Validate(); err != nil {
		return nil, fmt.Errorf("compress: %w", err)
	}
	if err := c.raiseDefaultLevels(); err != nil {
		return nil, err
	}
	mods, err := ctx.LoadModule(c, "EncodingsRaw")
	if err != nil {
		return nil, fmt.Errorf("compress: loading encoder modules: %w", err)
	}
	cp := &compressor{
		encodings: make(map[string]*sync.Pool),
		prefer:    shadow.Prefer,
		minLength: int64(shadow.MinLength),
		matcher:   shadow.Matcher,
		maxFile:   orDefault(c.MaxFileSize, defaultVariantFileMax),
		logger:    logger,
		workers:   make(chan struct{}, runtime.GOMAXPROCS(0)),
	}
	for _, mod := range mods.(map[string]any) {
		enc, ok := mod.(encode.Encoding)
		if !ok {
			return nil, fmt.Errorf("compress: module %T is not an HTTP encoding", mod)
		}
		cp.encodings[enc.AcceptEncoding()] = &sync.Pool{New: func() any { return enc.NewEncoder() }}
	}
	if c.Brotli != nil {
		level := orDefault(c.Brotli.Level, defaultBrotliLevel)
		if level < 0 || level > brotli.BestCompression {
			return nil, fmt.Errorf("compress: brotli level must be from 0 to %d, 0 for the default (%d): %d",
				brotli.BestCompression, defaultBrotliLevel, level)
		}
		cp.encodings["br"] = &sync.Pool{New: func() any { return brotliEncoder{brotli.NewWriterLevel(nil, level)} }}
		cp.prefer = withBrotli(cp.prefer)
	}
	budget := orDefault(c.MaxMemory, defaultVariantMemory)
	cp.store = variants.New(variants.Limits{MaxBytes: budget, MaxVariant: min(cp.maxFile, budget)}, variants.SharedMetrics)
	return cp, nil
}

// raiseDefaultLevels sets the level of gzip and zstd, where none is
// given, to one that the once-only work affords: gzip 9 (on Caddy's
// encode test assets, 1-4% smaller than encode's default 5 in about twice
// the time: 5 ms for a 158 KB script) and zstd "better" (1-4% smaller
// than "default" in the same time; "best" took 40 times as long for 3%
// more).
func (c *CompressConfig) raiseDefaultLevels() error {
	for name, level := range map[string]any{"gzip": 9, "zstd": "better"} {
		raw, ok := c.EncodingsRaw[name]
		if !ok {
			continue
		}
		var fields map[string]any
		if err := json.Unmarshal(raw, &fields); err != nil {
			return fmt.Errorf("compress: reading the %s encoder: %w", name, err)
		}
		if _, set := fields["level"]; set {
			continue
		}
		if fields == nil {
			fields = make(map[string]any)
		}
		fields["level"] = level
		raised, err := json.Marshal(fields)
		if err != nil {
			return fmt.Errorf("compress: %w", err)
		}
		c.EncodingsRaw[name] = raised
	}
	return nil
}

// withBrotli puts br into a preference order where encode's default
// order (zstd, br, gzip) would: after zstd, else first.
func withBrotli(prefer []string) []string {
	if slices.Contains(prefer, "br") {
		return prefer
	}
	at := 0
	if i := slices.Index(prefer, "zstd"); i >= 0 {
		at = i + 1
	}
	return slices.Insert(slices.Clone(prefer), at, "br")
}

// negotiate returns the coding `encode` would choose for r, or "" (the
// parse of Accept-Encoding memoized in memos).
func (cp *compressor) negotiate(r *http.Request, memos *requestMemos) string {
	for _, name := range memos.acceptedEncodings(r, &cp.prefer) {
		if _, ok := cp.encodings[name]; ok {
			return name
		}
	}
	return ""
}

// compress returns the content the handle reads, of the version info
// describes, compressed with coding; it fails if the file changed while
// it was read.
func (cp *compressor) compress(coding string, held *fdcache.Handle, info fs.FileInfo) ([]byte, error) {
	start := time.Now()
	src := held.Bytes()
	if src == nil {
		src = make([]byte, held.Size())
		if _, err := io.ReadFull(io.NewSectionReader(held, 0, held.Size()), src); err != nil {
			return nil, fmt.Errorf("reading %s to compress it: %w", info.Name(), err)
		}
	}
	if !held.Unchanged(info) {
		return nil, fmt.Errorf("%s changed while it was read to be compressed", info.Name())
	}
	pool := cp.encodings[coding]
	enc := pool.Get().(encode.Encoder)
	defer pool.Put(enc)
	var out bytes.Buffer
	out.Grow(len(src) / 3)
	enc.Reset(&out)
	_, err := enc.Write(src)
	if err == nil {
		err = enc.Close()
	}
	enc.Reset(nil)
	if err != nil {
		return nil, fmt.Errorf("compressing %s with %s: %w", info.Name(), coding, err)
	}
	if c := cp.logger.Check(zapcore.DebugLevel, "compressed a file once for its variant"); c != nil {
		c.Write(zap.String("file", info.Name()), zap.String("encoding", coding),
			zap.Int("size", len(src)), zap.Int("compressed", out.Len()), zap.Duration("took", time.Since(start)))
	}
	return bytes.Clone(out.Bytes()), nil
}

// serveVariant answers a plain GET or HEAD of a whole file with its
// compressed variant, with the status, headers and framing `encode` in
// front of file_server would give it, and reports false, having written
// nothing, when `encode` would not compress the response or no variant
// is held (then the response goes on as without the option, and the
// `encode` in front compresses it, so a first request is as fast as
// without the option; the variant is made meanwhile, once). Only content
// the open-file cache holds has variants: they are kept for its entry, and
// go when it goes.
func (h *Handler) serveVariant(w http.ResponseWriter, r *http.Request, e *cacheEntry, content *responseBody, etag string, scratch *responseScratch) bool {
	cp := h.compressor
	if cp == nil || content.owned != nil || content.body == nil || !send.PlainRequest(r) {
		return false
	}
	info := e.Info()
	if size := info.Size(); size <= cp.minLength || size > cp.maxFile || fdcache.RecentlyModified(info) {
		return false
	}
	hdr := w.Header()
	if headerNonEmpty(hdr["Content-Encoding"]) || httpguts.HeaderValuesContainsToken(hdr["Cache-Control"], "no-transform") ||
		!cp.matcher.Match(http.StatusOK, hdr) {
		return false
	}
	coding := cp.negotiate(r, h.memos)
	if coding == "" {
		return false
	}
	var data []byte
	if r.Method == http.MethodGet {
		var held bool
		if data, held = cp.store.Held(e, coding); !held {
			// this response goes as without the option, as fast; the
			// variant is made meanwhile for the next ones
			cp.makeInBackground(e, coding)
			return false
		}
	}
	// what file_server sets, then what encode changes: no Content-Length
	// or Accept-Ranges, the coding, and a strong ETag marked with it
	vals := &scratch.vals
	send.SetLastModified(hdr, send.ValidatorModTime(info.ModTime()), e.Meta().headerValues, vals)
	if etag != "" && !strings.HasPrefix(etag, "W/") {
		send.SetHeaderValue(hdr, "Etag", h.memos.variantETag(etag, coding), vals, send.ETagValue)
	}
	send.SetHeaderValue(hdr, "Content-Encoding", coding, vals, send.ContentEncodingValue)
	w.WriteHeader(http.StatusOK)
	if data != nil {
		scratch.variant = send.NewBody(data, nil, int64(len(data)))
		_, _ = scratch.writer.Init(w, r, int(h.WriteChunk)).ReadFrom(&scratch.variant)
	}
	return true
}

// makeInBackground makes e's variant in coding on a goroutine of its own,
// unless another request is making it, or as many are being made as there
// are CPUs (a later request tries again).
func (cp *compressor) makeInBackground(e *cacheEntry, coding string) {
	m, ok := cp.store.Begin(e, coding)
	if !ok {
		return
	}
	select {
	case cp.workers <- struct{}{}:
	default:
		m.Done(nil, 0, errors.New("every compression worker is busy"))
		return
	}
	held, ok := e.Open()
	if !ok {
		<-cp.workers
		m.Done(nil, 0, errors.New("the cache no longer holds the file"))
		return
	}
	go func() {
		defer func() { <-cp.workers }()
		defer held.Close()
		data, err := cp.compress(coding, &held, e.Info())
		m.Done(data, e.Info().Size(), err)
		if err != nil {
			if c := cp.logger.Check(zapcore.DebugLevel, "no compressed variant; encode compresses the responses"); c != nil {
				c.Write(zap.String("filename", e.Name()), zap.String("encoding", coding), zap.Error(err))
			}
		}
	}()
}

// VariantStats returns the counts of the compressed variants that the
// compress option keeps for h (zero without the option): this handler's
// own, where the caddy_h2file_compress_* metrics add up those of every
// handler in the process.
func (h *Handler) VariantStats() variants.Stats {
	if h.compressor == nil {
		return variants.Stats{}
	}
	return h.compressor.store.Stats()
}

// stripVariantETag removes the coding's mark from the request's
// If-None-Match, as `encode` does before the file server sees it, so that
// a validator of a compressed variant matches the file's ETag where no
// `encode` is in front.
func (cp *compressor) stripVariantETag(r *http.Request, memos *requestMemos) {
	etags := r.Header["If-None-Match"]
	if len(etags) == 0 {
		return
	}
	coding := cp.negotiate(r, memos)
	if coding == "" {
		return
	}
	etag := strings.Join(etags, ", ")
	if stripped := strings.ReplaceAll(etag, "-"+coding+`"`, `"`); stripped != etag || len(etags) > 1 {
		r.Header["If-None-Match"] = []string{stripped}
	}
}

// headerNonEmpty reports whether any of values is not empty.
func headerNonEmpty(values []string) bool {
	for _, v := range values {
		if v != "" {
			return true
		}
	}
	return false
}
