package h2file

import (
	"fmt"
	"io/fs"
	"slices"
	"sync"
	"time"

	"github.com/caddyserver/caddy/v2"
	"go.uber.org/zap"

	"github.com/h2file/caddy-h2file/internal/fdcache"
	"github.com/h2file/caddy-h2file/internal/variants"
)

// CacheConfig tunes h2_file_server's open-file cache, which spares hot
// files the open, stat and close of every request. It has no file_server
// equivalent. Every field is optional.
type CacheConfig struct {
	// Turns the cache off: every request opens, stats and closes its file,
	// as file_server does. Default: false.
	Disabled bool `json:"disabled,omitempty"`

	// The most paths the cache remembers: open files, in-memory files,
	// directories and missing paths; the least recently used go first.
	// Default: 4096. Never more than a quarter of the process's open-file
	// limit (RLIMIT_NOFILE), whatever is configured.
	MaxFiles int `json:"max_files,omitempty"`

	// The most bytes of file content kept in memory, in total. Default:
	// 64 MiB. -1 keeps no content in memory (files are still kept open).
	MaxMemory int64 `json:"max_memory,omitempty"`

	// Files up to this size are kept in memory, so that serving them costs
	// no system call. Default: 256 KiB (100 KB files at 8 connections x 32
	// streams: 9% more requests per second than with 64 KiB, where each
	// response read its file with pread).
	SmallFileMax int64 `json:"small_file_max,omitempty"`

	// How often a cached path is checked again with one stat where the
	// cache gets no file system events (anywhere but Linux, file systems
	// such as NFS or FUSE, or when the watch limit is reached): a file
	// replaced, rewritten, resized, touched or re-permissioned is dropped
	// then, so such changes are visible within this interval. Where events
	// are live (Linux, local file systems), changes are visible at once and
	// this only paces moving recently written small files into memory.
	// Default: 1s.
	Revalidate caddy.Duration `json:"revalidate,omitempty"`

	// Paths not requested for this long are dropped. Default: 60s.
	Inactive caddy.Duration `json:"inactive,omitempty"`
}

// Defaults of CacheConfig.
const (
	defaultMaxFiles     = 4096
	defaultMaxMemory    = 64 << 20
	defaultSmallFileMax = 256 << 10
	defaultRevalidate   = time.Second
	defaultInactive     = 60 * time.Second
)

// limits validates the configuration and fills in defaults. fdLimit is the
// process's soft limit on open files (0 if unknown).
func (cfg *CacheConfig) limits(fdLimit uint64) (fdcache.Limits, error) {
	var c CacheConfig
	if cfg != nil {
		c = *cfg
	}
	switch {
	case c.MaxFiles < 0:
		return fdcache.Limits{}, fmt.Errorf("cache max_files must be 0 (the default, %d) or more: %d", defaultMaxFiles, c.MaxFiles)
	case c.MaxMemory < -1:
		return fdcache.Limits{}, fmt.Errorf("cache max_memory must be -1 (no file content in memory), 0 (the default, %d bytes) or a number of bytes: %d", defaultMaxMemory, c.MaxMemory)
	case c.SmallFileMax < 0:
		return fdcache.Limits{}, fmt.Errorf("cache small_file_max must be 0 (the default, %d bytes) or a number of bytes: %d", defaultSmallFileMax, c.SmallFileMax)
	case c.Revalidate < 0:
		return fdcache.Limits{}, fmt.Errorf("cache revalidate must be 0 (the default, %s) or longer: %s", defaultRevalidate, time.Duration(c.Revalidate))
	case c.Inactive < 0:
		return fdcache.Limits{}, fmt.Errorf("cache inactive must be 0 (the default, %s) or longer: %s", defaultInactive, time.Duration(c.Inactive))
	}
	l := fdcache.Limits{
		MaxFiles:     orDefault(c.MaxFiles, defaultMaxFiles),
		MaxMemory:    orDefault(c.MaxMemory, defaultMaxMemory),
		SmallFileMax: orDefault(c.SmallFileMax, defaultSmallFileMax),
		Revalidate:   orDefault(time.Duration(c.Revalidate), defaultRevalidate),
		Inactive:     orDefault(time.Duration(c.Inactive), defaultInactive),
	}
	if l.MaxMemory < 0 {
		l.MaxMemory = 0
	}
	if fdLimit > 0 && uint64(l.MaxFiles) > fdLimit/4 {
		l.MaxFiles = max(int(fdLimit/4), 1)
	}
	return l, nil
}

// cachePoolKey names a cache by its limits, so configs with the same
// settings share one cache across reloads.
func cachePoolKey(l fdcache.Limits) string {
	return fmt.Sprintf("h2file.fdcache/%d/%d/%d/%s/%s/noevents=%t", l.MaxFiles, l.MaxMemory, l.SmallFileMax, l.Revalidate, l.Inactive, l.NoEvents)
}

func orDefault[T comparable](v, def T) T {
	var zero T
	if v == zero {
		return def
	}
	return v
}

