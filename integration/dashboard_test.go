package integration

import (
	"crypto/tls"
	"encoding/json"
	"fmt"
	"io"
	"net/http"
	"os"
	"regexp"
	"slices"
	"strings"
	"testing"
	"time"

	"github.com/caddyserver/caddy/v2"

	"github.com/h2file/caddy-h2file/internal/harness"
	"github.com/h2file/caddy-h2file/internal/harness/caddysite"
)

const dashboardFile = "../grafana/h2file-dashboard.json"

// scrapeLabels are added by Prometheus when it scrapes, so no registry has
// them.
var scrapeLabels = []string{"instance", "job"}

// liveMetric is a metric family of a running Caddy: its label names, and
// the values each label has.
type liveMetric struct {
	labels map[string]bool
	values map[string]map[string]bool
}

// liveMetrics serves a few requests (200 and 404, over HTTP/2 through
// coalesce, tls and h2_engine, with Caddy's HTTP metrics on) and returns
// what Caddy's metrics registry then has, by the names queries use: a
// histogram's _bucket, _sum and _count series.
func liveMetrics(t *testing.T) map[string]liveMetric {
	t.Helper()
	t.Setenv("XDG_DATA_HOME", t.TempDir())
	t.Setenv("XDG_CONFIG_HOME", t.TempDir())
	certPEM, keyPEM := caddysite.SelfSignedCert(t)
	port := harness.FreePort(t)
	cfg := map[string]any{
		"admin":   map[string]any{"disabled": true, "config": map[string]any{"persist": false}},
		"logging": map[string]any{"logs": map[string]any{"default": map[string]any{"level": "ERROR"}}},
		"apps": map[string]any{
			"http": map[string]any{
				"grace_period": 1,
				"metrics":      map[string]any{},
				"servers": map[string]any{
					"test": map[string]any{
						"listen":                  []string{fmt.Sprintf("127.0.0.1:%d", port)},
						"listener_wrappers":       engineWrappers(),
						"routes":                  []any{map[string]any{"handle": []any{caddysite.H2FileServer("../example", nil)}}},
						"tls_connection_policies": []any{map[string]any{}},
						"automatic_https":         map[string]any{"disable": true},
					},
				},
			},
			"tls": map[string]any{"certificates": map[string]any{
				"load_pem": []any{map[string]any{"certificate": string(certPEM), "key": string(keyPEM)}},
			}},
		},
	}
	if err := caddy.Load(caddysite.MustJSON(t, cfg), true); err != nil {
		t.Fatalf("loading Caddy config: %v", err)
	}
	t.Cleanup(func() { caddysite.StopTestCaddy(t) })
	tr := &http.Transport{TLSClientConfig: &tls.Config{InsecureSkipVerify: true}, ForceAttemptHTTP2: true} //nolint:gosec // test certificate
	defer tr.CloseIdleConnections()
	client := &http.Client{Transport: tr, Timeout: time.Minute}
	for _, path := range []string{"/", "/files/hello.txt", "/files/hello.txt", "/nonesuch"} {
		resp, err := client.Get(fmt.Sprintf("https://127.0.0.1:%d%s", port, path))
		if err != nil {
			t.Fatal(err)
		}
		io.Copy(io.Discard, resp.Body) //nolint:errcheck // only the metrics matter
		resp.Body.Close()
		if resp.ProtoMajor != 2 {
			t.Fatalf("GET %s over %s, want HTTP/2", path, resp.Proto)
		}
	}

	ctx := caddy.ActiveContext()
	families, err := ctx.GetMetricsRegistry().Gather()
	if err != nil {
		t.Fatalf("gathering metrics: %v", err)
	}
	live := make(map[string]liveMetric)
	for _, mf := range families {
		labels, values := make(map[string]bool), make(map[string]map[string]bool)
		for _, m := range mf.GetMetric() {
			for _, l := range m.GetLabel() {
				labels[l.GetName()] = true
				if values[l.GetName()] == nil {
					values[l.GetName()] = make(map[string]bool)
				}
				values[l.GetName()][l.GetValue()] = true
			}
		}
		names := []string{mf.GetName()}
		switch mf.GetType().String() {
		case "HISTOGRAM":
			names = append(names, mf.GetName()+"_bucket", mf.GetName()+"_sum", mf.GetName()+"_count")
		case "SUMMARY":
			names = append(names, mf.GetName()+"_sum", mf.GetName()+"_count")
		}
		for _, n := range names {
			l := labels
			if strings.HasSuffix(n, "_bucket") {
				l = map[string]bool{"le": true}
				for k := range labels {
					l[k] = true
				}
			}
			live[n] = liveMetric{labels: l, values: values}
		}
	}
	return live
}

var (
	metricRef   = regexp.MustCompile(`\b(caddy_[a-zA-Z0-9_]+)(\{[^}]*\})?`)
	labelMatch  = regexp.MustCompile(`([a-zA-Z_][a-zA-Z0-9_]*)\s*(=~|!~|!=|=)\s*"([^"]*)"`)
	groupLabels = regexp.MustCompile(`\b(?:by|without)\s*\(([^)]*)\)`)
	labelValues = regexp.MustCompile(`label_values\(\s*([a-zA-Z_:][a-zA-Z0-9_:]*)\s*,\s*([a-zA-Z_][a-zA-Z0-9_]*)\s*\)`)
)

