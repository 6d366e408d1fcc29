package integration

import (
	"io/fs"
	"strconv"

	_ "github.com/caddyserver/caddy/v2/modules/standard"

	_ "github.com/h2file/caddy-h2file"
)

// What h2file documents, as the suites expect it.
const (
	// defaultSmallFileMax is the cache's default small_file_max: files up
	// to it are held in memory.
	defaultSmallFileMax = 256 << 10
	// minBackoff and maxBackoff bound the Retry-After of a 503 for lack
	// of descriptors, in seconds, as file_server's.
	minBackoff, maxBackoff = 2, 5
)

// goServerWrappers are the listener wrappers README documents as the
// fallback to the engine, Go's HTTP/2 server with coalesce on both sides
// of tls (the recommendation before the engine).
func goServerWrappers() []any {
	return []any{map[string]any{"wrapper": "coalesce"}, map[string]any{"wrapper": "tls"}, map[string]any{"wrapper": "coalesce"}}
}

// engineWrappers are the listener wrappers README and Caddyfile.example
// recommend: coalesce below tls, h2file's HTTP/2 engine right after it.
func engineWrappers() []any {
	return []any{map[string]any{"wrapper": "coalesce"}, map[string]any{"wrapper": "tls"}, map[string]any{"wrapper": "h2_engine"}}
}

// fileServerETag is file_server's ETag for a file (its modification time
// in nanoseconds and its size, both in base 36), computed independently of
// h2file's.
func fileServerETag(info fs.FileInfo) string {
	return `"` + strconv.FormatInt(info.ModTime().UnixNano(), 36) + "-" + strconv.FormatInt(info.Size(), 36) + `"`
}
