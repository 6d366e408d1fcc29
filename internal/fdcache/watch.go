package fdcache

import (
	"io/fs"

	"go.uber.org/zap"
	"go.uber.org/zap/zapcore"

	"github.com/h2file/caddy-h2file/internal/watch"
)

// watcherFor returns the watcher for lookups in fsys, starting it on first
// use, or nil where changes are seen by revalidation only.
func (c *Cache[M]) watcherFor(fsys fs.FS) *watch.Watcher {
	if c.cfg.NoEvents || !c.isLocal(fsys) {
		return nil
	}
	if w := c.watcher.Load(); w != nil {
		if w.Failed() {
			return nil
		}
		return w
	}
	c.mu.Lock()
	defer c.mu.Unlock()
	if c.closed || c.noWatch {
		return nil
	}
	if w := c.watcher.Load(); w != nil {
		return w
	}
	w, err := watch.New(c.logger, c.metrics.Watch)
	if err != nil {
		c.noWatch = true
		c.metrics.Watch.Unwatched.Inc()
		if ce := c.logger.Check(zapcore.DebugLevel, "no file system events; cached files are revalidated by stat"); ce != nil {
			ce.Write(zap.Error(err))
		}
		return nil
	}
	c.watcher.Store(w)
	return w
}
