// Package watch tells a cache, at once, when a path it has looked up may
// have changed: it follows the kernel's file system events (inotify on
// Linux) for every directory and file a path resolves through. It knows
// nothing of what the cache keeps: each cached path is a Sub, and a change
// marks the Subs that depend on it stale.
package watch

import (
	"errors"
	"fmt"
	"math"
	"os"
	"path/filepath"
	"strings"
	"sync"
	"sync/atomic"
	"time"

	"go.uber.org/zap"
	"go.uber.org/zap/zapcore"
)

// A Watcher keeps subscriptions honest with the kernel's file system events
// (inotify, see inotify_linux.go). For each watched Sub it watches every
// directory the kernel consults to resolve the Sub's path (each directory
// on the way, and for a symbolic link the directories its target goes
// through) and the file itself, and records which name in which directory
// the Sub depends on. An event on one of them marks the Subs that depend on
// it stale.
//
// The guarantee: the kernel queues an event before the system call that
// made the change returns, and every lookup first reads the queue (Sync)
// or makes sure that a read begun after a given instant did (SyncSince),
// so a lookup never gets a Sub that a change completed before it began
// (or before that instant) made stale. What is not reported (writes
// through a shared memory mapping, changes made by another machine to a
// network file system) is not covered; file systems where that is expected are not watched (see
// Backend.Local).
//
// Watches are bounded: a directory or file is watched while a Sub depends
// on it, and the watch is removed with the last such Sub.
type Watcher struct {
	backend Backend
	logger  *zap.Logger
	metrics *Metrics
	cwd     string // for relative paths; Caddy does not change it

	// drainMu serializes reading the kernel's queue and applying what was
	// read; drains counts the reads started, so that a lookup can tell
	// that one started after it arrived, and finished, while it waited.
	drainMu sync.Mutex
	drains  atomic.Uint64
	pending []Event // guarded by drainMu
	// syncedFrom is when the last read of the queue whose events are
	// applied began (monotonic nanoseconds since clockBase): SyncSince's
	// shortcut
	syncedFrom atomic.Int64

	mu     sync.Mutex
	root   *node
	byWd   map[int32][]*node // watched nodes by watch descriptor
	broken bool              // closed or failed: nothing is watched any more

	failed atomic.Bool   // set with broken, for lookups
	done   chan struct{} // closed when the event loop has returned
}

// Backend is the kernel side of a Watcher.
type Backend interface {
	// Add watches path, following a final symbolic link; ErrPathGone if
	// it does not exist, ErrWatchLimit if no more watches are allowed.
	Add(path string) (int32, error)
	// Remove stops watching wd.
	Remove(wd int32)
	// Drain appends every event queued now to events, without blocking.
	Drain(events []Event) ([]Event, error)
	// Wait calls fn whenever events may have been queued, until fn
	// returns true or the backend is closed.
	Wait(fn func() bool) error
	// Local reports whether every change to the directory path is
	// reported (it is on a local file system).
	Local(path string) bool
	// Close releases the backend; Wait returns.
	Close() error
}

// Event is one event: on the watched inode itself (Name ""), or on the
// entry Name in a watched directory.
type Event struct {
	WD       int32
	Name     string
	Overflow bool // events were lost: anything may have changed
	Ignored  bool // the kernel removed the watch (deleted, unmounted)
}

