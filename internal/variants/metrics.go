package variants

import (
	"github.com/prometheus/client_golang/prometheus"

	"github.com/h2file/caddy-h2file/internal/prom"
)

// Metrics are the collectors of compressed-variant stores, shared by every
// store in the process and registered by the owner into each config's
// metrics registry.
type Metrics struct {
	// Hits counts requests answered with a variant held in memory.
	Hits prometheus.Counter
	// Misses counts requests that found no variant held.
	Misses prometheus.Counter
	// Compressions counts variants made.
	Compressions prometheus.Counter
	// Evictions counts variants let go: for room, or with their file.
	Evictions prometheus.Counter
	// MemoryBytes is the bytes of the variants held.
	MemoryBytes prometheus.Gauge
	// SavedBytes is what the variants held save per response: the files'
	// sizes minus the variants'.
	SavedBytes prometheus.Gauge
}

// SharedMetrics are the collectors a process's stores share.
var SharedMetrics = NewMetrics()

// NewMetrics makes a set of unregistered collectors.
func NewMetrics() *Metrics {
	return &Metrics{
		Hits:         prom.Counter("compress_hits_total", "Responses served from a compressed variant held in memory."),
		Misses:       prom.Counter("compress_misses_total", "Responses that found no compressed variant held."),
		Compressions: prom.Counter("compress_compressions_total", "Compressed variants made."),
		Evictions:    prom.Counter("compress_evictions_total", "Compressed variants let go, for room or because their file changed."),
		MemoryBytes:  prom.Gauge("compress_memory_bytes", "Bytes of compressed variants held in memory."),
		SavedBytes:   prom.Gauge("compress_saved_bytes", "File bytes minus variant bytes, over the compressed variants held."),
	}
}

// Collectors returns every collector, to register.
func (m *Metrics) Collectors() []prometheus.Collector {
	return []prometheus.Collector{m.Hits, m.Misses, m.Compressions, m.Evictions, m.MemoryBytes, m.SavedBytes}
}