// TestGrafanaDashboardMetricsExist checks every query of the Grafana
// dashboard against a running Caddy's registry: each metric it names
// exists, with every label its selectors, groupings and variables use (and
// the values its equality matchers ask for).
func TestGrafanaDashboardMetricsExist(t *testing.T) {
	raw, err := os.ReadFile(dashboardFile)
	if err != nil {
		t.Fatal(err)
	}
	var dash struct {
		Panels []struct {
			Title   string `json:"title"`
			Type    string `json:"type"`
			Targets []struct {
				Expr string `json:"expr"`
			} `json:"targets"`
		} `json:"panels"`
		Templating struct {
			List []struct {
				Name       string `json:"name"`
				Definition string `json:"definition"`
			} `json:"list"`
		} `json:"templating"`
	}
	if err := json.Unmarshal(raw, &dash); err != nil {
		t.Fatalf("%s: %v", dashboardFile, err)
	}
	live := liveMetrics(t)

	used := make(map[string]bool)
	for _, p := range dash.Panels {
		if p.Type != "row" && len(p.Targets) == 0 {
			t.Errorf("panel %q has no query", p.Title)
		}
		for _, target := range p.Targets {
			checkQuery(t, p.Title, target.Expr, live, used)
		}
	}
	for _, v := range dash.Templating.List {
		m := labelValues.FindStringSubmatch(v.Definition)
		if m == nil {
			t.Errorf("variable %q: query %q is not label_values(metric, label)", v.Name, v.Definition)
			continue
		}
		if lm, ok := live[m[1]]; !ok {
			t.Errorf("variable %q: no metric %s", v.Name, m[1])
		} else if !lm.labels[m[2]] && !slices.Contains(scrapeLabels, m[2]) {
			t.Errorf("variable %q: %s has no label %q", v.Name, m[1], m[2])
		}
	}

	// the dashboard covers both plugins and Caddy's own HTTP metrics
	for _, prefix := range []string{"caddy_h2file_cache_", "caddy_h2file_coalesce_", "caddy_h2file_engine_", "caddy_h2file_aborted_sends_total", "caddy_http_"} {
		found := false
		for name := range used {
			found = found || strings.HasPrefix(name, prefix)
		}
		if !found {
			t.Errorf("the dashboard has no %s* metric", prefix)
		}
	}
}

// checkQuery checks that every metric expr names is live, with the labels
// its selectors and by/without clauses use, and records the names in used.
func checkQuery(t *testing.T, panel, expr string, live map[string]liveMetric, used map[string]bool) {
	t.Helper()
	refs := metricRef.FindAllStringSubmatch(expr, -1)
	if len(refs) == 0 {
		t.Errorf("panel %q: query names no caddy_* metric: %s", panel, expr)
	}
	var named []liveMetric
	for _, ref := range refs {
		used[ref[1]] = true
		lm, ok := live[ref[1]]
		if !ok {
			t.Errorf("panel %q: no metric %s (query %s)", panel, ref[1], expr)
			continue
		}
		named = append(named, lm)
		for _, l := range labelMatch.FindAllStringSubmatch(ref[2], -1) {
			switch {
			case slices.Contains(scrapeLabels, l[1]):
			case !lm.labels[l[1]]:
				t.Errorf("panel %q: %s has no label %q", panel, ref[1], l[1])
			case l[2] == "=" && !lm.values[l[1]][l[3]]:
				t.Errorf("panel %q: %s has no series with %s=%q", panel, ref[1], l[1], l[3])
			}
		}
	}
	for _, g := range groupLabels.FindAllStringSubmatch(expr, -1) {
		for _, l := range strings.Split(g[1], ",") {
			l = strings.TrimSpace(l)
			found := slices.Contains(scrapeLabels, l)
			for _, lm := range named {
				found = found || lm.labels[l]
			}
			if !found {
				t.Errorf("panel %q: no metric of %s has label %q", panel, expr, l)
			}
		}
	}
}

// TestDocsListEveryMetric checks docs/metrics.md, the metrics' reference
// page, against the registry: it lists every caddy_h2file_* metric a
// running Caddy has, by full name, and no other.
func TestDocsListEveryMetric(t *testing.T) {
	raw, err := os.ReadFile("../docs/metrics.md")
	if err != nil {
		t.Fatal(err)
	}
	readme := string(raw)
	section := readme
	listed := make(map[string]bool)
	for _, m := range regexp.MustCompile("`(caddy_h2file_[a-z0-9_]+)`").FindAllStringSubmatch(section, -1) {
		listed[m[1]] = true
	}
	live := liveMetrics(t)
	for name := range live {
		if strings.HasPrefix(name, "caddy_h2file_") && !listed[name] {
			t.Errorf("docs/metrics.md does not list %s", name)
		}
	}
	for name := range listed {
		if _, ok := live[name]; !ok {
			t.Errorf("docs/metrics.md lists %s, which Caddy does not have", name)
		}
	}
	// elsewhere, metrics are written out whole too
	for _, m := range regexp.MustCompile("`(_[a-z0-9_]+_(?:total|bytes|files|entries))`").FindAllStringSubmatch(readme, -1) {
		t.Errorf("docs/metrics.md names a metric by its suffix %s", m[1])
	}
}
