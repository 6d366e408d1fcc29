package h2file

import (
	"bufio"
	"context"
	"crypto/rand"
	"crypto/sha256"
	"crypto/tls"
	"encoding/base64"
	"encoding/json"
	"fmt"
	"io"
	"net"
	"net/http"
	"os"
	"path/filepath"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/caddyserver/caddy/v2"
	"github.com/caddyserver/caddy/v2/caddyconfig"
	"github.com/caddyserver/caddy/v2/caddyconfig/caddyfile"
	"github.com/prometheus/client_golang/prometheus"
	"golang.org/x/net/http2"

	_ "github.com/caddyserver/caddy/v2/modules/standard"
)

func TestListenerCaddyfile(t *testing.T) {
	for _, tc := range []struct {
		input string
		want  CoalesceWrapper
		err   string // part of the error, if one is expected
	}{
		{input: `coalesce`},
		{input: `coalesce {
		}`},
		{input: `coalesce {
			max_pending 32KiB
			max_total 16MiB
			close_timeout 2s
		}`, want: CoalesceWrapper{MaxPending: 32 << 10, MaxTotal: 16 << 20, CloseTimeout: caddy.Duration(2 * time.Second)}},
		{input: `coalesce {
			max_pending 100000
		}`, want: CoalesceWrapper{MaxPending: 100000}},
		{input: `coalesce {
			close_timeout 1d
		}`, want: CoalesceWrapper{CloseTimeout: caddy.Duration(24 * time.Hour)}},

		{input: `coalesce extra`, err: "wrong argument count"},
		{input: `coalesce {
			max_pending
		}`, err: "wrong argument count"},
		{input: `coalesce {
			max_pending 1KiB 2KiB
		}`, err: "wrong argument count"},
		{input: `coalesce {
			max_pending 1KiB
			max_pending 2KiB
		}`, err: "max_pending already specified"},
		{input: `coalesce {
			max_total 1MiB
			max_total 2MiB
		}`, err: "max_total already specified"},
		{input: `coalesce {
			close_timeout 1s
			close_timeout 2s
		}`, err: "close_timeout already specified"},
		{input: `coalesce {
			max_pending lots
		}`, err: "parsing max_pending"},
		{input: `coalesce {
			max_total 0
		}`, err: "max_total out of range"},
		{input: `coalesce {
			close_timeout
		}`, err: "wrong argument count"},
		{input: `coalesce {
			close_timeout 1s 2s
		}`, err: "wrong argument count"},
		{input: `coalesce {
			close_timeout soon
		}`, err: "parsing close_timeout"},
		{input: `coalesce {
			close_timeout -1s
		}`, err: "close_timeout must be positive"},
		{input: `coalesce {
			max_pendingg 1KiB
		}`, err: "unrecognized subdirective 'max_pendingg'"},
	} {
		var got CoalesceWrapper
		err := got.UnmarshalCaddyfile(caddyfile.NewTestDispenser(tc.input))
		switch {
		case tc.err == "" && err != nil:
			t.Errorf("%s: %v", tc.input, err)
		case tc.err != "" && (err == nil || !strings.Contains(err.Error(), tc.err)):
			t.Errorf("%s: error %v, want one with %q", tc.input, err, tc.err)
		case tc.err == "" && got != tc.want:
			t.Errorf("%s: got %+v, want %+v", tc.input, got, tc.want)
		}
	}
}

// The wrapper in the servers global option, before and after tls.
func TestListenerCaddyfileAdapt(t *testing.T) {
	const input = `{
	servers {
		listener_wrappers {
			coalesce {
				max_pending 32KiB
			}
			tls
			coalesce
		}
	}
}

localhost:8443 {
	respond "hi"
}
`
	out, _, err := caddyconfig.GetAdapter("caddyfile").Adapt([]byte(input), nil)
	if err != nil {
		t.Fatal(err)
	}
	var cfg struct {
		Apps struct {
			HTTP struct {
				Servers map[string]struct {
					ListenerWrappers []map[string]any `json:"listener_wrappers"`
				} `json:"servers"`
			} `json:"http"`
		} `json:"apps"`
	}
	if err := json.Unmarshal(out, &cfg); err != nil {
		t.Fatal(err)
	}
	if len(cfg.Apps.HTTP.Servers) != 1 {
		t.Fatalf("servers: %s", out)
	}
	for _, srv := range cfg.Apps.HTTP.Servers {
		got, _ := json.Marshal(srv.ListenerWrappers)
		want := `[{"max_pending":32768,"wrapper":"coalesce"},{"wrapper":"tls"},{"wrapper":"coalesce"}]`
		if string(got) != want {
			t.Fatalf("listener_wrappers = %s, want %s", got, want)
		}
	}

	_, _, err = caddyconfig.GetAdapter("caddyfile").Adapt([]byte(strings.Replace(input, "max_pending", "max_pendin", 1)), nil)
	if err == nil || !strings.Contains(err.Error(), "unrecognized subdirective 'max_pendin'") {
		t.Fatalf("typo adapted: %v", err)
	}
}

