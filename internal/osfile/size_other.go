//go:build !unix

package osfile

import "os"

// SizeNow returns the size of the open file f.
func SizeNow(f *os.File) (int64, bool) {
	info, err := f.Stat()
	if err != nil {
		return 0, false
	}
	return info.Size(), true
}
