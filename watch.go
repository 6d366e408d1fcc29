package h2file

import (
	"errors"
	"io/fs"
	"os"
	"path/filepath"
	"strings"
	"sync"
	"sync/atomic"

	"github.com/caddyserver/caddy/v2"
	"go.uber.org/zap"
	"go.uber.org/zap/zapcore"
)

// A dirWatcher keeps cache entries honest with the kernel's file system
// events (inotify, see watch_linux.go). For each watched entry it watches
// every directory the kernel consults to resolve the entry's path (each
// directory on the way, and for a symbolic link the directories its target
// goes through) and the file itself, and records which name in which
// directory the entry depends on. An event on one of them marks the
// entries that depend on it stale.
//
// The guarantee: the kernel queues an event before the system call that
// made the change returns, and every lookup first reads the queue (sync),
// so a request that begins after a change completed never gets an entry
// the change made stale. What is not reported (writes through a shared
// memory mapping, changes made by another machine to a network file
// system) is not covered; file systems where that is expected are not
// watched (see localFileSystem).
//
// Watches are bounded: a directory or file is watched while an entry
// depends on it, and the watch is removed with the last such entry.
type dirWatcher struct {
	backend watchBackend
	logger  *zap.Logger
	metrics *cacheMetrics
	cwd     string // for relative paths; Caddy does not change it

	// drainMu serializes reading the kernel's queue and applying what was
	// read; drains counts the reads started, so that a lookup can tell
	// that one started after it arrived, and finished, while it waited.
	drainMu sync.Mutex
	drains  atomic.Uint64
	pending []watchEvent // guarded by drainMu

	mu     sync.Mutex
	root   *watchNode
	byWd   map[int32][]*watchNode // watched nodes by watch descriptor
	broken bool                   // closed or failed: nothing is watched any more

	failed atomic.Bool   // set with broken, for lookups
	done   chan struct{} // closed when the event loop has returned
}

// watchBackend is the kernel side of a dirWatcher.
type watchBackend interface {
	// add watches path, following a final symbolic link; errPathGone if
	// it does not exist, errWatchLimit if no more watches are allowed.
	add(path string) (int32, error)
	// remove stops watching wd.
	remove(wd int32)
	// drain appends every event queued now to events, without blocking.
	drain(events []watchEvent) ([]watchEvent, error)
	// wait calls fn whenever events may have been queued, until fn
	// returns true or the backend is closed.
	wait(fn func() bool) error
	// local reports whether every change to the directory path is
	// reported (it is on a local file system).
	local(path string) bool
	close() error
}

// watchEvent is one event: on the watched inode itself (name ""), or on the
// entry name in a watched directory.
type watchEvent struct {
	wd       int32
	name     string
	overflow bool // events were lost: anything may have changed
	ignored  bool // the kernel removed the watch (deleted, unmounted)
}

var (
	errPathGone   = errors.New("path does not exist")
	errWatchLimit = errors.New("watch limit reached")
	errNotLocal   = errors.New("file system does not report every change")
	errLinkLoop   = errors.New("too many levels of symbolic links")
)

// nodeKind is what a path was when its node was made; a change to it is a
// change in its parent directory, which drops the node.
type nodeKind uint8

const (
	nodeDir nodeKind = iota
	nodeFile
	nodeLink
	nodeOther
)

// watchNode is a path resolved without symbolic links: a directory, file
// or link, and what depends on it.
type watchNode struct {
	name     string // last component; "" for the root
	path     string
	kind     nodeKind
	link     string // target of a symbolic link
	parent   *watchNode
	children map[string]*watchNode
	wd       int32 // -1 if not watched (links, and devices etc.)
	// deps are the entries that depend on a name in this directory, or
	// on the node itself (key "")
	deps     map[string]map[*cacheEntry]struct{}
	detached bool
}

// watchDep is one dependency of an entry.
type watchDep struct {
	node *watchNode
	key  string
}

// fileEventsDisabled turns file system events off for caches created
// afterwards, as on a platform without them (for tests).
var fileEventsDisabled atomic.Bool

// caddyLocalFS is Caddy's default file system: the local disk.
var caddyLocalFS, _ = (&caddy.Context{}).FileSystems().Get("")

// isCaddyLocalFS reports whether fsys is Caddy's default file system.
func isCaddyLocalFS(fsys fs.FS) bool { return fsys == caddyLocalFS }

// newDirWatcher starts watching with the platform's backend; an error means
// there are no events here.
func newDirWatcher(logger *zap.Logger, metrics *cacheMetrics) (*dirWatcher, error) {
	cwd, err := os.Getwd()
	if err != nil {
		return nil, err
	}
	b, err := newWatchBackend()
	if err != nil {
		return nil, err
	}
	w := newDirWatcherWith(b, logger, metrics, cwd)
	go w.loop()
	return w, nil
}

// newDirWatcherWith makes a watcher on b whose event loop the caller starts
// (it must close done when it returns).
func newDirWatcherWith(b watchBackend, logger *zap.Logger, metrics *cacheMetrics, cwd string) *dirWatcher {
	return &dirWatcher{
		backend: b,
		logger:  logger,
		metrics: metrics,
		cwd:     cwd,
		root:    &watchNode{path: "/", wd: -1},
		byWd:    make(map[int32][]*watchNode),
		done:    make(chan struct{}),
	}
}

