package integration

// Caddy for TestListenerCaddy (listener_caddy_test.go): the wrapper
// positions, the servers of each (main, client auth, a cipher suite HTTP/2
// forbids, h2c), the reverse_proxy backend, and what a response gives.

import (
	"crypto/sha256"
	"encoding/base64"
	"encoding/json"
	"fmt"
	"io"
	"net/http"
	"path/filepath"
	"strings"
	"sync"
	"testing"
	"time"

	_ "github.com/caddyserver/caddy/v2/modules/standard"

	"github.com/h2file/caddy-h2file/internal/harness/caddysite"
)

// lwPositions are the places of the wrapper in the listener wrappers:
// none, below TLS, above TLS (the default), both, and below TLS with
// h2file's HTTP/2 engine above it.
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
	{"engine", engineWrappers()},
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

// stream registers a /stream request and returns its release channel.
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
	cfg := caddysite.InternalCAConfig(filepath.Join(t.TempDir(), "storage"), "discard",
		map[string]any{"http_port": httpPort, "grace_period": "1ns", "servers": servers})
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
