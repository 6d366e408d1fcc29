package h2

import (
	"sync/atomic"

	"github.com/prometheus/client_golang/prometheus"

	"github.com/h2file/caddy-h2file/internal/prom"
)

// MetricSet are the engine's collectors. They read the process-wide
// counts of stats.go when collected, so that serving counts nothing more
// than it did.
type MetricSet struct {
	collectors []prometheus.Collector
}

// Metrics are the collectors of every Server of the process; the owner
// registers them into each config's registry.
var Metrics = newMetricSet()

func newMetricSet() *MetricSet {
	read := func(n *atomic.Int64) func() float64 {
		return func() float64 { return float64(n.Load()) }
	}
	return &MetricSet{collectors: []prometheus.Collector{
		prom.CounterFunc("engine_connections_total", "HTTP/2 connections served by the engine (past the client preface).", read(&stats.conns)),
		prom.GaugeFunc("engine_connections", "HTTP/2 connections the engine serves now.", read(&stats.open)),
		prom.CounterFunc("engine_streams_total", "Requests the engine handed to the server's handler.", read(&stats.streams)),
		prom.CounterFunc("engine_floods_total", "Connections the engine ended with GOAWAY ENHANCE_YOUR_CALM for sending too many frames that give it work and the client nothing.", read(&stats.floods)),
		prom.CounterFunc("engine_send_timeouts_total", "Connections the engine closed because a socket write to them did not complete within send_timeout.", read(&stats.sendTimeouts)),
	}}
}

// Collectors returns every collector, to register.
func (m *MetricSet) Collectors() []prometheus.Collector { return m.collectors }
