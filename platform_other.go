//go:build !unix

package h2file

// openFileLimit returns 0: the open-file limit is unknown on this platform.
func openFileLimit() uint64 { return 0 }
