package h2file

// What the listener wrappers tell a user at start (one log line per
// listener, wrappers.go) and when their place is wrong (errors naming the
// server by its listen addresses), with Caddy loaded from a Caddyfile.

import (
	"fmt"
	"path/filepath"
	"reflect"
	"slices"
	"strings"
	"testing"

	"github.com/caddyserver/caddy/v2"
	"github.com/caddyserver/caddy/v2/caddyconfig"
	"github.com/caddyserver/caddy/v2/caddyconfig/caddyfile"
	"go.uber.org/zap/zapcore"
	"go.uber.org/zap/zaptest/observer"

	"github.com/h2file/caddy-h2file/internal/harness"
	"github.com/h2file/caddy-h2file/internal/harness/caddysite"
)

// observedCore records what Caddy logs through a log with the
// h2file_test_observer core; observedLogs reads it.
var observedCore, observedLogs = observer.New(zapcore.DebugLevel)

func init() {
	caddy.RegisterModule(observerCore{})
}

// observerCore is a log core module that records every entry, with its
// fields, in observedLogs.
type observerCore struct {
	zapcore.Core `json:"-"`
}

// CaddyModule returns the Caddy module information.
func (observerCore) CaddyModule() caddy.ModuleInfo {
	return caddy.ModuleInfo{
		ID:  "caddy.logging.cores.h2file_test_observer",
		New: func() caddy.Module { return &observerCore{observedCore} },
	}
}

// UnmarshalCaddyfile reads `core h2file_test_observer`.
func (*observerCore) UnmarshalCaddyfile(d *caddyfile.Dispenser) error {
	d.Next()
	if d.NextArg() {
		return d.ArgErr()
	}
	return nil
}

// wrapperSite is a Caddyfile for one site on the ports given, HTTPS with
// the harness certificate unless plain, with the listener wrappers given,
// its logs going to observedLogs.
func wrapperSite(t *testing.T, ports []int, plain bool, wrappers string) string {
	scheme, tls := "https", ""
	if plain {
		scheme = "http"
	} else {
		cert, dir := harness.NewCert(t), t.TempDir()
		tls = fmt.Sprintf("\ttls %s %s\n", harness.WriteFile(t, filepath.Join(dir, "cert.pem"), cert.CertPEM),
			harness.WriteFile(t, filepath.Join(dir, "key.pem"), cert.KeyPEM))
	}
	var addrs []string
	for _, port := range ports {
		addrs = append(addrs, fmt.Sprintf("%s://localhost:%d", scheme, port))
	}
	return fmt.Sprintf(`{
	admin off
	persist_config off
	grace_period 1ns
	auto_https disable_redirects
	log {
		output discard
		core h2file_test_observer
	}
	servers {
		listener_wrappers {
			%s
		}
	}
}

%s {
	bind 127.0.0.1
%s	respond "hi"
}
`, strings.ReplaceAll(wrappers, "\n", "\n\t\t\t"), strings.Join(addrs, ", "), tls)
}

// startLine is a log line a wrapper writes when it wraps a listener.
type startLine struct {
	msg    string
	fields map[string]any
}

