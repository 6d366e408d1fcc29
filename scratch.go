package h2file

import "github.com/h2file/caddy-h2file/internal/send"

// responseScratch is the state one response of ServeHTTP needs, in one
// allocation instead of three: the header values it sets, the body it
// sends (openBody fills it, for the file or its sidecar) and the writer
// that sends it. It is not pooled: a handler down the chain, or a
// ResponseWriter wrapper, may keep a reference past ServeHTTP.
type responseScratch struct {
	vals    send.HeaderValues
	body    responseBody
	writer  send.WriterStorage
	variant send.Body // a held compressed variant's bytes (compress.go)
}
