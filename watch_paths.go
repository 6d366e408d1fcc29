package h2file

import (
	"errors"
	"io/fs"
	"os"
	"path/filepath"
	"syscall"

	"go.uber.org/zap"
	"go.uber.org/zap/zapcore"
)

// maxLinkHops is how many symbolic links a path may go through, as the
// kernel's limit (ELOOP).
const maxLinkHops = 40

// watch makes e depend on everything its path resolves through, adding
// watches as needed, before e is loaded. It sets e.watcher when e is
// watched; an entry that cannot be (a watch limit, a directory that cannot
// be read, a file system that does not report every change) is revalidated
// by stat instead.
func (w *dirWatcher) watch(e *cacheEntry) {
	abs := w.absPath(e.key.name)
	w.mu.Lock()
	defer w.mu.Unlock()
	if w.broken {
		return
	}
	err := w.walkLocked(e, abs)
	if err == nil {
		e.watcher = w
		return
	}
	w.releaseLocked(e)
	w.metrics.unwatched.Inc()
	if c := w.logger.Check(zapcore.DebugLevel, "cannot watch file; it is revalidated by stat"); c != nil {
		c.Write(zap.String("filename", e.key.name), zap.Error(err))
	}
}

// walkLocked resolves abs component by component as the kernel does,
// registering e's dependency on each name in each directory before the
// name is looked at.
func (w *dirWatcher) walkLocked(e *cacheEntry, abs string) error {
	if err := w.watchRootLocked(); err != nil {
		return err
	}
	dir := w.root
	rest := splitPath(abs)
	hops := 0
	for len(rest) > 0 {
		c := rest[0]
		rest = rest[1:]
		switch c {
		case ".":
			continue
		case "..":
			// the directory cannot move without an event on itself
			w.dependLocked(e, dir, "")
			if dir.parent != nil {
				dir = dir.parent
			}
			continue
		}
		w.dependLocked(e, dir, c)
		child, err := w.childLocked(dir, c)
		if errors.Is(err, errPathGone) {
			// missing: its creation is an event on dir
			return nil
		}
		if err != nil {
			return err
		}
		switch child.kind {
		case nodeDir:
			dir = child
		case nodeLink:
			if hops++; hops > maxLinkHops {
				return errLinkLoop
			}
			target := splitPath(child.link)
			if filepath.IsAbs(child.link) {
				dir = w.root
			}
			rest = append(target, rest...)
		default:
			if len(rest) == 0 {
				w.dependLocked(e, child, "")
			}
			// a file in the middle of the path: not a directory, and
			// replacing it is an event on dir
			return nil
		}
	}
	w.dependLocked(e, dir, "")
	return nil
}

// watchRootLocked watches the root directory if it is not watched.
func (w *dirWatcher) watchRootLocked() error {
	if w.root.wd >= 0 {
		return nil
	}
	if !w.backend.local(w.root.path) {
		return errNotLocal
	}
	wd, err := w.backend.add(w.root.path)
	if err != nil {
		return err
	}
	w.addWdLocked(w.root, wd)
	return nil
}

// childLocked returns the node for name in dir, making it (and its watch)
// from an lstat if there is none.
func (w *dirWatcher) childLocked(dir *watchNode, name string) (*watchNode, error) {
	if n := dir.children[name]; n != nil {
		return n, nil
	}
	p := filepath.Join(dir.path, name)
	info, err := os.Lstat(p)
	if err != nil {
		if errors.Is(err, fs.ErrNotExist) || errors.Is(err, syscall.ENOTDIR) {
			return nil, errPathGone
		}
		return nil, err
	}
	n := &watchNode{name: name, path: p, parent: dir, wd: -1}
	switch {
	case info.Mode()&fs.ModeSymlink != 0:
		n.kind = nodeLink
		if n.link, err = os.Readlink(p); err != nil {
			return nil, err
		}
	case info.IsDir():
		n.kind = nodeDir
		if !w.backend.local(p) {
			return nil, errNotLocal
		}
	case info.Mode().IsRegular():
		n.kind = nodeFile
	default:
		n.kind = nodeOther
	}
	if n.kind == nodeDir || n.kind == nodeFile {
		wd, err := w.backend.add(p)
		if err != nil {
			return nil, err
		}
		w.addWdLocked(n, wd)
	}
	if dir.children == nil {
		dir.children = make(map[string]*watchNode)
	}
	dir.children[name] = n
	return n, nil
}

// addWdLocked records that n is watched as wd.
func (w *dirWatcher) addWdLocked(n *watchNode, wd int32) {
	n.wd = wd
	if len(w.byWd[wd]) == 0 {
		w.metrics.watches.Inc()
	}
	w.byWd[wd] = append(w.byWd[wd], n)
}

// dependLocked records that e depends on key in n.
func (w *dirWatcher) dependLocked(e *cacheEntry, n *watchNode, key string) {
	if n.deps == nil {
		n.deps = make(map[string]map[*cacheEntry]struct{})
	}
	set := n.deps[key]
	if set == nil {
		set = make(map[*cacheEntry]struct{})
		n.deps[key] = set
	}
	set[e] = struct{}{}
	e.deps = append(e.deps, watchDep{node: n, key: key})
}

// unwatch releases e's dependencies, and the watches nothing needs any
// more.
func (w *dirWatcher) unwatch(e *cacheEntry) {
	w.mu.Lock()
	w.releaseLocked(e)
	w.mu.Unlock()
}

func (w *dirWatcher) releaseLocked(e *cacheEntry) {
	for _, d := range e.deps {
		if set := d.node.deps[d.key]; set != nil {
			delete(set, e)
			if len(set) == 0 {
				delete(d.node.deps, d.key)
			}
		}
	}
	for _, d := range e.deps {
		w.pruneLocked(d.node)
	}
	e.deps = nil
}

// pruneLocked forgets n and its ancestors while nothing depends on them.
func (w *dirWatcher) pruneLocked(n *watchNode) {
	for n != nil && !n.detached && len(n.deps) == 0 && len(n.children) == 0 {
		w.forgetWatchLocked(n)
		if n == w.root {
			return
		}
		delete(n.parent.children, n.name)
		n.detached = true
		n = n.parent
	}
}
