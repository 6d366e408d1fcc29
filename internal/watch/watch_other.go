//go:build !linux

package watch

import "errors"

// NewBackend reports that this platform has no file system events the
// cache uses: changes are seen by revalidation (within revalidate). The
// BSDs' and macOS's kqueue needs a descriptor per watched file, and
// Windows' change notifications cannot be read synchronously on lookup.
func NewBackend() (Backend, error) {
	return nil, errors.New("no file system events on this platform")
}
