//go:build unix

package h2file

import "syscall"

// openFileLimit returns the soft limit on open files of this process, or 0
// if it cannot be read.
func openFileLimit() uint64 {
	var rl syscall.Rlimit
	if err := syscall.Getrlimit(syscall.RLIMIT_NOFILE, &rl); err != nil {
		return 0
	}
	return rl.Cur
}

// sameInode reports whether two FileInfos from os.Stat name the same file
// (device and inode). FileInfos of other file systems compare as the same.
func sameInode(a, b any) bool {
	sa, okA := a.(*syscall.Stat_t)
	sb, okB := b.(*syscall.Stat_t)
	if okA != okB {
		return false
	}
	return !okA || (sa.Dev == sb.Dev && sa.Ino == sb.Ino)
}
