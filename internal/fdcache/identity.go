package fdcache

import "io/fs"

// SameFile reports whether two FileInfos describe the same, unchanged file:
// the same size, modification time and mode and, where the platform tells
// (see fileIdentity), the same device, inode and inode change time. The
// change time is what a rewrite that restores the modification time, a
// file deleted and re-created on a reused inode, or an unpacked archive
// with normalised times cannot hide: every write, utime, chmod, rename
// and link sets it.
func SameFile(a, b fs.FileInfo) bool {
	if a.Size() != b.Size() || !a.ModTime().Equal(b.ModTime()) || a.Mode() != b.Mode() {
		return false
	}
	ia, okA := fileIdentity(a.Sys())
	ib, okB := fileIdentity(b.Sys())
	return okA == okB && ia == ib
}

// identity is what the platform knows of a file beyond its FileInfo.
type identity struct {
	dev, ino uint64
	ctime    int64 // inode change time, Unix nanoseconds
}
