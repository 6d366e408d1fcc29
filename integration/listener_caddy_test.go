package integration

import (
	"bufio"
	"crypto/rand"
	"crypto/sha256"
	"crypto/tls"
	"fmt"
	"io"
	"net"
	"net/http"
	"os"
	"path/filepath"
	"strings"
	"testing"
	"time"

	"github.com/prometheus/client_golang/prometheus"
	"golang.org/x/net/http2"

	"github.com/h2file/caddy-h2file/internal/coalesce"
	"github.com/h2file/caddy-h2file/internal/coalesce/coalescetest"
	h2engine "github.com/h2file/caddy-h2file/internal/h2"
	"github.com/h2file/caddy-h2file/internal/harness"
	"github.com/h2file/caddy-h2file/internal/harness/caddysite"

	_ "github.com/caddyserver/caddy/v2/modules/standard"
)

// Caddy with the wrapper below TLS, above it and in both places serves
// every protocol and feature exactly as without it.
func TestListenerCaddy(t *testing.T) {
	coalescetest.NoLeaks(t)
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

	ca := harness.NewCert(t)
	caDER, clientCert := ca.TLS.Leaf.Raw, ca.ClientCert(t, "lw client")
	ports := harness.FreePorts(t, 4*len(lwPositions)+1)
	sites := map[string]*lwSite{}
	for i, pos := range lwPositions {
		sites[pos.name] = &lwSite{main: ports[4*i], mtls: ports[4*i+1], cbc: ports[4*i+2], h2c: ports[4*i+3]}
	}
	cfg := lwCaddyJSON(t, sites, root, bln.Addr().String(), caDER, ports[len(ports)-1])
	caddysite.LoadCaddy(t, cfg)
	// the internal issuer makes the certificate in the background
	for _, s := range sites {
		caddysite.WaitListening(t, harness.InsecureTLS(), harness.Loopback(s.main))
	}

	h1, h2 := harness.NewClient(t, "h1", nil), harness.NewClient(t, "h2", nil)
	h1c, h2c := harness.NewClient(t, "h1c", nil), harness.NewClient(t, "h2c", nil)
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
	reg.MustRegister(coalesce.Metrics.Bytes)
	for _, pos := range lwPositions {
		s := sites[pos.name]
		before := harness.Gather(t, reg, "caddy_h2file_coalesce_")["caddy_h2file_coalesce_bytes_total"]
		engineBefore := h2engine.ReadStats().Streams
		t.Run(pos.name, func(t *testing.T) {
			defer func() {
				// HTTP/2 over TLS went through the engine, in its position
				// only
				if served := h2engine.ReadStats().Streams - engineBefore; (pos.name == "engine") != (served > 0) {
					t.Errorf("the engine served %d requests", served)
				}
				// (other positions' connections may still send a few bytes)
				sent := harness.Gather(t, reg, "caddy_h2file_coalesce_")["caddy_h2file_coalesce_bytes_total"] - before
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
					with := harness.NewClient(t, proto, &tls.Config{ServerName: "localhost", InsecureSkipVerify: true, //nolint:gosec
						Certificates: []tls.Certificate{clientCert}})
					r := lwGet(with, fmt.Sprintf("https://localhost:%d/tls", s.mtls))
					if r.err != nil || r.status != 200 || !strings.HasPrefix(r.body, "CN=lw client ") || !strings.Contains(r.body, "mutual=") {
						t.Errorf("%s with client certificate: %d %q %v", proto, r.status, r.body, r.err)
					}
					without := harness.NewClient(t, proto, nil)
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
				if r := lwGet(harness.NewClient(t, "h2", cbc()), url(s.cbc, "/tls")); r.err == nil {
					t.Errorf("HTTP/2 over a forbidden cipher suite: %d %q", r.status, r.body)
				}
				r := lwGet(harness.NewClient(t, "h1", cbc()), url(s.cbc, "/tls"))
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
