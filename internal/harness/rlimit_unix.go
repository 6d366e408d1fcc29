//go:build unix

package harness

import "syscall"

// LowerOpenFileLimit sets this process's soft limit on open files (and the
// hard one too, for good, if hard) to n, and returns what restores the soft
// limit. Rlimit's fields are uint64 on Linux and macOS and int64 on the BSDs.
func LowerOpenFileLimit(n int, hard bool) (restore func(), err error) {
	var orig syscall.Rlimit
	if err := syscall.Getrlimit(syscall.RLIMIT_NOFILE, &orig); err != nil {
		return nil, err
	}
	lowered := orig
	lowered.Cur = asRlim(lowered.Cur, n)
	if hard {
		lowered.Max = lowered.Cur
	}
	if err := syscall.Setrlimit(syscall.RLIMIT_NOFILE, &lowered); err != nil {
		return nil, err
	}
	return func() { _ = syscall.Setrlimit(syscall.RLIMIT_NOFILE, &orig) }, nil
}

// asRlim converts n to the type of an Rlimit field like like.
func asRlim[T int64 | uint64](like T, n int) T { return T(n) }
