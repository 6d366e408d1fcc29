//go:build go1.27 && !http2legacy

package h2

// refGo127 is true when x/net's http2.Server.ServeConn, the reference of the
// differential tests, is Go 1.27's own server (net/http/internal/http2),
// which x/net v0.60 wraps when built with Go 1.27.
const refGo127 = true