// fileCache is the open-file cache as h2_file_server uses it: each entry of
// a regular file carries its response metadata (see describeFile).
type fileCache = fdcache.Cache[fileMeta]

// cacheEntry is one path in a fileCache, or a lookup's result without one.
type cacheEntry = fdcache.Entry[fileMeta]

// cachePool holds the open-file caches, so that a cache outlives config
// reloads that keep its settings; keyed by cachePoolKey.
var cachePool = caddy.NewUsagePool()

// caddyLocalFS is Caddy's default file system: the local disk, whose
// changes the kernel reports.
var caddyLocalFS, _ = (&caddy.Context{}).FileSystems().Get("")

// isCaddyLocalFS reports whether fsys is Caddy's default file system.
func isCaddyLocalFS(fsys fs.FS) bool { return fsys == caddyLocalFS }

// newFileCache makes an open-file cache for h2_file_server.
func newFileCache(limits fdcache.Limits, logger *zap.Logger) *fileCache {
	return newSharedCache(limits, logger).fileCache
}

// sharedCache is an open-file cache that the handlers with the same
// limits share (through cachePool), with the compressed-variant stores of
// those handlers, which hear of every entry the cache drops: a variant is
// kept for one entry, and goes with it.
type sharedCache struct {
	*fileCache

	mu     sync.RWMutex
	stores []*variants.Store
}

// newSharedCache makes an open-file cache for h2_file_server.
func newSharedCache(limits fdcache.Limits, logger *zap.Logger) *sharedCache {
	sc := new(sharedCache)
	sc.fileCache = fdcache.New(limits, fdcache.Options[fileMeta]{
		Describe: describeFile,
		IsLocal:  isCaddyLocalFS,
		Logger:   logger,
		Metrics:  fileCacheMetrics,
		Dropped:  sc.dropped,
	})
	return sc
}

// dropped forgets e's compressed variants.
func (sc *sharedCache) dropped(e *cacheEntry) {
	sc.mu.RLock()
	defer sc.mu.RUnlock()
	for _, s := range sc.stores {
		s.Forget(e)
	}
}

// addStore makes s hear of the entries the cache drops.
func (sc *sharedCache) addStore(s *variants.Store) {
	sc.mu.Lock()
	sc.stores = append(sc.stores, s)
	sc.mu.Unlock()
}

// removeStore undoes addStore.
func (sc *sharedCache) removeStore(s *variants.Store) {
	sc.mu.Lock()
	sc.stores = slices.DeleteFunc(sc.stores, func(other *variants.Store) bool { return other == s })
	sc.mu.Unlock()
}

// provisionCache validates the cache settings and takes a reference to the
// shared cache with those settings. It opens no files.
func (h *Handler) provisionCache(ctx caddy.Context) error {
	// registered with or without the cache (the cache's stay at 0
	// without it): docs and dashboards count on the names being there
	if err := registerMetrics(ctx.GetMetricsRegistry()); err != nil {
		return err
	}
	if h.Cache != nil && h.Cache.Disabled {
		return nil
	}
	limits, err := h.cacheLimits(fdcache.OpenFileLimit())
	if err != nil {
		return err
	}
	key := cachePoolKey(limits)
	logger := h.logger
	val, loaded, err := cachePool.LoadOrNew(key, func() (caddy.Destructor, error) {
		return newSharedCache(limits, logger), nil
	})
	if err != nil {
		return fmt.Errorf("setting up open-file cache: %w", err)
	}
	h.shared = val.(*sharedCache)
	h.cache = h.shared.fileCache
	if loaded {
		// a reload: nothing the previous config's cache believed is
		// served without being checked again
		h.cache.RecheckAll()
	}
	h.cacheKey = key
	return nil
}

// cacheLimits resolves the cache settings for a process that may open
// fdLimit files (0 if unknown), and warns once if the configured max_files
// had to be lowered to a quarter of that.
func (h *Handler) cacheLimits(fdLimit uint64) (fdcache.Limits, error) {
	limits, err := h.Cache.limits(fdLimit)
	if err != nil {
		return fdcache.Limits{}, err
	}
	if h.Cache != nil && h.Cache.MaxFiles > limits.MaxFiles {
		h.logger.Warn("cache max_files is more than a quarter of the open-file limit (RLIMIT_NOFILE); using a quarter of it",
			zap.Int("max_files", h.Cache.MaxFiles),
			zap.Uint64("rlimit_nofile", fdLimit),
			zap.Int("using", limits.MaxFiles))
	}
	return limits, nil
}

// releaseCache releases this config's reference to the open-file cache;
// the last config to let go closes it.
func (h *Handler) releaseCache() error {
	if h.cache == nil {
		return nil
	}
	if _, err := cachePool.Delete(h.cacheKey); err != nil {
		return fmt.Errorf("releasing open-file cache: %w", err)
	}
	// requests of this config may still be running: they keep using the
	// cache, which lists nothing new once closed
	return nil
}
