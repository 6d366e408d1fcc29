package h2file

import (
	"errors"
	"fmt"
	"slices"

	"github.com/prometheus/client_golang/prometheus"

	"github.com/h2file/caddy-h2file/internal/fdcache"
	"github.com/h2file/caddy-h2file/internal/prom"
	"github.com/h2file/caddy-h2file/internal/variants"
)

// fileCacheMetrics are the collectors every open-file cache of the process
// (and its watcher) updates.
var fileCacheMetrics = fdcache.SharedMetrics

// abortedSends counts responses aborted because their file shrank or failed
// while it was sent.
var abortedSends = prom.Counter("aborted_sends_total", "Responses aborted because the file shrank or failed while it was sent.")

// registerMetrics adds h2_file_server's collectors to reg.
func registerMetrics(reg prometheus.Registerer) error {
	return registerCollectors(reg, "open-file cache", slices.Concat(fileCacheMetrics.Collectors(), variants.SharedMetrics.Collectors(),
		[]prometheus.Collector{abortedSends})...)
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