// Errors a Backend reports.
var (
	ErrPathGone   = errors.New("path does not exist")
	ErrWatchLimit = errors.New("watch limit reached")
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

// node is a path resolved without symbolic links: a directory, file or
// link, and what depends on it.
type node struct {
	name     string // last component; "" for the root
	path     string
	kind     nodeKind
	link     string // target of a symbolic link
	parent   *node
	children map[string]*node
	wd       int32 // -1 if not watched (links, and devices etc.)
	// deps are the Subs that depend on a name in this directory, or on
	// the node itself (key "")
	deps     map[string]map[*Sub]struct{}
	detached bool
}

// New starts watching with the platform's backend; an error means there
// are no events here.
func New(logger *zap.Logger, metrics *Metrics) (*Watcher, error) {
	cwd, err := os.Getwd()
	if err != nil {
		return nil, fmt.Errorf("file system watcher: %w", err)
	}
	b, err := NewBackend()
	if err != nil {
		return nil, err
	}
	w := NewWithBackend(b, logger, metrics, cwd)
	w.Start()
	return w, nil
}

// NewWithBackend makes a watcher on b, resolving relative paths against
// cwd, whose event loop is not running yet: Start or StartIdle starts it.
func NewWithBackend(b Backend, logger *zap.Logger, metrics *Metrics, cwd string) *Watcher {
	w := &Watcher{
		backend: b,
		logger:  logger,
		metrics: metrics,
		cwd:     cwd,
		root:    &node{path: "/", wd: -1},
		byWd:    make(map[int32][]*node),
		done:    make(chan struct{}),
	}
	w.syncedFrom.Store(math.MinInt64) // no read yet
	return w
}

// Start runs the event loop, which applies events as they are queued.
func (w *Watcher) Start() { go w.loop() }

// StartIdle runs an event loop that only waits for Close: events are
// applied by Sync alone, so that a test sees what lookups guarantee
// without help from the loop.
func (w *Watcher) StartIdle() {
	go func() {
		defer close(w.done)
		_ = w.backend.Wait(w.failed.Load)
	}()
}

// Failed reports whether the watcher has stopped watching (closed, or
// its backend failed): what it watched is stale, and lookups must
// revalidate by stat.
func (w *Watcher) Failed() bool { return w.failed.Load() }

// loop applies events as they are queued, so that the queue does not fill
// up between lookups, until the watcher is closed.
func (w *Watcher) loop() {
	defer close(w.done)
	err := w.backend.Wait(func() bool {
		w.Sync()
		return w.failed.Load()
	})
	if err != nil && !w.failed.Load() {
		w.mu.Lock()
		w.failLocked(err)
		w.mu.Unlock()
	}
}

// Sync applies every event the kernel has queued until now: when it
// returns, each entry a change completed before the call made stale is
// marked so.
func (w *Watcher) Sync() {
	arrived := w.drains.Load()
	w.drainMu.Lock()
	defer w.drainMu.Unlock()
	if w.drains.Load() != arrived {
		// a read of the queue began after this call did, and is done
		return
	}
	w.drains.Add(1)
	began := sinceClockBase()
	var err error
	w.pending, err = w.backend.Drain(w.pending[:0])
	if len(w.pending) > 0 || err != nil {
		w.mu.Lock()
		for _, ev := range w.pending {
			w.applyLocked(ev)
		}
		if err != nil && !w.broken {
			w.failLocked(err)
		}
		w.mu.Unlock()
	}
	w.syncedFrom.Store(began) // in order: drainMu is held
}

// SyncSince is Sync for a lookup as of t (a time.Now, with its monotonic
// reading: when the request's handler began): a read of the queue that
// began after t and whose events are applied has seen every change
// completed before t, and is enough. Lookups that run together, and the
// several lookups of one request (a file, its sidecar, an index file),
// share one read (a system call) instead of one each. Before a drain has
// begun strictly after t, or for a zero t, it is Sync.
func (w *Watcher) SyncSince(t time.Time) {
	if !t.IsZero() && w.syncedFrom.Load() > int64(t.Sub(clockBase)) {
		return
	}
	w.Sync()
}

// clockBase is the origin of the monotonic instants kept in syncedFrom.
var clockBase = time.Now()

// sinceClockBase is now, in monotonic nanoseconds since clockBase.
func sinceClockBase() int64 { return int64(time.Since(clockBase)) }

// applyLocked marks what an event changed stale, and forgets the nodes it
// may have replaced.
func (w *Watcher) applyLocked(ev Event) {
	if ev.Overflow {
		w.metrics.EventOverflows.Inc()
		if c := w.logger.Check(zapcore.DebugLevel, "file system event queue overflowed; dropping every cached entry"); c != nil {
			c.Write()
		}
		w.detachLocked(w.root)
		return
	}
	nodes := w.byWd[ev.WD]
	if len(nodes) == 0 {
		return
	}
	for _, n := range append([]*node(nil), nodes...) {
		if ev.Name == "" || ev.Ignored {
			w.detachLocked(n)
			continue
		}
		w.markLocked(n.deps[ev.Name])
		if child := n.children[ev.Name]; child != nil {
			w.detachLocked(child)
		}
	}
}

// markLocked marks entries stale.
func (w *Watcher) markLocked(entries map[*Sub]struct{}) {
	for e := range entries {
		if e.stale.CompareAndSwap(false, true) {
			w.metrics.EventDrops.Inc()
		}
	}
}

// detachLocked marks everything that depends on n or below it stale, and
// forgets those nodes (the root stays, empty).
func (w *Watcher) detachLocked(n *node) {
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
func (w *Watcher) forgetWatchLocked(n *node) {
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
			w.backend.Remove(n.wd)
		}
		w.metrics.Watches.Dec()
	} else {
		w.byWd[n.wd] = nodes
	}
	n.wd = -1
}

// failLocked stops watching: every watched entry is marked stale, so that
// it is loaded again, unwatched.
func (w *Watcher) failLocked(err error) {
	if c := w.logger.Check(zapcore.DebugLevel, "file system events failed; cached files are revalidated by stat"); c != nil {
		c.Write(zap.Error(err))
	}
	w.detachLocked(w.root)
	w.broken = true
	w.failed.Store(true)
}

// Close stops the event loop and removes every watch.
func (w *Watcher) Close() {
	w.mu.Lock()
	if !w.broken {
		w.detachLocked(w.root)
		w.broken = true
		w.failed.Store(true)
	}
	w.mu.Unlock()
	if err := w.backend.Close(); err != nil {
		w.logger.Debug("closing file system watcher", zap.Error(err))
	}
	<-w.done
}

// absPath makes a lookup's name absolute and clean.
func (w *Watcher) absPath(name string) string {
	if !filepath.IsAbs(name) {
		name = filepath.Join(w.cwd, name)
	}
	return filepath.Clean(name)
}

// splitPath splits a slash-separated path into its components.
func splitPath(p string) []string {
	return strings.FieldsFunc(filepath.ToSlash(p), func(r rune) bool { return r == '/' })
}
