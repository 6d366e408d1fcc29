package h2file

import (
	"bytes"
	"errors"
	"fmt"
	"io"
	"io/fs"
	"mime"
	"os"
	"path/filepath"
	"syscall"
	"time"

	"go.uber.org/zap"
)

// load fills e, which has only its key, from the file system. It returns
// false with the error for errors not worth remembering (anything but a
// missing path).
func (c *fileCache) load(fsys fs.FS, e *cacheEntry) (bool, error) {
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
		// the caller opens it the uncached way and gets file_server's error
		e.unlisted = true
		return true, nil
	}
	osFile, ok := f.(*os.File)
	if !ok {
		f.Close()
		e.unlisted = true
		return true, nil
	}
	// describe the file that is open, not the path, which may have been
	// replaced since the stat
	if info, err = osFile.Stat(); err != nil || !info.Mode().IsRegular() {
		osFile.Close()
		return false, fmt.Errorf("stat of opened file %s: %w", name, err)
	}
	e.info = info
	e.etag = calculateEtag(info)
	e.headerValues = headerValuesFor(info)
	e.contentType = mime.TypeByExtension(filepath.Ext(name))

	e.recentlyModified = recentlyModified(info)
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
	c.metrics.openFiles.Inc()
	return true, nil
}

// stat stats name, and when the process is out of descriptors (Caddy's
// file systems stat by opening), closes the idle ones this cache holds and
// tries once more.
func (c *fileCache) stat(fsys fs.FS, name string) (fs.FileInfo, error) {
	info, err := fs.Stat(fsys, name)
	if err != nil && isTooManyFiles(err) {
		c.logger.Warn("out of file descriptors; closing idle cached files", zap.Error(err))
		c.shrinkIdleFiles()
		info, err = fs.Stat(fsys, name)
	}
	return info, err
}

// open opens name, and when the process is out of descriptors, closes the
// idle ones this cache holds and tries once more.
func (c *fileCache) open(fsys fs.FS, name string) (fs.File, error) {
	f, err := fsys.Open(name)
	if err != nil && isTooManyFiles(err) {
		c.logger.Warn("out of file descriptors; closing idle cached files", zap.Error(err))
		c.shrinkIdleFiles()
		f, err = fsys.Open(name)
	}
	return f, err
}

// isTooManyFiles reports whether err means the process or system is out of
// file descriptors.
func isTooManyFiles(err error) bool {
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

// recentlyModified reports whether info was modified within settleTime of
// now (or in the future).
func recentlyModified(info fs.FileInfo) bool {
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
func (c *fileCache) sameContent(fsys fs.FS, e *cacheEntry) bool {
	f, err := c.open(fsys, e.key.name)
	if err != nil {
		return false
	}
	defer f.Close()
	info, err := f.Stat()
	if err != nil || !sameFile(e.info, info) {
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
func (c *fileCache) readSmall(f *os.File, info fs.FileInfo) ([]byte, bool) {
	size := info.Size()
	if size > c.cfg.smallFileMax || size > c.cfg.maxMemory {
		return nil, false
	}
	data := make([]byte, size)
	if _, err := f.ReadAt(data, 0); err != nil && !(errors.Is(err, io.EOF) && size == 0) {
		return nil, false
	}
	after, err := f.Stat()
	if err != nil || !sameFile(info, after) {
		return nil, false
	}
	return data, true
}
