// Package h2 is h2file's HTTP/2 server engine: it serves HTTP/2 connections
// with an http.Handler, in place of Go's own server. It reads frames with
// golang.org/x/net/http2's Framer and HPACK decoder, builds each
// *http.Request exactly as x/net's server does (plus the request limits Go
// 1.27 added), and writes its frames itself. It knows nothing of Caddy or of
// files: a connection and a handler are all it is given.
//
// # Concurrency
//
// A connection has one lock, conn.mu, and every field of the connection
// and of its streams is read and written under it; functions named
// ...Locked are called with it held. Three kinds of goroutine take it:
//
//   - the reading goroutine (ServeConn's caller, conn.serve) reads a
//     frame, takes the lock, acts on it and puts its answers (ACKs,
//     WINDOW_UPDATE, RST_STREAM, GOAWAY) into the batch. It never writes
//     to the socket and never waits for room: it has the batch written
//     by a goroutine of its own (kickLocked, batch.go), so it goes on
//     reading whatever the socket does; maxBacklog bounds what it adds
//     while a write does not return.
//   - a handler's goroutine (workers.go) frames its response into the
//     batch (writeHeaders in encode.go, writeBody in sendbody.go, the only
//     path for DATA and END_STREAM) and writes it (flushLocked), or has a
//     goroutine of its own write it (64 KiB or more, and what other
//     streams added during the handler's write).
//   - a writing goroutine (flushAsync) writes batches until none is left,
//     and after each write lets the next stream in line go (dispatchLocked,
//     queue.go), sending what a stream buffered ahead of its window
//     (pending.go).
//
// One goroutine writes at a time (conn.inWrite); what others add during a
// write goes in the next one. These release the lock and take it again
// before they return: flushLocked, writeBatchesLocked, flushIfIdleLocked,
// waitForWindowLocked, waitRoomLocked, and every wait on a stream's cond
// or the connection's roomCond. Their callers check again what they were
// waiting for (the stream may have closed, the window changed, another
// stream become first in line) and loop. Nothing else releases it; in
// particular kickLocked, dispatchLocked, resetStreamLocked and
// closeStreamLocked do not, so the reading goroutine's handling of a
// frame is one step.
//
// A handler is given a handle (handle.go) on its stream's pooled response
// state; the handle is cut when the handler returns, so a goroutine that
// kept it gets errors and never reaches another stream.
package h2
