package h2file

import (
	"container/list"
	"errors"
	"io/fs"
	"os"
	"sync"
	"sync/atomic"
	"time"

	"go.uber.org/zap"
)

// fileCache remembers what requests learn about paths: the FileInfo of
// files and directories, that a path does not exist, and for regular files
// an open descriptor (read with ReadAt, so one descriptor serves any number
// of concurrent requests) or, for small files, the whole content.
//
// Entries are bounded in number (least recently used first out) and in
// memory, and dropped after inactive without use. A descriptor is closed
// only when no request reads from it any more.
//
// Entries are kept fresh in one of two ways. Where the file system reports
// changes (see dirWatcher: inotify, on Linux, for Caddy's local file
// system), every lookup first applies the events the kernel has queued, and
// an entry whose path, file or any directory on the way changed is dropped
// before it is used: a request never gets what a change that completed
// before it began has replaced. Elsewhere, and for entries that could not
// be watched, an entry is checked again with one stat at most every
// revalidate interval (and a descriptor-backed one with an fstat on every
// use), so changes are seen within revalidate.
type fileCache struct {
	cfg     cacheLimits
	now     func() time.Time
	logger  *zap.Logger
	metrics *cacheMetrics

	// isLocal reports whether a file system is the local one whose
	// changes a dirWatcher sees: Caddy's default file system.
	isLocal func(fs.FS) bool
	watcher atomic.Pointer[dirWatcher] // started by the first watched lookup
	// generation counts config loads that use this cache; an entry
	// confirmed under an older one is checked again before it is used
	generation atomic.Uint64

	mu       sync.Mutex
	entries  map[cacheKey]*cacheEntry
	lru      *list.List // of *cacheEntry, most recent first
	memBytes int64      // bytes of file content held, guarded by mu
	closed   bool       // no more entries are listed, guarded by mu
	noWatch  bool       // starting a watcher failed, guarded by mu

	stop     chan struct{}
	stopOnce sync.Once
}

// cacheLimits are the resolved, validated settings of a fileCache.
type cacheLimits struct {
	maxFiles     int
	maxMemory    int64 // 0: no file content in memory
	smallFileMax int64
	revalidate   time.Duration
	inactive     time.Duration
	noEvents     bool // revalidate only, even where there are file system events
}

// cacheKey identifies a path in one file system.
type cacheKey struct {
	fs   string
	name string
}

// cacheEntry is what the cache knows about one path.
type cacheEntry struct {
	key  cacheKey
	info fs.FileInfo // nil for a missing path
	err  error       // fs.ErrNotExist for a missing path

	file *os.File // open regular file; nil if data holds it or not cached
	data []byte   // whole content of a small file

	etag        string // file_server's ETag of a regular file
	contentType string // by extension; "" if unknown
	// headerValues are its Last-Modified and Content-Length values
	headerValues entryHeaderValues

	// refs counts the cache's own reference while the entry is listed,
	// plus one per request reading file. The file is closed at zero.
	refs atomic.Int32

	checkedAt  atomic.Int64  // UnixNano of the last stat that confirmed the entry
	checkedGen atomic.Uint64 // the cache's generation at that stat
	usedAt     atomic.Int64  // UnixNano of the last lookup

	// watcher, if set, reports every change to the path (see dirWatcher);
	// deps are the watched nodes the entry depends on (guarded by
	// watcher.mu), and stale is set once one of them changed.
	watcher *dirWatcher
	deps    []watchDep
	stale   atomic.Bool

	// recentlyModified marks a small file kept open instead of in memory
	// because it may still be being written (see settleTime).
	recentlyModified bool
	// racy marks content in memory whose FileInfo cannot prove it current
	// (see racyChange): revalidation compares the bytes too.
	racy atomic.Bool

	// unlisted marks an entry that is not kept: a regular file that could
	// not be opened now; requests open it themselves.
	unlisted bool

	elem    *list.Element // position in lru; nil once removed (guarded by mu)
	memSize int64         // len(data), accounted in memBytes
}