// watcherFor returns the watcher for lookups in fsys, starting it on first
// use, or nil where changes are seen by revalidation only.
func (c *fileCache) watcherFor(fsys fs.FS) *dirWatcher {
	if c.cfg.noEvents || !c.isLocal(fsys) {
		return nil
	}
	if w := c.watcher.Load(); w != nil {
		if w.failed.Load() {
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
	w, err := newDirWatcher(c.logger, c.metrics)
	if err != nil {
		c.noWatch = true
		c.metrics.unwatched.Inc()
		if ce := c.logger.Check(zapcore.DebugLevel, "no file system events; cached files are revalidated by stat"); ce != nil {
			ce.Write(zap.Error(err))
		}
		return nil
	}
	c.watcher.Store(w)
	return w
}

// unwatch releases e's watches, if it has any.
func (c *fileCache) unwatch(e *cacheEntry) {
	if e.watcher != nil {
		e.watcher.unwatch(e)
	}
}

// loop applies events as they are queued, so that the queue does not fill
// up between lookups, until the watcher is closed.
func (w *dirWatcher) loop() {
	defer close(w.done)
	err := w.backend.wait(func() bool {
		w.sync()
		return w.failed.Load()
	})
	if err != nil && !w.failed.Load() {
		w.mu.Lock()
		w.failLocked(err)
		w.mu.Unlock()
	}
}

// sync applies every event the kernel has queued until now: when it
// returns, each entry a change completed before the call made stale is
// marked so.
func (w *dirWatcher) sync() {
	arrived := w.drains.Load()
	w.drainMu.Lock()
	defer w.drainMu.Unlock()
	if w.drains.Load() != arrived {
		// a read of the queue began after this call did, and is done
		return
	}
	w.drains.Add(1)
	var err error
	w.pending, err = w.backend.drain(w.pending[:0])
	if len(w.pending) == 0 && err == nil {
		return
	}
	w.mu.Lock()
	defer w.mu.Unlock()
	for _, ev := range w.pending {
		w.applyLocked(ev)
	}
	if err != nil && !w.broken {
		w.failLocked(err)
	}
}

// applyLocked marks what an event changed stale, and forgets the nodes it
// may have replaced.
func (w *dirWatcher) applyLocked(ev watchEvent) {
	if ev.overflow {
		w.metrics.eventOverflows.Inc()
		if c := w.logger.Check(zapcore.DebugLevel, "file system event queue overflowed; dropping every cached entry"); c != nil {
			c.Write()
		}
		w.detachLocked(w.root)
		return
	}
	nodes := w.byWd[ev.wd]
	if len(nodes) == 0 {
		return
	}
	for _, n := range append([]*watchNode(nil), nodes...) {
		if ev.name == "" || ev.ignored {
			w.detachLocked(n)
			continue
		}
		w.markLocked(n.deps[ev.name])
		if child := n.children[ev.name]; child != nil {
			w.detachLocked(child)
		}
	}
}

// markLocked marks entries stale.
func (w *dirWatcher) markLocked(entries map[*cacheEntry]struct{}) {
	for e := range entries {
		if e.stale.CompareAndSwap(false, true) {
			w.metrics.eventDrops.Inc()
		}
	}
}

// detachLocked marks everything that depends on n or below it stale, and
// forgets those nodes (the root stays, empty).
func (w *dirWatcher) detachLocked(n *watchNode) {
	for _, child := range n.children {
		w.detachLocked(child)
	}
	for _, entries := range n.deps {
		w.markLocked(entries)
	}
	w.forgetWatchLocked(n)
	n.children = nil
	if n == w.root {
		n.deps = nil
		return
	}
	if n.parent != nil && n.parent.children[n.name] == n {
		delete(n.parent.children, n.name)
	}
	n.detached = true
}

// forgetWatchLocked takes n out of byWd, and removes the kernel's watch
// when no other node (the same inode by another path) uses it.
func (w *dirWatcher) forgetWatchLocked(n *watchNode) {
	if n.wd < 0 {
		return
	}
	nodes := w.byWd[n.wd]
	for i, other := range nodes {
		if other == n {
			nodes = append(nodes[:i:i], nodes[i+1:]...)
			break
		}
	}
	if len(nodes) == 0 {
		delete(w.byWd, n.wd)
		if !w.broken {
			w.backend.remove(n.wd)
		}
		w.metrics.watches.Dec()
	} else {
		w.byWd[n.wd] = nodes
	}
	n.wd = -1
}

// failLocked stops watching: every watched entry is marked stale, so that
// it is loaded again, unwatched.
func (w *dirWatcher) failLocked(err error) {
	if c := w.logger.Check(zapcore.DebugLevel, "file system events failed; cached files are revalidated by stat"); c != nil {
		c.Write(zap.Error(err))
	}
	w.detachLocked(w.root)
	w.broken = true
	w.failed.Store(true)
}

// close stops the event loop and removes every watch.
func (w *dirWatcher) close() {
	w.mu.Lock()
	if !w.broken {
		w.detachLocked(w.root)
		w.broken = true
		w.failed.Store(true)
	}
	w.mu.Unlock()
	if err := w.backend.close(); err != nil {
		w.logger.Debug("closing file system watcher", zap.Error(err))
	}
	<-w.done
}

// absPath makes a lookup's name absolute and clean.
func (w *dirWatcher) absPath(name string) string {
	if !filepath.IsAbs(name) {
		name = filepath.Join(w.cwd, name)
	}
	return filepath.Clean(name)
}

// splitPath splits a slash-separated path into its components.
func splitPath(p string) []string {
	return strings.FieldsFunc(filepath.ToSlash(p), func(r rune) bool { return r == '/' })
}
