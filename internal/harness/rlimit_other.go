//go:build !unix

package harness

import "errors"

// LowerOpenFileLimit reports that there is no open-file limit to lower here.
func LowerOpenFileLimit(int, bool) (func(), error) {
	return nil, errors.New("no RLIMIT_NOFILE on this platform")
}
