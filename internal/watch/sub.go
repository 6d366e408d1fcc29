package watch

import "sync/atomic"

// Sub is one watched path, as its owner (a cache entry) embeds it: the
// directories and files its path resolves through, and whether a change to
// any of them has been seen since Watch. The zero Sub is unwatched.
type Sub struct {
	// watcher is set by Watch when the path is watched; deps are the
	// nodes it depends on (guarded by watcher.mu).
	watcher *Watcher
	deps    []dep
	stale   atomic.Bool
}

// dep is one dependency of a Sub: the name key in the directory node
// (key "" for the node itself).
type dep struct {
	node *node
	key  string
}

// Watched reports whether a Watcher reports every change to s's path.
// Until Release, the answer does not change.
func (s *Sub) Watched() bool { return s.watcher != nil }

// Stale reports whether a change to s's path has been seen.
func (s *Sub) Stale() bool { return s.stale.Load() }

// Release drops s's watches (those nothing else needs are removed). It is
// a no-op for an unwatched Sub, and s must not be watched again.
func (s *Sub) Release() {
	if w := s.watcher; w != nil {
		w.mu.Lock()
		w.releaseLocked(s)
		w.mu.Unlock()
	}
}
