package fdcache

import (
	"github.com/prometheus/client_golang/prometheus"

	"github.com/h2file/caddy-h2file/internal/prom"
	"github.com/h2file/caddy-h2file/internal/watch"
)

// Metrics are a cache's collectors, shared by every cache in the process
// and registered by the owner into each config's metrics registry.
type Metrics struct {
	// Hits counts lookups answered from the cache.
	Hits prometheus.Counter
	// Misses counts lookups that went to the file system.
	Misses prometheus.Counter
	// Evictions counts entries dropped for room, inactivity or lack of
	// descriptors.
	Evictions prometheus.Counter
	// Revalidations counts stats made to confirm an entry.
	Revalidations prometheus.Counter
	// OpenFiles is the number of descriptors held.
	OpenFiles prometheus.Gauge
	// Entries is the number of paths listed.
	Entries prometheus.Gauge
	// MemoryBytes is the file content held in memory.
	MemoryBytes prometheus.Gauge
	// Watch are the collectors of the cache's watcher.
	Watch *watch.Metrics
}

// SharedMetrics are the collectors a process's caches share (each
// config registers them into its own registry).
var SharedMetrics = NewMetrics()

// NewMetrics makes a set of unregistered collectors.
func NewMetrics() *Metrics {
	return &Metrics{
		Hits:          prom.Counter("cache_hits_total", "Lookups answered by the open-file cache."),
		Misses:        prom.Counter("cache_misses_total", "Lookups that went to the file system."),
		Evictions:     prom.Counter("cache_evictions_total", "Entries dropped for room, inactivity or lack of descriptors."),
		Revalidations: prom.Counter("cache_revalidations_total", "Stats made to check that a cached entry is still current."),
		OpenFiles:     prom.Gauge("cache_open_files", "File descriptors held open by the open-file cache."),
		Entries:       prom.Gauge("cache_entries", "Paths the open-file cache knows about."),
		MemoryBytes:   prom.Gauge("cache_memory_bytes", "Bytes of file content held in memory by the open-file cache."),
		Watch:         watch.NewMetrics(),
	}
}

// Collectors returns every collector, the watcher's included, to register.
func (m *Metrics) Collectors() []prometheus.Collector {
	return append([]prometheus.Collector{m.Hits, m.Misses, m.Evictions, m.Revalidations, m.OpenFiles, m.Entries, m.MemoryBytes},
		m.Watch.Collectors()...)
}