func TestListenerProvision(t *testing.T) {
	for _, tc := range []struct {
		json string
		want CoalesceWrapper
		err  string
	}{
		{json: `{}`, want: CoalesceWrapper{MaxPending: 64 << 10, MaxTotal: 64 << 20, CloseTimeout: caddy.Duration(5 * time.Second)}},
		{json: `{"max_pending": 8192, "max_total": 1048576, "close_timeout": "250ms"}`,
			want: CoalesceWrapper{MaxPending: 8192, MaxTotal: 1 << 20, CloseTimeout: caddy.Duration(250 * time.Millisecond)}},
		{json: `{"max_pending": 134217728}`, want: CoalesceWrapper{MaxPending: 128 << 20, MaxTotal: 128 << 20, CloseTimeout: caddy.Duration(5 * time.Second)}},
		{json: `{"max_pending": -1}`, err: "max_pending must not be negative"},
		{json: `{"max_pending": 2147483648}`, err: "max_pending must be at most"},
		{json: `{"max_total": -5}`, err: "max_total must not be negative"},
		{json: `{"max_pending": 65536, "max_total": 1000}`, err: "must be at least max_pending"},
		{json: `{"close_timeout": "-1s"}`, err: "close_timeout must not be negative"},
	} {
		var w CoalesceWrapper
		if err := json.Unmarshal([]byte(tc.json), &w); err != nil {
			t.Fatal(err)
		}
		ctx, cancel := caddy.NewContext(caddy.Context{Context: context.Background()})
		err := w.Provision(ctx)
		if err == nil {
			err = w.Validate()
		}
		cancel()
		switch {
		case tc.err == "" && err != nil:
			t.Errorf("%s: %v", tc.json, err)
		case tc.err != "" && (err == nil || !strings.Contains(err.Error(), tc.err)):
			t.Errorf("%s: error %v, want one with %q", tc.json, err, tc.err)
		case tc.err == "":
			got := CoalesceWrapper{MaxPending: w.MaxPending, MaxTotal: w.MaxTotal, CloseTimeout: w.CloseTimeout}
			if got != tc.want {
				t.Errorf("%s: got %+v, want %+v", tc.json, got, tc.want)
			}
			if w.limits.maxPending != int(w.MaxPending) || w.limits.budget.max != w.MaxTotal/coalesceChunkSize ||
				w.limits.closeTimeout != time.Duration(w.CloseTimeout) {
				t.Errorf("%s: limits %+v", tc.json, w.limits)
			}
		}
	}
}

