//go:build unix

package fdcache

import "syscall"

// OpenFileLimit returns the soft limit on open files of this process, or 0
// if it cannot be read. Rlimit's fields are uint64 on Linux and macOS and
// int64 on the BSDs; RLIM_INFINITY is positive in both.
func OpenFileLimit() uint64 {
	var rl syscall.Rlimit
	if err := syscall.Getrlimit(syscall.RLIMIT_NOFILE, &rl); err != nil {
		return 0
	}
	if rl.Cur < 0 { //nolint:staticcheck // int64 on the BSDs
		return 0
	}
	return uint64(rl.Cur) //nolint:unconvert // int64 on the BSDs
}
