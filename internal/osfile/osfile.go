// Package osfile asks the kernel about open files without allocating, for
// the hot paths that read them.
package osfile
