//go:build darwin || freebsd || netbsd

package fdcache

import "syscall"

// haveChangeTime is true: FileInfos carry the inode change time here.
const haveChangeTime = true

// fileIdentity returns the device, inode and change time of a FileInfo
// from os.Stat; false for FileInfos of other file systems.
func fileIdentity(sys any) (identity, bool) {
	st, ok := sys.(*syscall.Stat_t)
	if !ok {
		return identity{}, false
	}
	return identity{dev: uint64(st.Dev), ino: uint64(st.Ino), ctime: st.Ctimespec.Nano()}, true //nolint:unconvert // int32 on macOS
}