// newFileCache makes a cache and starts the goroutine that drops inactive
// entries; close stops it. now is the clock (time.Now but in tests). It
// opens no files: a watcher is started by the first lookup that needs it.
func newFileCache(limits cacheLimits, logger *zap.Logger, metrics *cacheMetrics, now func() time.Time) *fileCache {
	c := &fileCache{
		cfg:     limits,
		now:     now,
		logger:  logger,
		metrics: metrics,
		isLocal: isCaddyLocalFS,
		entries: make(map[cacheKey]*cacheEntry),
		lru:     list.New(),
		stop:    make(chan struct{}),
	}
	go c.sweepLoop()
	return c
}

// lookup returns the entry for name in fsys (named fsName). A regular file's
// entry comes with an open file or its content. The error is the one
// fs.Stat gives; callers map it as file_server does.
func (c *fileCache) lookup(fsys fs.FS, fsName, name string) (*cacheEntry, error) {
	key := cacheKey{fs: fsName, name: name}
	w := c.watcherFor(fsys)
	if w != nil {
		// everything the kernel has queued: the changes that completed
		// before this request began
		w.sync()
	}
	now := c.now().UnixNano()

	c.mu.Lock()
	e := c.entries[key]
	if e != nil {
		c.lru.MoveToFront(e.elem)
	}
	c.mu.Unlock()

	if e != nil && e.stale.Load() {
		c.remove(e)
		e = nil
	}
	if e != nil && e.watcher == nil && e.file != nil && !e.fileUnchanged() {
		// rewritten in place: headers from the entry would not match the
		// bytes read from its descriptor
		c.remove(e)
		e = nil
	}
	if e != nil {
		e.usedAt.Store(now)
		if !c.needsCheck(e, now) {
			c.metrics.hits.Inc()
			return e, e.err
		}
		gen := c.generation.Load()
		if c.revalidate(fsys, e) {
			e.checkedAt.Store(c.now().UnixNano())
			e.checkedGen.Store(gen)
			c.metrics.hits.Inc()
			return e, e.err
		}
		c.remove(e)
	}

	c.metrics.misses.Inc()
	e = &cacheEntry{key: key}
	e.checkedGen.Store(c.generation.Load())
	if w != nil {
		// watched before it is loaded: a change after this point marks
		// the entry stale, one before it is in what load sees
		w.watch(e)
	}
	keep, err := c.load(fsys, e)
	if !keep || e.unlisted {
		c.unwatch(e)
		if !keep {
			return nil, err
		}
		return e, e.err
	}
	e.checkedAt.Store(now)
	e.usedAt.Store(now)
	return c.insert(e), e.err
}

// needsCheck reports whether e must be checked against the file system
// before it is used: it was confirmed under an earlier config, or it is not
// watched (or kept open only until it settles) and revalidate has passed.
func (c *fileCache) needsCheck(e *cacheEntry, now int64) bool {
	if e.checkedGen.Load() != c.generation.Load() {
		return true
	}
	if e.watcher != nil && !e.recentlyModified {
		return false
	}
	return now-e.checkedAt.Load() >= int64(c.cfg.revalidate)
}

// recheckAll makes every entry be checked against the file system again
// before its next use. A config load that reuses this cache calls it, so
// that nothing the previous config's cache believed is served unchecked.
func (c *fileCache) recheckAll() {
	c.generation.Add(1)
}

// fileUnchanged reports whether e's open file still has the size,
// modification time and mode of e.info, with one fstat. Files held open are
// larger than small_file_max, so this costs little next to sending them; it
// keeps a file rewritten in place from going out under its old headers.
func (e *cacheEntry) fileUnchanged() bool {
	info, err := e.file.Stat()
	return err == nil && sameFile(e.info, info)
}

// revalidate reports whether e still describes its path: the same file
// (device, inode and change time where the platform has them), size,
// modification time and mode, or still missing.
func (c *fileCache) revalidate(fsys fs.FS, e *cacheEntry) bool {
	c.metrics.revalidations.Inc()
	info, err := c.stat(fsys, e.key.name)
	if isTooManyFiles(err) {
		// no news about the file; what the cache has is still the best
		return true
	}
	if e.info == nil {
		return errors.Is(err, fs.ErrNotExist)
	}
	// a file too recently modified to be copied into memory is loaded
	// again, so that it is copied once it has settled
	if err != nil || !sameFile(e.info, info) || e.recentlyModified {
		return false
	}
	return !e.racy.Load() || c.sameContent(fsys, e)
}