// lwGather returns the value of each caddy_h2file_coalesce_ metric in reg.
func lwGather(t *testing.T, reg prometheus.Gatherer) map[string]float64 {
	t.Helper()
	mfs, err := reg.Gather()
	if err != nil {
		t.Fatal(err)
	}
	got := map[string]float64{}
	for _, mf := range mfs {
		if !strings.HasPrefix(mf.GetName(), "caddy_h2file_coalesce_") {
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

// The metrics are registered in the config's registry (twice is fine)
// and count socket writes, bytes and the writes saved.
func TestListenerMetrics(t *testing.T) {
	lwNoLeaks(t)
	ctx, cancel := caddy.NewContext(caddy.Context{Context: context.Background()})
	defer cancel()
	var w, w2 CoalesceWrapper
	if err := w.Provision(ctx); err != nil {
		t.Fatal(err)
	}
	if err := w2.Provision(ctx); err != nil {
		t.Fatalf("second Provision: %v", err)
	}
	reg := ctx.GetMetricsRegistry()
	before := lwGather(t, reg)
	for _, name := range []string{"batches_total", "bytes_total", "writes_coalesced_total", "backpressure_waits_total", "buffer_bytes"} {
		if _, ok := before["caddy_h2file_coalesce_"+name]; !ok {
			t.Errorf("metric caddy_h2file_coalesce_%s not registered", name)
		}
	}

	ln, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		t.Fatal(err)
	}
	wln := w.WrapListener(ln)
	defer wln.Close()
	client, err := net.Dial("tcp", ln.Addr().String())
	if err != nil {
		t.Fatal(err)
	}
	defer client.Close()
	conn, err := wln.Accept()
	if err != nil {
		t.Fatal(err)
	}
	read := lwAsync(func() []byte { b, _ := io.ReadAll(client); return b })
	const writes, size = 2000, 100
	for range writes {
		if _, err := conn.Write(make([]byte, size)); err != nil {
			t.Fatal(err)
		}
	}
	conn.Close()
	if got := lwRecv(t, read, "reader"); len(got) != writes*size {
		t.Fatalf("peer got %d bytes", len(got))
	}
	after := lwGather(t, reg)
	delta := func(name string) float64 {
		return after["caddy_h2file_coalesce_"+name] - before["caddy_h2file_coalesce_"+name]
	}
	batches, bytes, saved := delta("batches_total"), delta("bytes_total"), delta("writes_coalesced_total")
	t.Logf("%d writes: %v socket writes, %v saved, %v bytes", writes, batches, saved, bytes)
	// a Write split across two batches counts in both
	if bytes != writes*size || batches < 1 || batches > writes || batches+saved < writes || batches+saved > writes+batches {
		t.Errorf("batches %v, saved %v for %d writes; bytes %v, want %d", batches, saved, writes, bytes, writes*size)
	}
}

// lwPositions are the places of the wrapper in the listener wrappers:
// none, below TLS, above TLS (the default), and both.
var lwPositions = []struct {
	name     string
	wrappers []any
}{
	{"none", nil},
	{"below", []any{map[string]any{"wrapper": "coalesce"}, map[string]any{"wrapper": "tls"}}},
	{"above", []any{map[string]any{"wrapper": "coalesce"}}},
	{"both", []any{
		map[string]any{"wrapper": "coalesce", "max_pending": 32 << 10},
		map[string]any{"wrapper": "tls"},
		map[string]any{"wrapper": "coalesce", "close_timeout": "2s"},
	}},
}

// lwSite is the set of servers Caddy runs for one wrapper position.
type lwSite struct {
	main, mtls, cbc, h2c int // ports
}

// lwBackend is the upstream of reverse_proxy: /stream sends a line, then
// waits for the test to have received it before sending the second;
// /ws switches protocols and echoes lines.
type lwBackend struct {
	mu      sync.Mutex
	release map[string]chan struct{}
	prompt  map[string]bool // the first line reached the client before the second was sent
}

func (b *lwBackend) ServeHTTP(w http.ResponseWriter, r *http.Request) {
	switch r.URL.Path {
	case "/stream":
		id := r.URL.Query().Get("id")
		b.mu.Lock()
		ch := b.release[id]
		b.mu.Unlock()
		io.WriteString(w, "first\n")
		http.NewResponseController(w).Flush()
		prompt := false
		select {
		case <-ch:
			prompt = true
		case <-time.After(10 * time.Second):
		}
		b.mu.Lock()
		b.prompt[id] = prompt
		b.mu.Unlock()
		io.WriteString(w, "second\n")
	case "/ws":
		if r.Header.Get("Upgrade") != "lwecho" {
			http.Error(w, "upgrade required", http.StatusBadRequest)
			return
		}
		conn, brw, err := http.NewResponseController(w).Hijack()
		if err != nil {
			return
		}
		defer conn.Close()
		io.WriteString(conn, "HTTP/1.1 101 Switching Protocols\r\nConnection: Upgrade\r\nUpgrade: lwecho\r\n\r\n")
		for {
			line, err := brw.ReadString('\n')
			if err != nil {
				return
			}
			if _, err := io.WriteString(conn, "echo "+line); err != nil {
				return
			}
		}
	default:
		http.NotFound(w, r)
	}
}

// lwStream registers a /stream request and returns its id and release.
func (b *lwBackend) stream(id string) chan struct{} {
	ch := make(chan struct{})
	b.mu.Lock()
	b.release[id] = ch
	b.mu.Unlock()
	return ch
}

const lwTLSBody = "version={http.request.tls.version} proto={http.request.tls.proto} " +
	"mutual={http.request.tls.proto_mutual} cipher={http.request.tls.cipher_suite} " +
	"sni={http.request.tls.server_name} resumed={http.request.tls.resumed} " +
	"scheme={http.request.scheme} http={http.request.proto}"

// lwCaddyJSON builds a config with, for each position, a TLS server
// (h1, h2, h3) with the routes under test, a TLS server requiring client
// certificates, a TLS server with only a cipher suite HTTP/2 forbids, and
// a cleartext server with h2c.
func lwCaddyJSON(t *testing.T, sites map[string]*lwSite, root, backend string, caDER []byte, httpPort int) []byte {
	static := func(body string) map[string]any {
		return map[string]any{"handler": "static_response", "status_code": 200, "body": body}
	}
	route := func(path string, handler map[string]any, extra ...map[string]any) map[string]any {
		m := map[string]any{"path": []string{path}}
		for _, e := range extra {
			for k, v := range e {
				m[k] = v
			}
		}
		return map[string]any{"match": []any{m}, "handle": []any{handler}, "terminal": true}
	}
	proxy := map[string]any{
		"handler":        "reverse_proxy",
		"upstreams":      []any{map[string]any{"dial": backend}},
		"flush_interval": -1,
	}
	routes := []any{
		route("/tls", static(lwTLSBody)),
		route("/proto", static("https"), map[string]any{"protocol": "https"}),
		route("/proto", static("not https")),
		route("/files/*", map[string]any{"handler": "file_server", "root": root}),
		route("/h2files/*", map[string]any{"handler": "h2_file_server", "root": root}),
		route("/stream", proxy),
		route("/ws", proxy),
	}
	servers := map[string]any{}
	for _, pos := range lwPositions {
		s := sites[pos.name]
		server := func(port int, protocols []string, policies []any, routes []any) map[string]any {
			srv := map[string]any{
				"listen":    []string{fmt.Sprintf("127.0.0.1:%d", port)},
				"protocols": protocols,
				"routes":    routes,
			}
			if pos.wrappers != nil {
				srv["listener_wrappers"] = pos.wrappers
			}
			if policies != nil {
				srv["tls_connection_policies"] = policies
				srv["automatic_https"] = map[string]any{"disable_redirects": true}
			} else {
				srv["automatic_https"] = map[string]any{"disable": true}
			}
			return srv
		}
		servers["main_"+pos.name] = server(s.main, []string{"h1", "h2", "h3"}, []any{map[string]any{}}, routes)
		servers["mtls_"+pos.name] = server(s.mtls, []string{"h1", "h2"}, []any{map[string]any{
			"client_authentication": map[string]any{
				"ca":   map[string]any{"provider": "inline", "trusted_ca_certs": []string{base64.StdEncoding.EncodeToString(caDER)}},
				"mode": "require_and_verify",
			},
		}}, []any{route("/tls", static("{http.request.tls.client.subject} "+lwTLSBody))})
		servers["cbc_"+pos.name] = server(s.cbc, []string{"h1", "h2"}, []any{map[string]any{
			"cipher_suites": []string{"TLS_ECDHE_ECDSA_WITH_AES_128_CBC_SHA"},
			"protocol_max":  "tls1.2",
		}}, []any{route("/tls", static(lwTLSBody))})
		servers["h2c_"+pos.name] = server(s.h2c, []string{"h1", "h2", "h2c"}, nil, routes)
	}
	cfg := map[string]any{
		"admin":   map[string]any{"disabled": true, "config": map[string]any{"persist": false}},
		"storage": map[string]any{"module": "file_system", "root": filepath.Join(t.TempDir(), "storage")},
		"logging": map[string]any{"logs": map[string]any{"default": map[string]any{
			"level": "ERROR", "writer": map[string]any{"output": "discard"},
		}}},
		"apps": map[string]any{
			"http": map[string]any{"http_port": httpPort, "grace_period": "1ns", "servers": servers},
			"tls": map[string]any{
				"certificates": map[string]any{"automate": []string{"localhost"}},
				"automation": map[string]any{"policies": []any{map[string]any{
					"subjects": []string{"localhost"},
					"issuers":  []any{map[string]any{"module": "internal"}},
				}}},
			},
			"pki": map[string]any{"certificate_authorities": map[string]any{
				"local": map[string]any{"install_trust": false},
			}},
		},
	}
	b, err := json.Marshal(cfg)
	if err != nil {
		t.Fatal(err)
	}
	return b
}

type lwResponse struct {
	status     int
	proto      int
	alpn       string
	body       string
	altSvc     string
	err        error
	sum        [32]byte
	length     int
	streamNote string
}

// lwGet fetches url and returns what the tests compare.
func lwGet(client *http.Client, url string) lwResponse {
	resp, err := client.Get(url)
	if err != nil {
		return lwResponse{err: err}
	}
	defer resp.Body.Close()
	h := sha256.New()
	var head strings.Builder
	n, err := io.Copy(io.MultiWriter(h, &lwPrefixWriter{w: &head, max: 4096}), resp.Body)
	r := lwResponse{status: resp.StatusCode, proto: resp.ProtoMajor, body: head.String(),
		altSvc: resp.Header.Get("Alt-Svc"), err: err, length: int(n)}
	copy(r.sum[:], h.Sum(nil))
	if resp.TLS != nil {
		r.alpn = resp.TLS.NegotiatedProtocol
	}
	return r
}

// lwPrefixWriter keeps the first max bytes written.
type lwPrefixWriter struct {
	w   *strings.Builder
	max int
}

func (p *lwPrefixWriter) Write(b []byte) (int, error) {
	if room := p.max - p.w.Len(); room > 0 {
		p.w.Write(b[:min(room, len(b))])
	}
	return len(b), nil
}

// Caddy with the wrapper below TLS, above it and in both places serves
// every protocol and feature exactly as without it.
func TestListenerCaddy(t *testing.T) {
	lwNoLeaks(t)
	dir := t.TempDir()

	root := filepath.Join(dir, "www")
	big := make([]byte, 6<<20+12345)
	rand.Read(big)
	for _, sub := range []string{"files", "h2files"} {
		if err := os.MkdirAll(filepath.Join(root, sub), 0o755); err != nil {
			t.Fatal(err)
		}
		if err := os.WriteFile(filepath.Join(root, sub, "big.bin"), big, 0o644); err != nil {
			t.Fatal(err)
		}
	}
	bigSum := sha256.Sum256(big)

	backend := &lwBackend{release: map[string]chan struct{}{}, prompt: map[string]bool{}}
	bln, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		t.Fatal(err)
	}
	bsrv := &http.Server{Handler: backend}
	go bsrv.Serve(bln)
	t.Cleanup(func() { bsrv.Close() })

	ca := newTestCert(t)
	caDER, clientCert := ca.TLS.Leaf.Raw, ca.clientCert(t, "lw client")
	ports := freePorts(t, 4*len(lwPositions)+1)
	sites := map[string]*lwSite{}
	for i, pos := range lwPositions {
		sites[pos.name] = &lwSite{main: ports[4*i], mtls: ports[4*i+1], cbc: ports[4*i+2], h2c: ports[4*i+3]}
	}
	cfg := lwCaddyJSON(t, sites, root, bln.Addr().String(), caDER, ports[len(ports)-1])
	loadCaddy(t, cfg)
	// the internal issuer makes the certificate in the background
	for _, s := range sites {
		waitListening(t, insecureTLS(), loopback(s.main))
	}

	h1, h2 := newClient(t, "h1", nil), newClient(t, "h2", nil)
	h1c, h2c := newClient(t, "h1c", nil), newClient(t, "h2c", nil)
	clients := map[string]*http.Client{"h1": h1, "h2": h2}
	url := func(port int, path string) string { return fmt.Sprintf("https://127.0.0.1:%d%s", port, path) }
	curl := func(port int, path string) string { return fmt.Sprintf("http://127.0.0.1:%d%s", port, path) }

	// what the server without the wrapper answers
	ref := sites["none"]
	refTLS := map[string]lwResponse{}
	for proto, c := range clients {
		refTLS[proto] = lwGet(c, url(ref.main, "/tls"))
	}

	// the wrapper's own counters show whether traffic went through it
	reg := prometheus.NewRegistry()
	reg.MustRegister(coalesceStats.bytes)
	for _, pos := range lwPositions {
		s := sites[pos.name]
		before := lwGather(t, reg)["caddy_h2file_coalesce_bytes_total"]
		t.Run(pos.name, func(t *testing.T) {
			defer func() {
				// (other positions' connections may still send a few bytes)
				sent := lwGather(t, reg)["caddy_h2file_coalesce_bytes_total"] - before
				if (pos.name == "none") != (sent < float64(len(big))) {
					t.Errorf("%v bytes went through the wrapper", sent)
				}
			}()
			t.Run("tls_state", func(t *testing.T) {
				for proto, c := range clients {
					r := lwGet(c, url(s.main, "/tls"))
					want := refTLS[proto]
					if r.err != nil || r.status != 200 {
						t.Fatalf("%s: %d %v", proto, r.status, r.err)
					}
					wantMajor, wantALPN := 1, "http/1.1"
					if proto == "h2" {
						wantMajor, wantALPN = 2, "h2"
					}
					if r.proto != wantMajor || r.alpn != wantALPN {
						t.Errorf("%s: HTTP/%d with ALPN %q, want HTTP/%d with %q", proto, r.proto, r.alpn, wantMajor, wantALPN)
					}
					if r.body != want.body || !strings.Contains(r.body, "version=tls1.3 proto="+wantALPN) || !strings.Contains(r.body, "scheme=https") {
						t.Errorf("%s: TLS placeholders\n got %q\nwant %q", proto, r.body, want.body)
					}
				}
			})
			t.Run("protocol_matcher", func(t *testing.T) {
				for proto, c := range clients {
					if r := lwGet(c, url(s.main, "/proto")); r.body != "https" {
						t.Errorf("%s: protocol https matcher: %q %v", proto, r.body, r.err)
					}
				}
			})
			t.Run("alt_svc", func(t *testing.T) {
				for proto, c := range clients {
					r := lwGet(c, url(s.main, "/tls"))
					want := refTLS[proto].altSvc
					got := strings.ReplaceAll(r.altSvc, fmt.Sprint(s.main), "PORT")
					want = strings.ReplaceAll(want, fmt.Sprint(ref.main), "PORT")
					if got != want || !strings.Contains(got, "h3=") {
						t.Errorf("%s: Alt-Svc %q, want %q", proto, r.altSvc, refTLS[proto].altSvc)
					}
				}
			})
			t.Run("client_auth", func(t *testing.T) {
				for _, proto := range []string{"h1", "h2"} {
					with := newClient(t, proto, &tls.Config{ServerName: "localhost", InsecureSkipVerify: true, //nolint:gosec
						Certificates: []tls.Certificate{clientCert}})
					r := lwGet(with, fmt.Sprintf("https://localhost:%d/tls", s.mtls))
					if r.err != nil || r.status != 200 || !strings.HasPrefix(r.body, "CN=lw client ") || !strings.Contains(r.body, "mutual=") {
						t.Errorf("%s with client certificate: %d %q %v", proto, r.status, r.body, r.err)
					}
					without := newClient(t, proto, nil)
					if r := lwGet(without, fmt.Sprintf("https://localhost:%d/tls", s.mtls)); r.err == nil {
						t.Errorf("%s without client certificate: %d %q", proto, r.status, r.body)
					}
				}
			})
			t.Run("http2_tls_requirements", func(t *testing.T) {
				cbc := func() *tls.Config {
					return &tls.Config{ServerName: "localhost", InsecureSkipVerify: true, //nolint:gosec
						MaxVersion: tls.VersionTLS12, CipherSuites: []uint16{tls.TLS_ECDHE_ECDSA_WITH_AES_128_CBC_SHA}}
				}
				// the server greets with GOAWAY(INADEQUATE_SECURITY)
				cfg := cbc()
				cfg.NextProtos = []string{"h2"}
				conn, err := tls.Dial("tcp", fmt.Sprintf("127.0.0.1:%d", s.cbc), cfg)
				if err != nil {
					t.Fatal(err)
				}
				conn.SetDeadline(time.Now().Add(10 * time.Second))
				f, err := http2.NewFramer(io.Discard, conn).ReadFrame()
				conn.Close()
				if ga, ok := f.(*http2.GoAwayFrame); err != nil || !ok || ga.ErrCode != http2.ErrCodeInadequateSecurity {
					t.Errorf("first frame over a forbidden cipher suite: %v %v", f, err)
				}
				if r := lwGet(newClient(t, "h2", cbc()), url(s.cbc, "/tls")); r.err == nil {
					t.Errorf("HTTP/2 over a forbidden cipher suite: %d %q", r.status, r.body)
				}
				r := lwGet(newClient(t, "h1", cbc()), url(s.cbc, "/tls"))
				if r.err != nil || !strings.Contains(r.body, "version=tls1.2 proto=http/1.1 ") {
					t.Errorf("HTTP/1.1 over a forbidden cipher suite: %d %q %v", r.status, r.body, r.err)
				}
			})
			t.Run("h2c", func(t *testing.T) {
				for proto, c := range map[string]*http.Client{"h1c": h1c, "h2c": h2c} {
					r := lwGet(c, curl(s.h2c, "/tls"))
					wantHTTP := map[string]string{"h1c": "HTTP/1.1", "h2c": "HTTP/2.0"}[proto]
					want := "version= proto= mutual= cipher= sni= resumed= scheme=http http=" + wantHTTP
					if r.err != nil || r.body != want {
						t.Errorf("%s: %q %v, want %q", proto, r.body, r.err, want)
					}
					if r := lwGet(c, curl(s.h2c, "/proto")); r.body != "not https" {
						t.Errorf("%s: protocol matcher: %q %v", proto, r.body, r.err)
					}
					for _, path := range []string{"/files/big.bin", "/h2files/big.bin"} {
						if r := lwGet(c, curl(s.h2c, path)); r.err != nil || r.sum != bigSum {
							t.Errorf("%s %s: download: %d bytes, %v", proto, path, r.length, r.err)
						}
					}
				}
			})
			t.Run("downloads", func(t *testing.T) {
				for proto, c := range clients {
					for _, path := range []string{"/files/big.bin", "/h2files/big.bin"} {
						r := lwGet(c, url(s.main, path))
						if r.err != nil || r.status != 200 || r.sum != bigSum {
							t.Errorf("%s %s: %d, %d bytes, %v", proto, path, r.status, r.length, r.err)
						}
					}
				}
			})
			t.Run("streaming", func(t *testing.T) {
				for proto, c := range map[string]*http.Client{"h1": h1, "h2": h2, "h2c": h2c} {
					id := pos.name + "-" + proto
					release := backend.stream(id)
					u := url(s.main, "/stream?id="+id)
					if proto == "h2c" {
						u = curl(s.h2c, "/stream?id="+id)
					}
					resp, err := c.Get(u)
					if err != nil {
						t.Fatalf("%s: %v", proto, err)
					}
					br := bufio.NewReader(resp.Body)
					first, err := br.ReadString('\n')
					close(release)
					rest, _ := io.ReadAll(br)
					resp.Body.Close()
					backend.mu.Lock()
					prompt := backend.prompt[id]
					backend.mu.Unlock()
					if err != nil || first != "first\n" || string(rest) != "second\n" || !prompt {
						t.Errorf("%s: got %q, %q (%v); first line arrived before the second was sent: %v", proto, first, rest, err, prompt)
					}
				}
			})
			t.Run("upgrade", func(t *testing.T) {
				conn, err := tls.Dial("tcp", fmt.Sprintf("127.0.0.1:%d", s.main),
					&tls.Config{ServerName: "localhost", InsecureSkipVerify: true, NextProtos: []string{"http/1.1"}}) //nolint:gosec
				if err != nil {
					t.Fatal(err)
				}
				defer conn.Close()
				conn.SetDeadline(time.Now().Add(30 * time.Second))
				io.WriteString(conn, "GET /ws HTTP/1.1\r\nHost: localhost\r\nConnection: Upgrade\r\nUpgrade: lwecho\r\n\r\n")
				br := bufio.NewReader(conn)
				resp, err := http.ReadResponse(br, nil)
				if err != nil {
					t.Fatal(err)
				}
				if resp.StatusCode != http.StatusSwitchingProtocols {
					t.Fatalf("status %d", resp.StatusCode)
				}
				// full duplex: a writer and a reader at the same time, then
				// ping-pong
				const n = 100
				go func() {
					for i := range n {
						fmt.Fprintf(conn, "msg %d\n", i)
					}
				}()
				for i := range n {
					line, err := br.ReadString('\n')
					if err != nil || line != fmt.Sprintf("echo msg %d\n", i) {
						t.Fatalf("line %d: %q %v", i, line, err)
					}
				}
				for i := range n {
					fmt.Fprintf(conn, "ping %d\n", i)
					line, err := br.ReadString('\n')
					if err != nil || line != fmt.Sprintf("echo ping %d\n", i) {
						t.Fatalf("ping %d: %q %v", i, line, err)
					}
				}
			})
		})
	}
	for _, c := range []*http.Client{h1, h2, h1c, h2c} {
		c.Transport.(*http.Transport).CloseIdleConnections()
	}
}
