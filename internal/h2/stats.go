package h2

import "sync/atomic"

// Stats counts what every Server of the process has served, for tests
// and debugging (and Caddy's registry, metrics.go).
type Stats struct {
	Conns   int64 // connections served (past the client preface)
	Streams int64 // requests handed to a handler
	Open    int64 // connections being served now
	// Floods counts connections ended for sending too many frames that
	// do no work (GOAWAY ENHANCE_YOUR_CALM, flood.go).
	Floods int64
	// SendTimeouts counts connections closed because a socket write did
	// not complete within Config.WriteProgressTimeout.
	SendTimeouts int64
	// IdleWorkers is how many goroutines of the handler pool wait now
	// (idle handler goroutines kept for reuse, and the one that ends them
	// once idle for long, see workers.go): goroutines that are not a leak.
	IdleWorkers int
}

var stats struct{ conns, streams, open, floods, sendTimeouts atomic.Int64 }

// ReadStats returns the counts so far.
func ReadStats() Stats {
	return Stats{Conns: stats.conns.Load(), Streams: stats.streams.Load(), Open: stats.open.Load(), Floods: stats.floods.Load(), SendTimeouts: stats.sendTimeouts.Load(), IdleWorkers: workers.idleWorkers()}
}
