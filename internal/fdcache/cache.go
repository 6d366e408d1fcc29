// Package fdcache is the open-file cache: what requests learn about
// paths (the FileInfo of files and directories, that a path does not exist,
// and for regular files an open descriptor or, for small files, the whole
// content), kept fresh by file system events (package watch) or by
// revalidation. It knows nothing of HTTP: what else it keeps about a file
// (an ETag, a Content-Type, header strings) is its owner's metadata M, made
// by the Describe hook whenever an entry is made for a file.
package fdcache

import (
	"container/list"
	"errors"
	"io/fs"
	"os"
	"sync"
	"sync/atomic"
	"time"

	"go.uber.org/zap"

	"github.com/h2file/caddy-h2file/internal/watch"
)

// Cache remembers what lookups learn about paths: the FileInfo of files and
// directories, that a path does not exist, and for regular files an open
// descriptor (read with ReadAt, so one descriptor serves any number of
// concurrent requests) or, for small files, the whole content.
//
// Entries are bounded in number (least recently used first out) and in
// memory, and dropped after Inactive without use. A descriptor is closed
// only when no request reads from it any more.
//
// Entries are kept fresh in one of two ways. Where the file system reports
// changes (package watch: inotify, on Linux, for the file systems
// Options.IsLocal accepts), every lookup first applies the events the
// kernel has queued (by the instant LookupSince is given), and an entry
// whose path, file or any directory on the way changed is dropped before
// it is used: a request never gets what a change that completed before it
// began (its handler, for LookupSince) has replaced. Elsewhere, and for
// entries that could not be watched, an entry is checked again with one
// stat at most every Revalidate interval (and a descriptor-backed one with
// an fstat on every use), so changes are seen within Revalidate.
type Cache[M any] struct {
	cfg      Limits
	now      func() time.Time
	logger   *zap.Logger
	metrics  *Metrics
	describe func(name string, info fs.FileInfo) M

	// isLocal reports whether a file system is the local one whose
	// changes a watcher sees.
	isLocal func(fs.FS) bool
	// dropped is the owner's hook for an entry that leaves (nil: none)
	dropped func(*Entry[M])
	watcher atomic.Pointer[watch.Watcher] // started by the first watched lookup
	// generation counts config loads that use this cache; an entry
	// confirmed under an older one is checked again before it is used
	generation atomic.Uint64

	mu       sync.Mutex
	entries  map[key]*Entry[M]
	lru      *list.List // of *Entry[M], most recent first
	memBytes int64      // bytes of file content held, guarded by mu
	closed   bool       // no more entries are listed, guarded by mu
	noWatch  bool       // starting a watcher failed, guarded by mu

	stop     chan struct{}
	stopOnce sync.Once
}

// key identifies a path in one file system.
type key struct {
	fs   string
	name string
}

