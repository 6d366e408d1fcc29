package watch

import (
	"github.com/prometheus/client_golang/prometheus"

	"github.com/h2file/caddy-h2file/internal/prom"
)

// Metrics are a watcher's collectors, shared by every watcher of the
// process (the metric names are the open-file cache's).
type Metrics struct {
	// EventDrops counts Subs marked stale by an event.
	EventDrops prometheus.Counter
	// EventOverflows counts overflows of the kernel's event queue.
	EventOverflows prometheus.Counter
	// Unwatched counts paths (or whole caches) that could not be watched
	// and are revalidated by stat instead.
	Unwatched prometheus.Counter
	// Watches is the number of files and directories watched.
	Watches prometheus.Gauge
}

// NewMetrics makes a set of unregistered collectors.
func NewMetrics() *Metrics {
	return &Metrics{
		EventDrops:     prom.Counter("cache_event_drops_total", "Entries dropped because a file system event reported a change to their file or path."),
		EventOverflows: prom.Counter("cache_event_overflows_total", "File system event queue overflows; every cached entry was dropped."),
		Unwatched:      prom.Counter("cache_unwatched_total", "Cache entries (or caches) that could not be watched for changes (no events on the platform or file system, watch limit, permissions) and are revalidated by stat."),
		Watches:        prom.Gauge("cache_watches", "Files and directories watched for changes by the open-file cache."),
	}
}

// Collectors returns every collector, to register.
func (m *Metrics) Collectors() []prometheus.Collector {
	return []prometheus.Collector{m.EventDrops, m.EventOverflows, m.Unwatched, m.Watches}
}