// Each wrapper logs one line per listener when Caddy starts: h2_engine
// that it serves HTTP/2 there (or has nothing to serve), with the
// server's wrappers as listed and its send timeout; coalesce its position
// and settings.
func TestWrapperStartLogs(t *testing.T) {
	const (
		engineMsg   = "HTTP/2 served by h2_engine"
		idleMsg     = "h2_engine idle: no HTTP/2 over TLS on this listener"
		coalesceMsg = "socket writes coalesced"
	)
	coalesced := func(addr, position, wrappers string, maxPending, spare int) startLine {
		return startLine{coalesceMsg, map[string]any{"address": addr, "position": position, "tls": true,
			"listener_wrappers": wrappers, "max_pending": int64(maxPending), "spare_pending": int64(spare),
			"max_total": int64(64 << 20), "close_timeout": "5s"}}
	}
	engine := func(addr, wrappers, sendTimeout string) startLine {
		return startLine{engineMsg, map[string]any{"address": addr, "tls": true, "listener_wrappers": wrappers, "send_timeout": sendTimeout}}
	}
	const recommended = "coalesce, tls, h2_engine"
	for _, tc := range []struct {
		name      string
		listeners int
		plain     bool
		wrappers  string
		want      func(addrs []string) []startLine
	}{
		{name: "recommended", listeners: 1, wrappers: "coalesce\ntls\nh2_engine", want: func(addrs []string) []startLine {
			return []startLine{coalesced(addrs[0], "below TLS", recommended, 64<<10, 512<<10), engine(addrs[0], recommended, "1m0s")}
		}},
		{name: "recommended, two listeners", listeners: 2, wrappers: "coalesce\ntls\nh2_engine {\n\tsend_timeout 2m\n}", want: func(addrs []string) []startLine {
			var lines []startLine
			for _, addr := range addrs {
				lines = append(lines, coalesced(addr, "below TLS", recommended, 64<<10, 512<<10), engine(addr, recommended, "2m0s"))
			}
			return lines
		}},
		{name: "engine alone", listeners: 1, wrappers: "h2_engine {\n\tsend_timeout -1s\n}", want: func(addrs []string) []startLine {
			return []startLine{engine(addrs[0], "h2_engine", "off")}
		}},
		{name: "engine without TLS", listeners: 1, plain: true, wrappers: "h2_engine", want: func(addrs []string) []startLine {
			return []startLine{{idleMsg, map[string]any{"address": addrs[0], "tls": false, "listener_wrappers": "h2_engine", "send_timeout": "1m0s"}}}
		}},
		{name: "coalesce alone", listeners: 1, wrappers: "coalesce", want: func(addrs []string) []startLine {
			return []startLine{coalesced(addrs[0], "above TLS", "coalesce", 64<<10, 512<<10)}
		}},
		{name: "coalesce both sides", listeners: 1, wrappers: "coalesce\ntls\ncoalesce {\n\tmax_pending 32KiB\n}", want: func(addrs []string) []startLine {
			const list = "coalesce, tls, coalesce"
			return []startLine{coalesced(addrs[0], "below TLS", list, 64<<10, 512<<10), coalesced(addrs[0], "above TLS", list, 32<<10, 0)}
		}},
	} {
		t.Run(tc.name, func(t *testing.T) {
			ports := harness.FreePorts(t, tc.listeners)
			slices.Sort(ports)
			var addrs []string
			for _, port := range ports {
				addrs = append(addrs, harness.Loopback(port))
			}
			observedLogs.TakeAll()
			caddysite.LoadCaddyfile(t, wrapperSite(t, ports, tc.plain, tc.wrappers))
			got := wrapperStartLines(observedLogs.TakeAll(), engineMsg, idleMsg, coalesceMsg)
			if want := tc.want(addrs); !reflect.DeepEqual(got, want) {
				t.Errorf("start lines:\n%s\nwant:\n%s", formatStartLines(got), formatStartLines(want))
			}
			t.Logf("start lines:\n%s", formatStartLines(got))
		})
	}
	// each subtest has stopped its config: the wrappers forgot its servers
	coalesceSeen.Lock()
	defer coalesceSeen.Unlock()
	if n := len(coalesceSeen.n); n != 0 {
		t.Errorf("coalesce still counts the wrappers of %d servers of stopped configs", n)
	}
}

// wrapperStartLines are the entries with one of msgs, by address (the
// servers start in any order), then in the order they were logged.
func wrapperStartLines(entries []observer.LoggedEntry, msgs ...string) []startLine {
	var lines []startLine
	for _, e := range entries {
		for _, msg := range msgs {
			if e.Message == msg && e.Level == zapcore.InfoLevel {
				lines = append(lines, startLine{e.Message, e.ContextMap()})
			}
		}
	}
	slices.SortStableFunc(lines, func(a, b startLine) int {
		return strings.Compare(fmt.Sprint(a.fields["address"]), fmt.Sprint(b.fields["address"]))
	})
	return lines
}

func formatStartLines(lines []startLine) string {
	var b strings.Builder
	for _, l := range lines {
		fmt.Fprintf(&b, "  %q %v\n", l.msg, l.fields)
	}
	return b.String()
}

// Misplaced wrappers are errors that name the server by its listen
// addresses (Caddy names it srv0, which the Caddyfile never says).
func TestWrapperPlaceErrorsNameTheServer(t *testing.T) {
	caddysite.CaddyEnv(t)
	for _, tc := range []struct {
		wrappers string
		want     string
	}{
		{"coalesce\nh2_engine", `h2_engine (server listening on :8443): must come right after tls, but follows "coalesce" (as in coalesce, tls, h2_engine`},
		{"tls\nh2_engine\ncoalesce", `h2_engine (server listening on :8443): must be the last listener wrapper, but "coalesce" follows it (list it last, right after tls`},
		{"coalesce\ncoalesce", `coalesce (server listening on :8443): the server lists the coalesce listener wrapper twice in a row (listener_wrappers 0 and 1); list it once for each position`},
		{"coalesce {\n\tmax_pending 1MiB\n\tmax_total 64KiB\n}", `coalesce (server listening on :8443): max_total (65536) must be at least max_pending (1048576)`},
	} {
		input := "{\n\tservers {\n\t\tlistener_wrappers {\n\t\t\t" + strings.ReplaceAll(tc.wrappers, "\n", "\n\t\t\t") +
			"\n\t\t}\n\t}\n}\n\nhttps://localhost:8443 {\n\ttls internal\n\trespond hi\n}\n"
		raw, _, err := caddyconfig.GetAdapter("caddyfile").Adapt([]byte(input), nil)
		if err != nil {
			t.Fatalf("%s: adapting: %v", tc.wrappers, err)
		}
		err = caddy.Validate(caddyfileConfig(t, raw))
		if err == nil || !strings.Contains(err.Error(), tc.want) {
			t.Errorf("%q: error %v\nwant one with %s", tc.wrappers, err, tc.want)
			continue
		}
		t.Logf("%v", err)
	}
}

// caddyfileConfig decodes an adapted Caddyfile.
func caddyfileConfig(t *testing.T, raw []byte) *caddy.Config {
	t.Helper()
	cfg := new(caddy.Config)
	if err := cfgStrictDecode(raw, cfg); err != nil {
		t.Fatal(err)
	}
	return cfg
}
