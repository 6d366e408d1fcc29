package h2file

import (
	"io/fs"

	"go.uber.org/zap"
	"go.uber.org/zap/zapcore"
)

// Cache decisions, as logged at debug level for each lookup.
const (
	cacheHit         = "hit"         // answered from the cache
	cacheRevalidated = "revalidated" // answered from the cache after a stat confirmed it
	cacheReloaded    = "reloaded"    // the cached entry was dropped (its file changed) and loaded again
	cacheMiss        = "miss"        // not cached; loaded from the file system
	cacheNotKept     = "not kept"    // loaded, but not cacheable now: the request opens the file itself
)

// lookupLogged is lookup, also writing what the cache decided to the
// checked debug entry ce. It runs only with debug logging on, so the
// lookups of the hot path pay nothing for it. What it reports is the
// cache's state as this request saw it: a concurrent request may have
// loaded or revalidated the entry meanwhile.
func (c *fileCache) lookupLogged(ce *zapcore.CheckedEntry, fsys fs.FS, fsName, name string) (*cacheEntry, error) {
	c.mu.Lock()
	before := c.entries[cacheKey{fs: fsName, name: name}]
	c.mu.Unlock()
	var checkedBefore int64
	if before != nil {
		checkedBefore = before.checkedAt.Load()
	}

	e, err := c.lookup(fsys, fsName, name)

	result := cacheMiss
	switch {
	case e != nil && e.unlisted:
		result = cacheNotKept
	case before == nil:
	case e != before:
		result = cacheReloaded
	case e.checkedAt.Load() != checkedBefore:
		result = cacheRevalidated
	default:
		result = cacheHit
	}
	ce.Write(zap.String("filename", name), zap.String("result", result), zap.Error(err))
	return e, err
}
