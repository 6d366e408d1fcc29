// Package h2 is h2file's HTTP/2 server engine: it serves HTTP/2 connections
// with an http.Handler, in place of Go's own server. It reads frames with
// golang.org/x/net/http2's Framer and HPACK decoder, builds each
// *http.Request exactly as x/net's server does (plus the request limits Go
// 1.27 added), and writes its frames itself. It knows nothing of Caddy or of
// files: a connection and a handler are all it is given.
package h2
