package fdcache

import (
	"container/list"
	"io/fs"
	"time"

	"go.uber.org/zap"
)

// Limits are the resolved, validated settings of a Cache.
type Limits struct {
	// MaxFiles bounds the entries listed.
	MaxFiles int
	// MaxMemory bounds the bytes of file content held; 0 holds none.
	MaxMemory int64
	// SmallFileMax is the largest file held in memory.
	SmallFileMax int64
	// Revalidate is how often an entry that is not watched is checked
	// with a stat.
	Revalidate time.Duration
	// Inactive is how long an entry is kept without use.
	Inactive time.Duration
	// NoEvents revalidates only, even where there are file system
	// events (as on a platform without them).
	NoEvents bool
}

// Options are what a Cache's owner gives it besides its limits.
type Options[M any] struct {
	// Describe makes the owner's metadata for a regular file, named name,
	// whenever an entry is made for it (at load, and for a file found
	// replaced when it was opened). It must not keep info's Sys.
	Describe func(name string, info fs.FileInfo) M
	// IsLocal reports whether a file system is the local one, whose
	// changes the kernel reports (nil: none is).
	IsLocal func(fs.FS) bool
	// Logger receives debug and warning logs (nil: none).
	Logger *zap.Logger
	// Metrics are the collectors the cache updates (nil: fresh ones).
	Metrics *Metrics
	// Now is the clock (nil: time.Now).
	Now func() time.Time
	// Dropped is called when an entry leaves the cache (evicted, idle,
	// found changed, or the cache closed), so that what the owner keeps
	// for it can go too (nil: nothing is).
	Dropped func(*Entry[M])
}

// New makes a cache and starts the goroutine that drops inactive entries;
// Close stops it. It opens no files: a watcher is started by the first
// lookup that needs it.
func New[M any](limits Limits, opts Options[M]) *Cache[M] {
	c := &Cache[M]{
		cfg:      limits,
		now:      opts.Now,
		logger:   opts.Logger,
		metrics:  opts.Metrics,
		describe: opts.Describe,
		isLocal:  opts.IsLocal,
		dropped:  opts.Dropped,
		entries:  make(map[key]*Entry[M]),
		lru:      list.New(),
		stop:     make(chan struct{}),
	}
	if c.now == nil {
		c.now = time.Now
	}
	if c.logger == nil {
		c.logger = zap.NewNop()
	}
	if c.metrics == nil {
		c.metrics = NewMetrics()
	}
	if c.isLocal == nil {
		c.isLocal = func(fs.FS) bool { return false }
	}
	go c.sweepLoop()
	return c
}
