package h2file

import (
	"net/http"
	"strings"
	"sync"

	"github.com/caddyserver/caddy/v2/modules/caddyhttp"
	"github.com/caddyserver/caddy/v2/modules/caddyhttp/encode"
)

// Memos of pure functions a request calls with the same arguments again
// and again (the same paths, the same Accept-Encoding of one browser),
// each of which allocates: the answer is computed once per argument while
// it is in the memo, so it is what the function gives, only not made
// again.

// maxMemoEntries bounds a memo; when it is full it starts over.
// maxMemoKeyLen is the longest argument memoized. A memo holds well under
// a MiB whatever clients send (1024 keys and answers of at most about
// 256 bytes each), so that a config with many handlers, each with its
// memos, stays small under a flood of unique paths.
const (
	maxMemoEntries = 1024
	maxMemoKeyLen  = 256
)

// boundedMemo memoizes a pure function of K; its zero value is empty.
type boundedMemo[K comparable, V any] struct {
	mu sync.RWMutex
	m  map[K]V
}

// get returns compute(key), from the memo when key is in it.
func (m *boundedMemo[K, V]) get(key K, compute func(K) V) V {
	m.mu.RLock()
	v, ok := m.m[key]
	m.mu.RUnlock()
	if ok {
		return v
	}
	v = compute(key)
	m.mu.Lock()
	if m.m == nil || len(m.m) >= maxMemoEntries {
		m.m = make(map[K]V)
	}
	m.m[key] = v
	m.mu.Unlock()
	return v
}

func (m *boundedMemo[K, V]) len() int {
	m.mu.RLock()
	defer m.mu.RUnlock()
	return len(m.m)
}

// requestMemos are a handler's memos.
type requestMemos struct {
	joins    boundedMemo[stringPair, string]  // root, request path: the file's name
	sidecars boundedMemo[stringPair, string]  // file name, suffix: the sidecar's
	accepted boundedMemo[acceptKey, []string] // Accept-Encoding: the encodings, best first
	etags    boundedMemo[stringPair, string]  // ETag, coding: a compressed variant's ETag
}

type stringPair struct{ a, b string }

type acceptKey struct {
	header string
	order  *[]string // the preference it is parsed with (the handler's PrecompressedOrder or its compressor's), which does not change
}

// join returns caddyhttp.SanitizedPathJoin(root, reqPath). A nil memo (a
// handler not provisioned) memoizes nothing.
func (m *requestMemos) join(root, reqPath string) string {
	if m == nil || len(root)+len(reqPath) > maxMemoKeyLen {
		return caddyhttp.SanitizedPathJoin(root, reqPath)
	}
	return m.joins.get(stringPair{root, reqPath}, sanitizedPathJoin)
}

func sanitizedPathJoin(k stringPair) string { return caddyhttp.SanitizedPathJoin(k.a, k.b) }

// sidecarName returns filename + suffix.
func (m *requestMemos) sidecarName(filename, suffix string) string {
	if m == nil || len(filename)+len(suffix) > maxMemoKeyLen {
		return filename + suffix
	}
	return m.sidecars.get(stringPair{filename, suffix}, concat)
}

func concat(k stringPair) string { return k.a + k.b }

// variantETag returns the ETag of the variant in coding of a file whose
// strong ETag is etag: what encode makes of it.
func (m *requestMemos) variantETag(etag, coding string) string {
	if m == nil || len(etag)+len(coding) > maxMemoKeyLen {
		return variantETagOf(stringPair{etag, coding})
	}
	return m.etags.get(stringPair{etag, coding}, variantETagOf)
}

func variantETagOf(k stringPair) string { return strings.TrimSuffix(k.a, `"`) + "-" + k.b + `"` }

// acceptedEncodings returns encode.AcceptedEncodings(r, *order): the
// memo's answer is shared, for reading only. It memoizes requests with
// one Accept-Encoding field and no Sec-WebSocket-Key, the only other
// field AcceptedEncodings reads.
func (m *requestMemos) acceptedEncodings(r *http.Request, order *[]string) []string {
	values := r.Header["Accept-Encoding"]
	if m == nil || len(values) != 1 || len(values[0]) > maxMemoKeyLen || len(r.Header["Sec-Websocket-Key"]) != 0 {
		return encode.AcceptedEncodings(r, *order)
	}
	return m.accepted.get(acceptKey{values[0], order}, acceptedEncodingsOf)
}

func acceptedEncodingsOf(k acceptKey) []string {
	r := &http.Request{Header: http.Header{"Accept-Encoding": {k.header}}}
	return encode.AcceptedEncodings(r, *k.order)
}
