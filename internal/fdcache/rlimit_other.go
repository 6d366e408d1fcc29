//go:build !unix

package fdcache

// OpenFileLimit returns 0: the open-file limit is unknown on this platform.
func OpenFileLimit() uint64 { return 0 }
