package h2

import "net/url"

// requestStorage is memory a stream holds for its request, so that the
// request's URL and header values cost no allocation of their own in the
// common case: the URL of a path parseRequestPath reads, and the values
// of up to len(values) header fields. The request may outlive its stream
// (a handler may keep it); what it points to here stays theirs, since
// streams are not reused.
type requestStorage struct {
	url    url.URL
	values [16]string
}

// parseRequestPath is url.ParseRequestURI(path), with the URL in dst when
// path is of the common shape: "/" and path characters that need neither
// unescaping nor escaping, then optionally "?" and a non-empty query of
// visible ASCII characters. Any other path is parsed by
// url.ParseRequestURI into a URL of its own.
func parseRequestPath(path string, dst *url.URL) (*url.URL, error) {
	if p, q, ok := commonRequestPath(path); ok {
		*dst = url.URL{Path: p, RawQuery: q}
		return dst, nil
	}
	return url.ParseRequestURI(path)
}

// commonRequestPath splits path into its path and query if it is of the
// shape parseRequestPath reads itself.
func commonRequestPath(path string) (p, q string, ok bool) {
	if path == "" || path[0] != '/' {
		return "", "", false
	}
	i := 1
	for ; i < len(path) && path[i] != '?'; i++ {
		if !isPlainPathByte(path[i]) {
			return "", "", false
		}
	}
	if i == len(path) {
		return path, "", true
	}
	q = path[i+1:]
	if q == "" {
		return "", "", false // "/a?": url.URL.ForceQuery
	}
	for j := 0; j < len(q); j++ {
		if q[j] <= ' ' || q[j] >= 0x7f {
			return "", "", false
		}
	}
	return path[:i], q, true
}

// isPlainPathByte reports whether c stands for itself in a URL path, the
// bytes net/url neither unescapes nor escapes there (its shouldEscape
// with encodePath): so that Path is the path as sent and RawPath empty.
func isPlainPathByte(c byte) bool {
	switch {
	case 'a' <= c && c <= 'z', 'A' <= c && c <= 'Z', '0' <= c && c <= '9':
		return true
	}
	switch c {
	case '-', '_', '.', '~', '$', '&', '+', ',', '/', ':', ';', '=', '@':
		return true
	}
	return false
}