// Entry is what the cache knows about one path. Its metadata and FileInfo
// never change; a change to the file makes a new entry.
type Entry[M any] struct {
	key  key
	info fs.FileInfo // nil for a missing path
	err  error       // fs.ErrNotExist for a missing path
	meta M           // the owner's, for a regular file

	owner *Cache[M] // the cache whose descriptor count file is in
	file  *os.File  // open regular file; nil if data holds it or not cached
	data  []byte    // whole content of a small file

	// refs counts the cache's own reference while the entry is listed,
	// plus one per request reading file. The file is closed at zero.
	refs atomic.Int32

	checkedAt  atomic.Int64  // UnixNano of the last stat that confirmed the entry
	checkedGen atomic.Uint64 // the cache's generation at that stat
	usedAt     atomic.Int64  // UnixNano of the last lookup

	// sub is the entry's path as the watcher follows it: watched, it
	// reports every change to the path, and is stale once one happened.
	sub watch.Sub

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

// Lookup returns the entry for name in fsys (named fsName). A regular
// file's entry comes with an open file or its content. The error is the one
// fs.Stat gives.
func (c *Cache[M]) Lookup(fsys fs.FS, fsName, name string) (*Entry[M], error) {
	return c.LookupSince(time.Time{}, fsys, fsName, name)
}

// LookupSince is Lookup as of since (a time.Now taken when the request's
// handler began; zero: now): the entry reflects every change to the file
// that completed before then, as Lookup's reflects those completed before
// the call, and lookups that run together share one read of the file
// system's events.
func (c *Cache[M]) LookupSince(since time.Time, fsys fs.FS, fsName, name string) (*Entry[M], error) {
	k := key{fs: fsName, name: name}
	w := c.watcherFor(fsys)
	if w != nil {
		// everything the kernel had queued at since: the changes that
		// completed before it
		w.SyncSince(since)
	}
	now := c.now().UnixNano()

	c.mu.Lock()
	e := c.entries[k]
	if e != nil {
		c.lru.MoveToFront(e.elem)
	}
	c.mu.Unlock()

	if e != nil && e.sub.Stale() {
		c.remove(e)
		e = nil
	}
	if e != nil && !e.sub.Watched() && e.file != nil && !e.fileUnchanged() {
		// rewritten in place: headers from the entry would not match the
		// bytes read from its descriptor
		c.remove(e)
		e = nil
	}
	if e != nil {
		e.usedAt.Store(now)
		if !c.needsCheck(e, now) {
			c.metrics.Hits.Inc()
			return e, e.err
		}
		gen := c.generation.Load()
		if c.revalidate(fsys, e) {
			e.checkedAt.Store(c.now().UnixNano())
			e.checkedGen.Store(gen)
			c.metrics.Hits.Inc()
			return e, e.err
		}
		c.remove(e)
	}

	c.metrics.Misses.Inc()
	e = &Entry[M]{key: k}
	e.checkedGen.Store(c.generation.Load())
	if w != nil {
		// watched before it is loaded: a change after this point marks
		// the entry stale, one before it is in what load sees
		w.Watch(&e.sub, name)
	}
	keep, err := c.load(fsys, e)
	if !keep || e.unlisted {
		e.sub.Release()
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
func (c *Cache[M]) needsCheck(e *Entry[M], now int64) bool {
	if e.checkedGen.Load() != c.generation.Load() {
		return true
	}
	if e.sub.Watched() && !e.recentlyModified {
		return false
	}
	return now-e.checkedAt.Load() >= int64(c.cfg.Revalidate)
}

// fileUnchanged reports whether e's open file still has the size,
// modification time and mode of e.info, with one fstat. Files held open are
// larger than small_file_max, so this costs little next to sending them; it
// keeps a file rewritten in place from going out under its old headers.
func (e *Entry[M]) fileUnchanged() bool {
	info, err := e.file.Stat()
	return err == nil && SameFile(e.info, info)
}

// revalidate reports whether e still describes its path: the same file
// (device, inode and change time where the platform has them), size,
// modification time and mode, or still missing.
func (c *Cache[M]) revalidate(fsys fs.FS, e *Entry[M]) bool {
	c.metrics.Revalidations.Inc()
	info, err := c.stat(fsys, e.key.name)
	if IsTooManyFiles(err) {
		// no news about the file; what the cache has is still the best
		return true
	}
	if e.info == nil {
		return errors.Is(err, fs.ErrNotExist)
	}
	// a file too recently modified to be copied into memory is loaded
	// again, so that it is copied once it has settled
	if err != nil || !SameFile(e.info, info) || e.recentlyModified {
		return false
	}
	return !e.racy.Load() || c.sameContent(fsys, e)
}

// insert lists e, or returns the entry another request listed for the same
// key meanwhile. It evicts to stay within the limits.
func (c *Cache[M]) insert(e *Entry[M]) *Entry[M] {
	e.refs.Store(1)
	c.mu.Lock()
	if c.closed {
		// requests of a config being unloaded still run: serve them,
		// but keep nothing
		c.mu.Unlock()
		e.sub.Release()
		c.release(e)
		return e
	}
	if e.sub.Stale() {
		// changed while it was loaded: serve this request (which began
		// before the change completed), keep nothing
		c.mu.Unlock()
		e.sub.Release()
		c.release(e)
		return e
	}
	if existing := c.entries[e.key]; existing != nil && !existing.sub.Stale() {
		c.lru.MoveToFront(existing.elem)
		c.mu.Unlock()
		e.sub.Release()
		c.release(e)
		return existing
	}
	var evicted []*Entry[M]
	if existing := c.entries[e.key]; existing != nil {
		evicted = append(evicted, c.unlistLocked(existing))
	}
	if e.memSize > 0 && c.memBytes+e.memSize > c.cfg.MaxMemory {
		evicted = append(evicted, c.evictMemoryLocked(e.memSize)...)
	}
	c.entries[e.key] = e
	e.elem = c.lru.PushFront(e)
	c.memBytes += e.memSize
	for c.lru.Len() > c.cfg.MaxFiles {
		evicted = append(evicted, c.unlistLocked(c.lru.Back().Value.(*Entry[M])))
	}
	c.mu.Unlock()

	c.metrics.Entries.Inc()
	c.metrics.MemoryBytes.Add(float64(e.memSize))
	c.dropAll(evicted)
	return e
}

// evictMemoryLocked unlists the least recently used in-memory entries until
// need more bytes fit in the budget. Their memory is freed by the garbage
// collector once no request uses it.
func (c *Cache[M]) evictMemoryLocked(need int64) []*Entry[M] {
	var evicted []*Entry[M]
	for el := c.lru.Back(); el != nil && c.memBytes+need > c.cfg.MaxMemory; {
		prev := el.Prev()
		if old := el.Value.(*Entry[M]); old.memSize > 0 {
			evicted = append(evicted, c.unlistLocked(old))
		}
		el = prev
	}
	return evicted
}

// dropAll releases the cache's reference to entries it has unlisted, and
// counts them as evictions.
func (c *Cache[M]) dropAll(entries []*Entry[M]) {
	for _, e := range entries {
		c.metrics.Evictions.Inc()
		c.drop(e)
	}
}

// drop releases the cache's reference to an entry it has unlisted, and
// its watches.
func (c *Cache[M]) drop(e *Entry[M]) {
	if c.dropped != nil {
		c.dropped(e)
	}
	e.sub.Release()
	c.metrics.Entries.Dec()
	c.metrics.MemoryBytes.Sub(float64(e.memSize))
	c.release(e)
}

// unlistLocked takes e out of the map and the LRU list. The caller drops
// the cache's reference with release, outside the lock.
func (c *Cache[M]) unlistLocked(e *Entry[M]) *Entry[M] {
	if c.entries[e.key] == e {
		delete(c.entries, e.key)
	}
	c.lru.Remove(e.elem)
	e.elem = nil
	c.memBytes -= e.memSize
	return e
}

// remove drops e from the cache, if it is still listed.
func (c *Cache[M]) remove(e *Entry[M]) {
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
func (e *Entry[M]) acquire() bool {
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
func (c *Cache[M]) release(e *Entry[M]) {
	if e.refs.Add(-1) == 0 && e.file != nil {
		e.file.Close()
		c.metrics.OpenFiles.Dec()
	}
}
