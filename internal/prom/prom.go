// Package prom makes the plugin's Prometheus collectors, all named
// caddy_h2file_*, for the packages that own them; the root package
// registers them into each config's registry.
package prom

import "github.com/prometheus/client_golang/prometheus"

// Namespace and Subsystem prefix every metric of the plugin.
const Namespace, Subsystem = "caddy", "h2file"

// Counter makes an unregistered counter caddy_h2file_<name>.
func Counter(name, help string) prometheus.Counter {
	return prometheus.NewCounter(prometheus.CounterOpts{
		Namespace: Namespace, Subsystem: Subsystem, Name: name, Help: help,
	})
}

// Gauge makes an unregistered gauge caddy_h2file_<name>.
func Gauge(name, help string) prometheus.Gauge {
	return prometheus.NewGauge(prometheus.GaugeOpts{
		Namespace: Namespace, Subsystem: Subsystem, Name: name, Help: help,
	})
}

// CounterFunc makes an unregistered counter caddy_h2file_<name> whose
// value read reads when collected (a count kept elsewhere).
func CounterFunc(name, help string, read func() float64) prometheus.CounterFunc {
	return prometheus.NewCounterFunc(prometheus.CounterOpts{
		Namespace: Namespace, Subsystem: Subsystem, Name: name, Help: help,
	}, read)
}

// GaugeFunc makes an unregistered gauge caddy_h2file_<name> whose value
// read reads when collected.
func GaugeFunc(name, help string, read func() float64) prometheus.GaugeFunc {
	return prometheus.NewGaugeFunc(prometheus.GaugeOpts{
		Namespace: Namespace, Subsystem: Subsystem, Name: name, Help: help,
	}, read)
}
