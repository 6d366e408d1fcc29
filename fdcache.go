package h2file

import (
	"container/list"
	"errors"
	"fmt"
	"io"
	"io/fs"
	"mime"
	"os"
	"path/filepath"
	"sync"
	"sync/atomic"
	"syscall"
	"time"

	"go.uber.org/zap"
)

// fileCache remembers what requests learn about paths: the FileInfo of
// files and directories, that a path does not exist, and for regular files
// an open descriptor (read with ReadAt, so one descriptor serves any number
// of concurrent requests) or, for small files, the whole content.
//
// Entries are bounded in number (least recently used first out) and in
// memory, re-checked with one stat at most every revalidate interval, and
// dropped after inactive without use. A descriptor is closed only when no
// request reads from it any more.
type fileCache struct {
	cfg     cacheLimits
	now     func() time.Time
	logger  *zap.Logger
	metrics *cacheMetrics

	mu       sync.Mutex
	entries  map[cacheKey]*cacheEntry
	lru      *list.List // of *cacheEntry, most recent first
	memBytes int64      // bytes of file content held, guarded by mu
	closed   bool       // no more entries are listed, guarded by mu

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

	// refs counts the cache's own reference while the entry is listed,
	// plus one per request reading file. The file is closed at zero.
	refs atomic.Int32

	checkedAt    atomic.Int64 // UnixNano of the last stat that confirmed the entry
	usedAt       atomic.Int64 // UnixNano of the last lookup
	revalidating atomic.Bool

	// recentlyModified marks a small file kept open instead of in memory
	// because it may still be being written (see settleTime).
	recentlyModified bool

	// unlisted marks an entry that is not kept: a regular file that could
	// not be opened now; requests open it themselves.
	unlisted bool

	elem    *list.Element // position in lru; nil once removed (guarded by mu)
	memSize int64         // len(data), accounted in memBytes
}

