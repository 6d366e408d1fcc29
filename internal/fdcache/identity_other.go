//go:build !linux && !darwin && !freebsd && !netbsd && !openbsd && !dragonfly && !solaris

package fdcache

// haveChangeTime is false: FileInfos carry no inode change time here
// (Windows, AIX, Plan 9, WebAssembly), so a rewrite that keeps size and
// modification time cannot be told from the FileInfo, and content held in
// memory is read again at every revalidation.
const haveChangeTime = false

// fileIdentity reports nothing: size, modification time and mode decide.
func fileIdentity(any) (identity, bool) { return identity{}, false }
