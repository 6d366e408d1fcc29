package coalesce

import (
	"github.com/prometheus/client_golang/prometheus"

	"github.com/h2file/caddy-h2file/internal/prom"
)

// MetricSet are the coalescing connections' collectors.
type MetricSet struct {
	// Batches counts socket writes.
	Batches prometheus.Counter
	// Bytes counts bytes sent.
	Bytes prometheus.Counter
	// Coalesced counts the socket writes saved.
	Coalesced prometheus.Counter
	// Waits counts writes that waited for memory.
	Waits prometheus.Counter
	// Buffered is the memory held in buffers.
	Buffered prometheus.Gauge
}

// Metrics are the collectors every coalescing connection of the process
// updates; the owner registers them into each config's registry.
var Metrics = newMetricSet()

func newMetricSet() *MetricSet {
	return &MetricSet{
		Batches:   prom.Counter("coalesce_batches_total", "Socket writes made by coalescing connections."),
		Bytes:     prom.Counter("coalesce_bytes_total", "Bytes sent by coalescing connections."),
		Coalesced: prom.Counter("coalesce_writes_coalesced_total", "Socket writes saved by coalescing: per batch, the Write calls whose bytes it carries minus the socket writes that sent it."),
		Waits:     prom.Counter("coalesce_backpressure_waits_total", "Writes that waited because their connection, or all connections together, had too many bytes pending."),
		Buffered:  prom.Gauge("coalesce_buffer_bytes", "Memory held in buffers by coalescing connections."),
	}
}

// Collectors returns every collector, to register.
func (m *MetricSet) Collectors() []prometheus.Collector {
	return []prometheus.Collector{m.Batches, m.Bytes, m.Coalesced, m.Waits, m.Buffered}
}

// Stats are counts of the wrapper's own resources, for tests: they must
// return to zero when every connection is closed.
type Stats struct {
	ChunksOut int64 // pooled buffers taken and not given back
	Flushers  int64 // flusher goroutines running
}

// ReadStats returns the current counts.
func ReadStats() Stats {
	return Stats{ChunksOut: chunksOut.Load(), Flushers: flushers.Load()}
}