// newFileCache makes a cache and starts the goroutine that drops inactive
// entries; close stops it. now is the clock (time.Now but in tests).
func newFileCache(limits cacheLimits, logger *zap.Logger, metrics *cacheMetrics, now func() time.Time) *fileCache {
	c := &fileCache{
		cfg:     limits,
		now:     now,
		logger:  logger,
		metrics: metrics,
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
	now := c.now().UnixNano()

	c.mu.Lock()
	e := c.entries[key]
	if e != nil {
		c.lru.MoveToFront(e.elem)
	}
	c.mu.Unlock()

	if e != nil && e.file != nil && !e.fileUnchanged() {
		// rewritten in place: headers from the entry would not match the
		// bytes read from its descriptor
		c.remove(e)
		e = nil
	}
	if e != nil {
		e.usedAt.Store(now)
		if now-e.checkedAt.Load() < int64(c.cfg.revalidate) || !e.revalidating.CompareAndSwap(false, true) {
			c.metrics.hits.Inc()
			return e, e.err
		}
		fresh := c.revalidate(fsys, e)
		e.revalidating.Store(false)
		if fresh {
			e.checkedAt.Store(c.now().UnixNano())
			c.metrics.hits.Inc()
			return e, e.err
		}
		c.remove(e)
	}

	c.metrics.misses.Inc()
	e, err := c.load(fsys, key)
	if e == nil {
		return nil, err
	}
	if e.unlisted {
		return e, e.err
	}
	e.checkedAt.Store(now)
	e.usedAt.Store(now)
	return c.insert(e), e.err
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
// (device and inode), size, modification time and mode, or still missing.
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
	return err == nil && sameFile(e.info, info) && !e.recentlyModified
}

// sameFile reports whether two FileInfos describe the same, unchanged file.
func sameFile(a, b fs.FileInfo) bool {
	if a.Size() != b.Size() || !a.ModTime().Equal(b.ModTime()) || a.Mode() != b.Mode() {
		return false
	}
	return sameInode(a.Sys(), b.Sys())
}

// load builds a new entry from the file system. It returns a nil entry for
// errors that are not worth remembering (anything but a missing path).
func (c *fileCache) load(fsys fs.FS, key cacheKey) (*cacheEntry, error) {
	info, err := c.stat(fsys, key.name)
	if err != nil {
		if errors.Is(err, fs.ErrNotExist) {
			return &cacheEntry{key: key, err: err}, err
		}
		return nil, err
	}
	e := &cacheEntry{key: key, info: info}
	if !info.Mode().IsRegular() {
		// directories are only stat'ed; devices, pipes and sockets are
		// never held open
		return e, nil
	}

	f, err := c.open(fsys, key.name)
	if err != nil {
		// not cacheable now (e.g. out of descriptors or no permission):
		// the caller opens it the uncached way and gets file_server's error
		e.unlisted = true
		return e, nil
	}
	osFile, ok := f.(*os.File)
	if !ok {
		f.Close()
		e.unlisted = true
		return e, nil
	}
	// describe the file that is open, not the path, which may have been
	// replaced since the stat
	if info, err = osFile.Stat(); err != nil || !info.Mode().IsRegular() {
		osFile.Close()
		return nil, fmt.Errorf("stat of opened file %s: %w", key.name, err)
	}
	e.info = info
	e.etag = calculateEtag(info)
	e.contentType = mime.TypeByExtension(filepath.Ext(key.name))

	e.recentlyModified = recentlyModified(info)
	if !e.recentlyModified {
		if data, ok := c.readSmall(osFile, info); ok {
			osFile.Close()
			e.data = data
			e.memSize = int64(len(data))
			return e, nil
		}
	}
	e.file = osFile
	c.metrics.openFiles.Inc()
	return e, nil
}

// stat stats name, and when the process is out of descriptors (Caddy's
// file systems stat by opening), closes the idle ones this cache holds and
// tries once more.
func (c *fileCache) stat(fsys fs.FS, name string) (fs.FileInfo, error) {
	info, err := fs.Stat(fsys, name)
	if err != nil && isTooManyFiles(err) {
		c.logger.Warn("out of file descriptors; closing idle cached files", zap.Error(err))
		c.shrinkIdleFiles()
		info, err = fs.Stat(fsys, name)
	}
	return info, err
}

// open opens name, and when the process is out of descriptors, closes the
// idle ones this cache holds and tries once more.
func (c *fileCache) open(fsys fs.FS, name string) (fs.File, error) {
	f, err := fsys.Open(name)
	if err != nil && isTooManyFiles(err) {
		c.logger.Warn("out of file descriptors; closing idle cached files", zap.Error(err))
		c.shrinkIdleFiles()
		f, err = fsys.Open(name)
	}
	return f, err
}

// isTooManyFiles reports whether err means the process or system is out of
// file descriptors.
func isTooManyFiles(err error) bool {
	return errors.Is(err, syscall.EMFILE) || errors.Is(err, syscall.ENFILE)
}

// settleTime is how long after its last modification a file is trusted to
// be completely written. A write to a file sets its modification time when
// it starts, before its bytes are copied, so a copy taken while a write
// runs can look just like the file after it (same size and time). As git
// does with racy timestamps, a file modified this recently is not copied
// into memory: it is read from its descriptor, which always gives the
// current bytes, until it has settled.
const settleTime = time.Second

// recentlyModified reports whether info was modified within settleTime of
// now (or in the future).
func recentlyModified(info fs.FileInfo) bool {
	return !info.ModTime().Before(time.Now().Add(-settleTime))
}

// readSmall reads a small regular file whole, if it fits the limits. It
// gives up if the file changes while it is read.
func (c *fileCache) readSmall(f *os.File, info fs.FileInfo) ([]byte, bool) {
	size := info.Size()
	if size > c.cfg.smallFileMax || size > c.cfg.maxMemory {
		return nil, false
	}
	data := make([]byte, size)
	if _, err := f.ReadAt(data, 0); err != nil && !(errors.Is(err, io.EOF) && size == 0) {
		return nil, false
	}
	after, err := f.Stat()
	if err != nil || !sameFile(info, after) {
		return nil, false
	}
	return data, true
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
		c.release(e)
		return e
	}
	if existing := c.entries[e.key]; existing != nil {
		c.lru.MoveToFront(existing.elem)
		c.mu.Unlock()
		c.release(e)
		return existing
	}
	var evicted []*cacheEntry
	if e.memSize > 0 && c.memBytes+e.memSize > c.cfg.maxMemory {
		evicted = c.evictMemoryLocked(e.memSize)
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

// drop releases the cache's reference to an entry it has unlisted.
func (c *fileCache) drop(e *cacheEntry) {
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

// shrinkIdleFiles closes every cached descriptor no request is reading.
func (c *fileCache) shrinkIdleFiles() {
	c.mu.Lock()
	var idle []*cacheEntry
	for el := c.lru.Back(); el != nil; {
		prev := el.Prev()
		if e := el.Value.(*cacheEntry); e.file != nil && e.refs.Load() == 1 {
			idle = append(idle, c.unlistLocked(e))
		}
		el = prev
	}
	c.mu.Unlock()
	c.dropAll(idle)
}

// sweep drops the entries not used since inactive before now.
func (c *fileCache) sweep(now time.Time) {
	cutoff := now.Add(-c.cfg.inactive).UnixNano()
	c.mu.Lock()
	var stale []*cacheEntry
	for el := c.lru.Back(); el != nil; {
		prev := el.Prev()
		if e := el.Value.(*cacheEntry); e.usedAt.Load() < cutoff {
			stale = append(stale, c.unlistLocked(e))
		}
		el = prev
	}
	c.mu.Unlock()
	c.dropAll(stale)
}

// sweepLoop sweeps a few times per inactive period until close.
func (c *fileCache) sweepLoop() {
	ticker := time.NewTicker(max(c.cfg.inactive/4, 100*time.Millisecond))
	defer ticker.Stop()
	for {
		select {
		case <-ticker.C:
			c.sweep(c.now())
		case <-c.stop:
			return
		}
	}
}

// close stops the sweeper and drops every entry; descriptors still being
// read are closed by the last request that reads them.
func (c *fileCache) close() {
	c.stopOnce.Do(func() { close(c.stop) })
	c.mu.Lock()
	c.closed = true
	all := make([]*cacheEntry, 0, c.lru.Len())
	for el := c.lru.Front(); el != nil; el = el.Next() {
		all = append(all, el.Value.(*cacheEntry))
	}
	for _, e := range all {
		c.unlistLocked(e)
	}
	c.mu.Unlock()
	for _, e := range all {
		c.drop(e)
	}
}

// Destruct closes the cache when the last config that uses it is gone
// (caddy.Destructor, for the usage pool).
func (c *fileCache) Destruct() error {
	c.close()
	return nil
}
