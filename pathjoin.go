package h2file

import (
	"sync"

	"github.com/caddyserver/caddy/v2/modules/caddyhttp"
)

// maxJoinsCached bounds a handler's memo of path joins; when it is full
// it starts over. maxJoinedLen is the longest root plus request path
// memoized: the memo holds at most a few MiB, whatever paths clients ask.
const (
	maxJoinsCached = 4096
	maxJoinedLen   = 512
)

// joinMemo memoizes caddyhttp.SanitizedPathJoin, a pure function of its two
// strings, which allocates three or four objects per call: every path is
// still what Caddy's sanitising join made of it, computed once per root
// and request path while they are in the memo.
type joinMemo struct {
	mu     sync.RWMutex
	joined map[joinKey]string
}

type joinKey struct{ root, reqPath string }

// join returns caddyhttp.SanitizedPathJoin(root, reqPath). A nil memo
// (a handler not provisioned) memoizes nothing.
func (m *joinMemo) join(root, reqPath string) string {
	if m == nil || len(root)+len(reqPath) > maxJoinedLen {
		return caddyhttp.SanitizedPathJoin(root, reqPath)
	}
	key := joinKey{root, reqPath}
	m.mu.RLock()
	joined, ok := m.joined[key]
	m.mu.RUnlock()
	if ok {
		return joined
	}
	joined = caddyhttp.SanitizedPathJoin(root, reqPath)
	m.mu.Lock()
	if m.joined == nil || len(m.joined) >= maxJoinsCached {
		m.joined = make(map[joinKey]string)
	}
	m.joined[key] = joined
	m.mu.Unlock()
	return joined
}
