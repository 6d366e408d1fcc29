package h2

import (
	"io"
	"math"
	"net/http"
	"sync/atomic"
	"testing"

	"github.com/prometheus/client_golang/prometheus"

	"github.com/h2file/caddy-h2file/internal/harness"
)

const metricPrefix = "caddy_h2file_engine_"

// engineRegistry is a registry with the engine's collectors.
func engineRegistry(t *testing.T) *prometheus.Registry {
	t.Helper()
	reg := prometheus.NewRegistry()
	for _, c := range Metrics.Collectors() {
		reg.MustRegister(c)
	}
	return reg
}

// TestMetricsReadTheirCounts checks that each metric reads its own count:
// each count is raised by a different amount, and each metric must move
// by its count's (within 100: connections may end meanwhile).
func TestMetricsReadTheirCounts(t *testing.T) {
	reg := engineRegistry(t)
	counts := map[string]*atomic.Int64{
		"connections_total":   &stats.conns,
		"connections":         &stats.open,
		"streams_total":       &stats.streams,
		"floods_total":        &stats.floods,
		"send_timeouts_total": &stats.sendTimeouts,
	}
	before := harness.Gather(t, reg, metricPrefix)
	raised := map[string]int64{}
	step := int64(1000)
	for name, n := range counts {
		raised[name] = step
		n.Add(step)
		step += 1000
	}
	after := harness.Gather(t, reg, metricPrefix)
	for name, n := range counts {
		n.Add(-raised[name])
	}
	for name := range counts {
		if moved := after[metricPrefix+name] - before[metricPrefix+name]; math.Abs(moved-float64(raised[name])) > 100 {
			t.Errorf("%s%s moved by %v when its count rose by %d", metricPrefix, name, moved, raised[name])
		}
	}
	if len(after) != len(counts) {
		t.Errorf("the engine has metrics %v, want the %d of its counts", after, len(counts))
	}
}

// TestMetricsCountRequests serves two requests on one connection: the
// connections count by one, requests by two, and one connection is open
// while they are served.
func TestMetricsCountRequests(t *testing.T) {
	reg := engineRegistry(t)
	before := harness.Gather(t, reg, metricPrefix)
	var during map[string]float64
	p := startEngine(t, http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		during = harness.Gather(t, reg, metricPrefix)
		io.WriteString(w, "counted")
	}), Config{})
	for range 2 {
		resp, err := p.client.Get(p.engineURL + "/")
		if err != nil {
			t.Fatal(err)
		}
		io.Copy(io.Discard, resp.Body)
		resp.Body.Close()
	}
	if during == nil {
		t.Fatal("the handler did not run")
	}
	if got, want := during[metricPrefix+"connections_total"]-before[metricPrefix+"connections_total"], 1.0; got != want {
		t.Errorf("%sconnections_total rose by %v over two requests on one connection, want %v", metricPrefix, got, want)
	}
	if got, want := during[metricPrefix+"streams_total"]-before[metricPrefix+"streams_total"], 2.0; got != want {
		t.Errorf("%sstreams_total rose by %v over two requests, want %v", metricPrefix, got, want)
	}
	if during[metricPrefix+"connections"] < 1 {
		t.Errorf("%sconnections = %v while a request is served", metricPrefix, during[metricPrefix+"connections"])
	}
}
