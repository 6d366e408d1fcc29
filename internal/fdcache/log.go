package fdcache

import (
	"io/fs"
	"time"

	"go.uber.org/zap"
	"go.uber.org/zap/zapcore"
)

// What LookupLogged reports a lookup decided (the "result" field).
const (
	ResultHit         = "hit"                 // answered from the cache
	ResultRevalidated = "revalidated"         // answered from the cache after a stat confirmed it
	ResultReloaded    = "reloaded"            // the cached entry was dropped (its file changed) and loaded again
	ResultEventDrop   = "dropped by an event" // a file system event said the path changed; loaded again
	ResultMiss        = "miss"                // not cached; loaded from the file system
	ResultNotKept     = "not kept"            // loaded, but not cacheable now: the request opens the file itself
)

// LookupLogged is LookupSince, also writing what the cache decided to the
// checked debug entry ce. It runs only with debug logging on, so the
// lookups of the hot path pay nothing for it. What it reports is the
// cache's state as this request saw it: a concurrent request may have
// loaded or revalidated the entry meanwhile.
func (c *Cache[M]) LookupLogged(ce *zapcore.CheckedEntry, since time.Time, fsys fs.FS, fsName, name string) (*Entry[M], error) {
	c.mu.Lock()
	before := c.entries[key{fs: fsName, name: name}]
	c.mu.Unlock()
	var checkedBefore int64
	if before != nil {
		checkedBefore = before.checkedAt.Load()
	}

	e, err := c.LookupSince(since, fsys, fsName, name)

	result := ResultMiss
	switch {
	case e != nil && e.unlisted:
		result = ResultNotKept
	case before == nil:
	case e != before && before.sub.Stale():
		result = ResultEventDrop
	case e != before:
		result = ResultReloaded
	case e.checkedAt.Load() != checkedBefore:
		result = ResultRevalidated
	default:
		result = ResultHit
	}
	ce.Write(zap.String("filename", name), zap.String("result", result), zap.Error(err))
	return e, err
}
