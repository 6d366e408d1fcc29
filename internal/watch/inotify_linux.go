//go:build linux

package watch

import (
	"bytes"
	"encoding/binary"
	"errors"
	"fmt"
	"io"
	"os"
	"syscall"
)

// inotifyBackend is a Backend on inotify. The descriptor is
// non-blocking and in Go's poller: lookups read it without waiting, the
// event loop waits on it.
type inotifyBackend struct {
	file *os.File
	rc   syscall.RawConn

	// what drain works with; drain is only called under the watcher's
	// drainMu. readQueued is bound once, so that a drain allocates nothing.
	buf        []byte
	events     []Event
	err        error
	readQueued func(fd uintptr)
}

// watchMask is what every watch reports: changes to names in a directory,
// and to the watched inode itself. Opens, reads and closes without
// writing are not reported.
const watchMask = syscall.IN_MODIFY | syscall.IN_ATTRIB | syscall.IN_CLOSE_WRITE |
	syscall.IN_MOVED_FROM | syscall.IN_MOVED_TO | syscall.IN_CREATE | syscall.IN_DELETE |
	syscall.IN_DELETE_SELF | syscall.IN_MOVE_SELF | syscall.IN_EXCL_UNLINK

// NewBackend opens an inotify instance.
func NewBackend() (Backend, error) {
	fd, err := syscall.InotifyInit1(syscall.IN_NONBLOCK | syscall.IN_CLOEXEC)
	if err != nil {
		return nil, fmt.Errorf("inotify_init1: %w", err)
	}
	f := os.NewFile(uintptr(fd), "inotify")
	rc, err := f.SyscallConn()
	if err != nil {
		f.Close()
		return nil, fmt.Errorf("inotify descriptor: %w", err)
	}
	b := &inotifyBackend{file: f, rc: rc, buf: make([]byte, 64<<10)}
	b.readQueued = b.readAll
	return b, nil
}

// Add watches path with watchMask.
func (b *inotifyBackend) Add(path string) (int32, error) {
	var (
		wd  int
		err error
	)
	if cerr := b.rc.Control(func(fd uintptr) { wd, err = syscall.InotifyAddWatch(int(fd), path, watchMask) }); cerr != nil {
		return -1, cerr
	}
	switch {
	case err == nil:
		return int32(wd), nil
	case errors.Is(err, syscall.ENOENT), errors.Is(err, syscall.ENOTDIR):
		return -1, ErrPathGone
	case errors.Is(err, syscall.ENOSPC):
		return -1, fmt.Errorf("inotify_add_watch %s: %w (fs.inotify.max_user_watches)", path, ErrWatchLimit)
	}
	return -1, fmt.Errorf("inotify_add_watch %s: %w", path, err)
}

// Remove stops watching wd.
func (b *inotifyBackend) Remove(wd int32) {
	_ = b.rc.Control(func(fd uintptr) { _, _ = syscall.InotifyRmWatch(int(fd), uint32(wd)) })
}

// Drain appends the events queued now to events, without blocking.
func (b *inotifyBackend) Drain(events []Event) ([]Event, error) {
	b.events, b.err = events, nil
	if err := b.rc.Control(b.readQueued); err != nil {
		return b.events, fmt.Errorf("inotify descriptor: %w", err)
	}
	events, err := b.events, b.err
	b.events, b.err = nil, nil
	return events, err
}

// readAll reads the queue until it is empty, into b.events and b.err.
func (b *inotifyBackend) readAll(fd uintptr) {
	for {
		n, err := syscall.Read(int(fd), b.buf)
		switch {
		case errors.Is(err, syscall.EINTR):
			continue
		case errors.Is(err, syscall.EAGAIN):
			return
		case err != nil:
			b.err = fmt.Errorf("reading inotify events: %w", err)
			return
		case n <= 0:
			b.err = fmt.Errorf("reading inotify events: %w", io.ErrUnexpectedEOF)
			return
		}
		b.events = parseInotify(b.buf[:n], b.events)
	}
}

// parseInotify appends each struct inotify_event in buf to events.
func parseInotify(buf []byte, events []Event) []Event {
	for len(buf) >= syscall.SizeofInotifyEvent {
		wd := int32(binary.NativeEndian.Uint32(buf[0:]))
		mask := binary.NativeEndian.Uint32(buf[4:])
		nameLen := int(binary.NativeEndian.Uint32(buf[12:]))
		buf = buf[syscall.SizeofInotifyEvent:]
		if nameLen > len(buf) {
			nameLen = len(buf)
		}
		name := buf[:nameLen]
		buf = buf[nameLen:]
		if i := bytes.IndexByte(name, 0); i >= 0 {
			name = name[:i]
		}
		events = append(events, Event{
			WD:       wd,
			Name:     string(name),
			Overflow: mask&syscall.IN_Q_OVERFLOW != 0,
			Ignored:  mask&(syscall.IN_IGNORED|syscall.IN_UNMOUNT) != 0,
		})
	}
	return events
}

// Wait calls fn whenever the descriptor is readable, until fn returns true.
func (b *inotifyBackend) Wait(fn func() bool) error {
	return b.rc.Read(func(uintptr) bool { return fn() })
}

// Close closes the inotify descriptor, removing every watch.
func (b *inotifyBackend) Close() error { return b.file.Close() }

// Local reports whether the directory is on a file system whose changes
// all go through this kernel, so that inotify reports them: not NFS, SMB,
// 9p, Ceph, FUSE (virtiofs included) and the like.
func (b *inotifyBackend) Local(path string) bool {
	var st syscall.Statfs_t
	if err := syscall.Statfs(path, &st); err != nil {
		return false
	}
	_, ok := localFileSystems[uint32(st.Type)] //nolint:gosec,unconvert // the magic numbers fit 32 bits; the type differs by port
	return ok
}

// localFileSystems are the file systems (statfs magic numbers) trusted to
// report every change.
var localFileSystems = map[uint32]string{
	0xEF53:     "ext2/3/4",
	0x58465342: "xfs",
	0x9123683E: "btrfs",
	0x01021994: "tmpfs",
	0x858458F6: "ramfs",
	0xF2F52010: "f2fs",
	0x2FC12FC1: "zfs",
	0xCA451A4E: "bcachefs",
	0x3153464A: "jfs",
	0x52654973: "reiserfs",
	0x3434:     "nilfs2",
	0x794C7630: "overlayfs",
	0x73717368: "squashfs",
	0xE0F5E1E2: "erofs",
	0x9660:     "iso9660",
	0x4D44:     "vfat",
	0x2011BAB0: "exfat",
	0x482B:     "hfsplus",
}
