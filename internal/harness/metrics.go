package harness

import (
	"strings"
	"testing"

	"github.com/prometheus/client_golang/prometheus"
)

// Gather returns the value of each metric in reg whose name starts with
// prefix (counters and gauges, summed over their series), and fails the
// test for a series with labels: h2file's metrics have none.
func Gather(t testing.TB, reg prometheus.Gatherer, prefix string) map[string]float64 {
	t.Helper()
	mfs, err := reg.Gather()
	if err != nil {
		t.Fatal(err)
	}
	got := map[string]float64{}
	for _, mf := range mfs {
		if !strings.HasPrefix(mf.GetName(), prefix) {
			continue
		}
		for _, m := range mf.GetMetric() {
			if len(m.GetLabel()) != 0 {
				t.Errorf("%s has labels %v", mf.GetName(), m.GetLabel())
			}
			got[mf.GetName()] += m.GetCounter().GetValue() + m.GetGauge().GetValue()
		}
	}
	return got
}
