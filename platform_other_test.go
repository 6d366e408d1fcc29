//go:build !unix

package h2file

import "errors"

// lowerOpenFileLimit reports that there is no open-file limit to lower here.
func lowerOpenFileLimit(int, bool) (func(), error) {
	return nil, errors.New("no RLIMIT_NOFILE on this platform")
}
