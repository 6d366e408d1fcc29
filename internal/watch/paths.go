package watch

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

// Watch makes s depend on everything the path name resolves through,
// adding watches as needed. Call it before the path is looked at, so that a
// change after the call marks s stale and one before it is in what the
// caller sees. When it returns, s is watched (Watched), or it could not be
// (a watch limit, a directory that cannot be read, a file system that does
// not report every change) and the caller must revalidate by stat instead.
func (w *Watcher) Watch(s *Sub, name string) {
	abs := w.absPath(name)
	w.mu.Lock()
	defer w.mu.Unlock()
	if w.broken {
		return
	}
	err := w.walkLocked(s, abs)
	if err == nil {
		s.watcher = w
		return
	}
	w.releaseLocked(s)
	w.metrics.Unwatched.Inc()
	if c := w.logger.Check(zapcore.DebugLevel, "cannot watch file; it is revalidated by stat"); c != nil {
		c.Write(zap.String("filename", name), zap.Error(err))
	}
}

// walkLocked resolves abs component by component as the kernel does,
// registering s's dependency on each name in each directory before the
// name is looked at.
func (w *Watcher) walkLocked(s *Sub, abs string) error {
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
			w.dependLocked(s, dir, "")
			if dir.parent != nil {
				dir = dir.parent
			}
			continue
		}
		w.dependLocked(s, dir, c)
		child, err := w.childLocked(dir, c)
		if errors.Is(err, ErrPathGone) {
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
				w.dependLocked(s, child, "")
			}
			// a file in the middle of the path: not a directory, and
			// replacing it is an event on dir
			return nil
		}
	}
	w.dependLocked(s, dir, "")
	return nil
}

// watchRootLocked watches the root directory if it is not watched.
func (w *Watcher) watchRootLocked() error {
	if w.root.wd >= 0 {
		return nil
	}
	if !w.backend.Local(w.root.path) {
		return errNotLocal
	}
	wd, err := w.backend.Add(w.root.path)
	if err != nil {
		return err
	}
	w.addWdLocked(w.root, wd)
	return nil
}

// childLocked returns the node for name in dir, making it (and its watch)
// from an lstat if there is none.
func (w *Watcher) childLocked(dir *node, name string) (*node, error) {
	if n := dir.children[name]; n != nil {
		return n, nil
	}
	p := filepath.Join(dir.path, name)
	info, err := os.Lstat(p)
	if err != nil {
		if errors.Is(err, fs.ErrNotExist) || errors.Is(err, syscall.ENOTDIR) {
			return nil, ErrPathGone
		}
		return nil, err
	}
	n := &node{name: name, path: p, parent: dir, wd: -1}
	switch {
	case info.Mode()&fs.ModeSymlink != 0:
		n.kind = nodeLink
		if n.link, err = os.Readlink(p); err != nil {
			return nil, err
		}
	case info.IsDir():
		n.kind = nodeDir
		if !w.backend.Local(p) {
			return nil, errNotLocal
		}
	case info.Mode().IsRegular():
		n.kind = nodeFile
	default:
		n.kind = nodeOther
	}
	if n.kind == nodeDir || n.kind == nodeFile {
		wd, err := w.backend.Add(p)
		if err != nil {
			return nil, err
		}
		w.addWdLocked(n, wd)
	}
	if dir.children == nil {
		dir.children = make(map[string]*node)
	}
	dir.children[name] = n
	return n, nil
}

// addWdLocked records that n is watched as wd.
func (w *Watcher) addWdLocked(n *node, wd int32) {
	n.wd = wd
	if len(w.byWd[wd]) == 0 {
		w.metrics.Watches.Inc()
	}
	w.byWd[wd] = append(w.byWd[wd], n)
}

// dependLocked records that s depends on key in n.
func (w *Watcher) dependLocked(s *Sub, n *node, key string) {
	if n.deps == nil {
		n.deps = make(map[string]map[*Sub]struct{})
	}
	set := n.deps[key]
	if set == nil {
		set = make(map[*Sub]struct{})
		n.deps[key] = set
	}
	set[s] = struct{}{}
	s.deps = append(s.deps, dep{node: n, key: key})
}

// releaseLocked drops s's dependencies, and the watches nothing needs any
// more.
func (w *Watcher) releaseLocked(s *Sub) {
	for _, d := range s.deps {
		if set := d.node.deps[d.key]; set != nil {
			delete(set, s)
			if len(set) == 0 {
				delete(d.node.deps, d.key)
			}
		}
	}
	for _, d := range s.deps {
		w.pruneLocked(d.node)
	}
	s.deps = nil
}

// pruneLocked forgets n and its ancestors while nothing depends on them.
func (w *Watcher) pruneLocked(n *node) {
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
