//go:build !unix

package h2file

// openFileLimit returns 0: the open-file limit is unknown on this platform.
func openFileLimit() uint64 { return 0 }

// sameInode reports true: file identity is unknown on this platform, so
// size, modification time and mode decide.
func sameInode(a, b any) bool { return true }
