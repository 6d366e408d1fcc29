//go:build !go1.27 || http2legacy

package h2

// refGo127 is false when x/net's http2.Server.ServeConn, the reference of the
// differential tests, is x/net v0.60's own server (built with Go 1.26, or
// with the http2legacy tag).
const refGo127 = false