// insert lists e, or returns the entry another request listed for the same
// key meanwhile. It evicts to stay within the limits.
func (c *fileCache) insert(e *cacheEntry) *cacheEntry {
	e.refs.Store(1)
	c.mu.Lock()
	if c.closed {
		// requests of a config being unloaded still run: serve them,
		// but keep nothing
		c.mu.Unlock()
		c.unwatch(e)
		c.release(e)
		return e
	}
	if e.stale.Load() {
		// changed while it was loaded: serve this request (which began
		// before the change completed), keep nothing
		c.mu.Unlock()
		c.unwatch(e)
		c.release(e)
		return e
	}
	if existing := c.entries[e.key]; existing != nil && !existing.stale.Load() {
		c.lru.MoveToFront(existing.elem)
		c.mu.Unlock()
		c.unwatch(e)
		c.release(e)
		return existing
	}
	var evicted []*cacheEntry
	if existing := c.entries[e.key]; existing != nil {
		evicted = append(evicted, c.unlistLocked(existing))
	}
	if e.memSize > 0 && c.memBytes+e.memSize > c.cfg.maxMemory {
		evicted = append(evicted, c.evictMemoryLocked(e.memSize)...)
	}
	c.entries[e.key] = e
	e.elem = c.lru.PushFront(e)
	c.memBytes += e.memSize
	for c.lru.Len() > c.cfg.maxFiles {
		evicted = append(evicted, c.unlistLocked(c.lru.Back().Value.(*cacheEntry)))
	}
	c.mu.Unlock()

	c.metrics.entries.Inc()
	c.metrics.memoryBytes.Add(float64(e.memSize))
	c.dropAll(evicted)
	return e
}

// evictMemoryLocked unlists the least recently used in-memory entries until
// need more bytes fit in the budget. Their memory is freed by the garbage
// collector once no request uses it.
func (c *fileCache) evictMemoryLocked(need int64) []*cacheEntry {
	var evicted []*cacheEntry
	for el := c.lru.Back(); el != nil && c.memBytes+need > c.cfg.maxMemory; {
		prev := el.Prev()
		if old := el.Value.(*cacheEntry); old.memSize > 0 {
			evicted = append(evicted, c.unlistLocked(old))
		}
		el = prev
	}
	return evicted
}

// dropAll releases the cache's reference to entries it has unlisted, and
// counts them as evictions.
func (c *fileCache) dropAll(entries []*cacheEntry) {
	for _, e := range entries {
		c.metrics.evictions.Inc()
		c.drop(e)
	}
}

// drop releases the cache's reference to an entry it has unlisted, and
// its watches.
func (c *fileCache) drop(e *cacheEntry) {
	c.unwatch(e)
	c.metrics.entries.Dec()
	c.metrics.memoryBytes.Sub(float64(e.memSize))
	c.release(e)
}

// unlistLocked takes e out of the map and the LRU list. The caller drops
// the cache's reference with release, outside the lock.
func (c *fileCache) unlistLocked(e *cacheEntry) *cacheEntry {
	if c.entries[e.key] == e {
		delete(c.entries, e.key)
	}
	c.lru.Remove(e.elem)
	e.elem = nil
	c.memBytes -= e.memSize
	return e
}

// remove drops e from the cache, if it is still listed.
func (c *fileCache) remove(e *cacheEntry) {
	c.mu.Lock()
	listed := e.elem != nil
	if listed {
		c.unlistLocked(e)
	}
	c.mu.Unlock()
	if listed {
		c.drop(e)
	}
}

// acquire takes a reference to e's open file for one request. It fails if
// the file has been closed already (the entry was dropped meanwhile).
func (e *cacheEntry) acquire() bool {
	for {
		n := e.refs.Load()
		if n <= 0 {
			return false
		}
		if e.refs.CompareAndSwap(n, n+1) {
			return true
		}
	}
}

// release drops one reference to e and closes its file at the last one.
func (c *fileCache) release(e *cacheEntry) {
	if e.refs.Add(-1) == 0 && e.file != nil {
		e.file.Close()
		c.metrics.openFiles.Dec()
	}
}
