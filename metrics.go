package h2file

import (
	"errors"
	"fmt"

	"github.com/prometheus/client_golang/prometheus"
)

// cacheMetrics are the open-file cache's collectors, shared by every cache
// in the process and registered into each config's metrics registry.
type cacheMetrics struct {
	hits          prometheus.Counter
	misses        prometheus.Counter
	evictions     prometheus.Counter
	revalidations prometheus.Counter
	truncated     prometheus.Counter
	openFiles     prometheus.Gauge
	entries       prometheus.Gauge
	memoryBytes   prometheus.Gauge

	eventDrops     prometheus.Counter
	eventOverflows prometheus.Counter
	unwatched      prometheus.Counter
	watches        prometheus.Gauge
}

const metricsNamespace, metricsSubsystem = "caddy", "h2file"

// fileCacheMetrics are the collectors every cache of the process updates.
var fileCacheMetrics = newCacheMetrics()

// newCacheMetrics makes a set of unregistered collectors.
func newCacheMetrics() *cacheMetrics {
	return &cacheMetrics{
		hits:          newCounter("cache_hits_total", "Lookups answered by the open-file cache."),
		misses:        newCounter("cache_misses_total", "Lookups that went to the file system."),
		evictions:     newCounter("cache_evictions_total", "Entries dropped for room, inactivity or lack of descriptors."),
		revalidations: newCounter("cache_revalidations_total", "Stats made to check that a cached entry is still current."),
		truncated:     newCounter("aborted_sends_total", "Responses aborted because the file shrank or failed while it was sent."),
		openFiles:     newGauge("cache_open_files", "File descriptors held open by the open-file cache."),
		entries:       newGauge("cache_entries", "Paths the open-file cache knows about."),
		memoryBytes:   newGauge("cache_memory_bytes", "Bytes of file content held in memory by the open-file cache."),

		eventDrops:     newCounter("cache_event_drops_total", "Entries dropped because a file system event reported a change to their file or path."),
		eventOverflows: newCounter("cache_event_overflows_total", "File system event queue overflows; every cached entry was dropped."),
		unwatched:      newCounter("cache_unwatched_total", "Cache entries (or caches) that could not be watched for changes (no events on the platform or file system, watch limit, permissions) and are revalidated by stat."),
		watches:        newGauge("cache_watches", "Files and directories watched for changes by the open-file cache."),
	}
}

func newCounter(name, help string) prometheus.Counter {
	return prometheus.NewCounter(prometheus.CounterOpts{
		Namespace: metricsNamespace, Subsystem: metricsSubsystem, Name: name, Help: help,
	})
}

func newGauge(name, help string) prometheus.Gauge {
	return prometheus.NewGauge(prometheus.GaugeOpts{
		Namespace: metricsNamespace, Subsystem: metricsSubsystem, Name: name, Help: help,
	})
}

// register adds the collectors to reg; collectors it already has are fine.
func (m *cacheMetrics) register(reg prometheus.Registerer) error {
	return registerCollectors(reg, "open-file cache",
		m.hits, m.misses, m.evictions, m.revalidations, m.truncated, m.openFiles, m.entries, m.memoryBytes,
		m.eventDrops, m.eventOverflows, m.unwatched, m.watches)
}

// registerCollectors adds collectors to reg (if any), tolerating those
// already registered: every config registers into its own registry, and
// collectors are shared by the whole process.
func registerCollectors(reg prometheus.Registerer, what string, collectors ...prometheus.Collector) error {
	if reg == nil {
		return nil
	}
	for _, c := range collectors {
		if err := reg.Register(c); err != nil {
			var already prometheus.AlreadyRegisteredError
			if !errors.As(err, &already) {
				return fmt.Errorf("registering %s metrics: %w", what, err)
			}
		}
	}
	return nil
}
