package fdcache

import "time"

// shrinkIdleFiles closes every cached descriptor no request is reading.
func (c *Cache[M]) shrinkIdleFiles() {
	c.mu.Lock()
	var idle []*Entry[M]
	for el := c.lru.Back(); el != nil; {
		prev := el.Prev()
		if e := el.Value.(*Entry[M]); e.file != nil && e.refs.Load() == 1 {
			idle = append(idle, c.unlistLocked(e))
		}
		el = prev
	}
	c.mu.Unlock()
	c.dropAll(idle)
}

// sweep drops the entries not used since inactive before now.
func (c *Cache[M]) sweep(now time.Time) {
	cutoff := now.Add(-c.cfg.Inactive).UnixNano()
	c.mu.Lock()
	var stale []*Entry[M]
	for el := c.lru.Back(); el != nil; {
		prev := el.Prev()
		if e := el.Value.(*Entry[M]); e.usedAt.Load() < cutoff {
			stale = append(stale, c.unlistLocked(e))
		}
		el = prev
	}
	c.mu.Unlock()
	c.dropAll(stale)
}

// sweepLoop sweeps a few times per inactive period until close.
func (c *Cache[M]) sweepLoop() {
	ticker := time.NewTicker(max(c.cfg.Inactive/4, 100*time.Millisecond))
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

// Close stops the sweeper and the watcher and drops every entry;
// descriptors still being read are closed by the last request that reads
// them.
func (c *Cache[M]) Close() {
	c.stopOnce.Do(func() { close(c.stop) })
	c.mu.Lock()
	c.closed = true
	all := make([]*Entry[M], 0, c.lru.Len())
	for el := c.lru.Front(); el != nil; el = el.Next() {
		all = append(all, el.Value.(*Entry[M]))
	}
	for _, e := range all {
		c.unlistLocked(e)
	}
	c.mu.Unlock()
	for _, e := range all {
		c.drop(e)
	}
	if w := c.watcher.Load(); w != nil {
		w.Close()
	}
}

// Destruct closes the cache when the last config that uses it is gone
// (caddy.Destructor, for the usage pool).
func (c *Cache[M]) Destruct() error {
	c.Close()
	return nil
}
