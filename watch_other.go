//go:build !linux

package h2file

import "errors"

// newWatchBackend reports that this platform has no file system events the
// cache uses: changes are seen by revalidation (within revalidate). The
// BSDs' and macOS's kqueue needs a descriptor per watched file, and
// Windows' change notifications cannot be read synchronously on lookup.
func newWatchBackend() (watchBackend, error) {
	return nil, errors.New("no file system events on this platform")
}
