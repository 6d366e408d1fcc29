package fdcache

import (
	"bytes"
	"errors"
	"fmt"
	"io"
	"io/fs"
	"os"
	"syscall"
	"time"

	"go.uber.org/zap"
)

// load fills e, which has only its key, from the file system. It returns
// false with the error for errors not worth remembering (anything but a
// missing path).
func (c *Cache[M]) load(fsys fs.FS, e *Entry[M]) (bool, error) {
	name := e.key.name
	info, err := c.stat(fsys, name)
	if err != nil {
		if errors.Is(err, fs.ErrNotExist) {
			e.err = err
			return true, err
		}
		return false, err
	}
	e.info = info
	if !info.Mode().IsRegular() {
		// directories are only stat'ed; devices, pipes and sockets are
		// never held open
		return true, nil
	}

	f, err := c.open(fsys, name)
	if err != nil {
		// not cacheable now (e.g. out of descriptors or no permission):
		// the caller opens it the uncached way and gets its own error
		c.listNot(e)
		return true, nil
	}
	osFile, ok := f.(*os.File)
	if !ok {
		f.Close()
		c.listNot(e)
		return true, nil
	}
	// describe the file that is open, not the path, which may have been
	// replaced since the stat
	if info, err = osFile.Stat(); err != nil || !info.Mode().IsRegular() {
		osFile.Close()
		return false, fmt.Errorf("stat of opened file %s: %w", name, err)
	}
	e.info = info
	e.meta = c.describeFile(name, info)
	e.owner = c

	e.recentlyModified = RecentlyModified(info)
	if !e.recentlyModified {
		if data, ok := c.readSmall(osFile, info); ok {
			osFile.Close()
			e.data = data
			e.memSize = int64(len(data))
			e.racy.Store(racyChange(info))
			return true, nil
		}
	}
	e.file = osFile
	c.metrics.OpenFiles.Inc()
	return true, nil
}

// listNot marks e, a regular file the cache could not open now, as not
// kept: requests open it themselves.
func (c *Cache[M]) listNot(e *Entry[M]) {
	e.unlisted = true
	e.meta = c.describeFile(e.key.name, e.info)
}

// describeFile returns the owner's metadata for a regular file.
func (c *Cache[M]) describeFile(name string, info fs.FileInfo) M {
	if c.describe == nil {
		var none M
		return none
	}
	return c.describe(name, info)
}

// stat stats name, and when the process is out of descriptors (Caddy's
// file systems stat by opening), closes the idle ones this cache holds and
// tries once more.
func (c *Cache[M]) stat(fsys fs.FS, name string) (fs.FileInfo, error) {
	info, err := fs.Stat(fsys, name)
	if err != nil && IsTooManyFiles(err) {
		c.logger.Warn("out of file descriptors; closing idle cached files", zap.Error(err))
		c.shrinkIdleFiles()
		info, err = fs.Stat(fsys, name)
	}
	return info, err
}

// open opens name, and when the process is out of descriptors, closes the
// idle ones this cache holds and tries once more.
func (c *Cache[M]) open(fsys fs.FS, name string) (fs.File, error) {
	f, err := fsys.Open(name)
	if err != nil && IsTooManyFiles(err) {
		c.logger.Warn("out of file descriptors; closing idle cached files", zap.Error(err))
		c.shrinkIdleFiles()
		f, err = fsys.Open(name)
	}
	return f, err
}

// IsTooManyFiles reports whether err means the process or system is out of
// file descriptors.
func IsTooManyFiles(err error) bool {
	return errors.Is(err, syscall.EMFILE) || errors.Is(err, syscall.ENFILE)
}

// settleTime is how long after its last modification a file is trusted to
// be completely written. A write to a file sets its modification time when
// it starts, before its bytes are copied, so a copy taken while a write
// runs can look just like the file after it (same size and time). As git
// does with racy timestamps, a file modified this recently is not copied
// into memory: it is read from its descriptor, which always gives the
// current bytes, until it has settled.
const settleTime = time.Second

// RecentlyModified reports whether info was modified within settleTime of
// now (or in the future).
func RecentlyModified(info fs.FileInfo) bool {
	return !info.ModTime().Before(time.Now().Add(-settleTime))
}

// racyChange reports whether info cannot tell a later change from the file
// as it is now: the platform keeps no change time, or the change time is so
// recent that another change could fall in the same tick of the kernel's
// coarse clock and leave size and times as they are.
func racyChange(info fs.FileInfo) bool {
	id, ok := fileIdentity(info.Sys())
	return !haveChangeTime || !ok || id.ctime >= time.Now().Add(-settleTime).UnixNano()
}

// sameContent reports whether the path still holds e's content in memory,
// by reading it again; once the change time has settled, e is no longer
// racy.
func (c *Cache[M]) sameContent(fsys fs.FS, e *Entry[M]) bool {
	f, err := c.open(fsys, e.key.name)
	if err != nil {
		return false
	}
	defer f.Close()
	info, err := f.Stat()
	if err != nil || !SameFile(e.info, info) {
		return false
	}
	buf := make([]byte, len(e.data)+1)
	n, err := io.ReadFull(f, buf)
	if (err != nil && !errors.Is(err, io.ErrUnexpectedEOF) && !errors.Is(err, io.EOF)) || !bytes.Equal(buf[:n], e.data) {
		return false
	}
	if !racyChange(info) {
		e.racy.Store(false)
	}
	return true
}

// readSmall reads a small regular file whole, if it fits the limits. It
// gives up if the file changes while it is read.
func (c *Cache[M]) readSmall(f *os.File, info fs.FileInfo) ([]byte, bool) {
	size := info.Size()
	if size > c.cfg.SmallFileMax || size > c.cfg.MaxMemory {
		return nil, false
	}
	data := make([]byte, size)
	if _, err := f.ReadAt(data, 0); err != nil && !(errors.Is(err, io.EOF) && size == 0) {
		return nil, false
	}
	after, err := f.Stat()
	if err != nil || !SameFile(info, after) {
		return nil, false
	}
	return data, true
}
