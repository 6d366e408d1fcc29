package h2file

import (
	"bytes"
	"crypto/ecdsa"
	"crypto/elliptic"
	"crypto/rand"
	"crypto/tls"
	"crypto/x509"
	"crypto/x509/pkix"
	"encoding/json"
	"encoding/pem"
	"fmt"
	"io"
	"math/big"
	"net"
	"net/http"
	"os"
	"path/filepath"
	"strconv"
	"strings"
	"testing"
	"time"

	"github.com/caddyserver/caddy/v2"
)

// admWriteFiles writes files (name → content) under dir.
func admWriteFiles(t *testing.T, dir string, files map[string]string) {
	t.Helper()
	for name, content := range files {
		if err := os.WriteFile(filepath.Join(dir, name), []byte(content), 0o644); err != nil {
			t.Fatal(err)
		}
	}
}

// admSelfSigned returns a PEM certificate and key for localhost and
// 127.0.0.1, and a pool that trusts it.
func admSelfSigned(t *testing.T) (certPEM, keyPEM string, pool *x509.CertPool) {
	t.Helper()
	key, err := ecdsa.GenerateKey(elliptic.P256(), rand.Reader)
	if err != nil {
		t.Fatal(err)
	}
	tmpl := &x509.Certificate{
		SerialNumber:          big.NewInt(1),
		Subject:               pkix.Name{CommonName: "localhost"},
		DNSNames:              []string{"localhost"},
		IPAddresses:           []net.IP{net.IPv4(127, 0, 0, 1)},
		NotBefore:             time.Now().Add(-time.Hour),
		NotAfter:              time.Now().Add(time.Hour),
		KeyUsage:              x509.KeyUsageDigitalSignature | x509.KeyUsageCertSign,
		ExtKeyUsage:           []x509.ExtKeyUsage{x509.ExtKeyUsageServerAuth},
		BasicConstraintsValid: true,
		IsCA:                  true,
	}
	der, err := x509.CreateCertificate(rand.Reader, tmpl, tmpl, &key.PublicKey, key)
	if err != nil {
		t.Fatal(err)
	}
	cert, err := x509.ParseCertificate(der)
	if err != nil {
		t.Fatal(err)
	}
	keyDER, err := x509.MarshalECPrivateKey(key)
	if err != nil {
		t.Fatal(err)
	}
	pool = x509.NewCertPool()
	pool.AddCert(cert)
	return string(pem.EncodeToMemory(&pem.Block{Type: "CERTIFICATE", Bytes: der})),
		string(pem.EncodeToMemory(&pem.Block{Type: "EC PRIVATE KEY", Bytes: keyDER})),
		pool
}

// admServer is Caddy running in this process with one site served by
// h2_file_server, configured through the admin API.
type admServer struct {
	t         *testing.T
	adminAddr string
	siteAddr  string
	storage   string
	certPEM   string
	keyPEM    string
	client    *http.Client // for the site
	admin     *http.Client // for the admin API
	scheme    string
	wantProto int
}

// admStart starts Caddy with h2_file_server serving root. With useTLS the
// site is served over TLS and HTTP/2.
func admStart(t *testing.T, root string, useTLS bool) *admServer {
	t.Helper()
	// keep Caddy's state out of $HOME
	t.Setenv("XDG_DATA_HOME", t.TempDir())
	t.Setenv("XDG_CONFIG_HOME", t.TempDir())

	s := &admServer{
		t:         t,
		adminAddr: "127.0.0.1:" + strconv.Itoa(freePort(t)),
		siteAddr:  "127.0.0.1:" + strconv.Itoa(freePort(t)),
		storage:   t.TempDir(),
		admin:     &http.Client{Timeout: 10 * time.Second, Transport: &http.Transport{DisableKeepAlives: true}},
		scheme:    "http",
		wantProto: 1,
	}
	// each request on a new connection, so that none lingers on the
	// server of a replaced config
	transport := &http.Transport{DisableKeepAlives: true}
	if useTLS {
		var pool *x509.CertPool
		s.certPEM, s.keyPEM, pool = admSelfSigned(t)
		transport.TLSClientConfig = &tls.Config{RootCAs: pool, ServerName: "localhost", MinVersion: tls.VersionTLS12}
		transport.ForceAttemptHTTP2 = true
		s.scheme = "https"
		s.wantProto = 2
	}
	s.client = &http.Client{Timeout: 10 * time.Second, Transport: transport}

	if err := caddy.Load(s.config(map[string]any{"root": root, "hide": []string{"*.bak"}}), true); err != nil {
		t.Fatalf("starting Caddy: %v", err)
	}
	t.Cleanup(func() {
		// caddy.Stop leaves the admin endpoint running; a config with the
		// admin endpoint disabled shuts it down
		if err := caddy.Load([]byte(`{"admin": {"disabled": true, "config": {"persist": false}}}`), true); err != nil {
			t.Errorf("stopping the admin endpoint: %v", err)
		}
		if err := caddy.Stop(); err != nil {
			t.Errorf("stopping Caddy: %v", err)
		}
	})
	return s
}

// config returns the whole Caddy config with handler as the site's only
// handler (without the "handler" key).
func (s *admServer) config(handler map[string]any) []byte {
	s.t.Helper()
	h := map[string]any{"handler": "h2_file_server"}
	for k, v := range handler {
		h[k] = v
	}
	server := map[string]any{
		"listen":          []string{s.siteAddr},
		"automatic_https": map[string]any{"disable": true},
		"protocols":       []string{"h1", "h2"},
		"routes":          []any{map[string]any{"handle": []any{h}}},
	}
	apps := map[string]any{
		"http": map[string]any{"servers": map[string]any{"srv0": server}},
	}
	if s.certPEM != "" {
		server["tls_connection_policies"] = []any{map[string]any{}}
		apps["tls"] = map[string]any{
			"certificates": map[string]any{
				"load_pem": []any{map[string]any{"certificate": s.certPEM, "key": s.keyPEM}},
			},
		}
	}
	cfg := map[string]any{
		"admin":   map[string]any{"listen": s.adminAddr, "config": map[string]any{"persist": false}},
		"storage": map[string]any{"module": "file_system", "root": s.storage},
		"logging": map[string]any{"logs": map[string]any{"default": map[string]any{"level": "ERROR"}}},
		"apps":    apps,
	}
	b, err := json.Marshal(cfg)
	if err != nil {
		s.t.Fatal(err)
	}
	return b
}

// api sends a request to the admin API and returns the status and body.
func (s *admServer) api(method, path string, body []byte) (int, string) {
	s.t.Helper()
	req, err := http.NewRequest(method, "http://"+s.adminAddr+path, bytes.NewReader(body))
	if err != nil {
		s.t.Fatal(err)
	}
	if body != nil {
		req.Header.Set("Content-Type", "application/json")
	}
	resp, err := s.admin.Do(req)
	if err != nil {
		s.t.Fatalf("%s %s: %v", method, path, err)
	}
	defer resp.Body.Close()
	b, _ := io.ReadAll(resp.Body)
	return resp.StatusCode, string(b)
}

// mustAPI is api that fails the test unless the status is 200.
func (s *admServer) mustAPI(method, path string, body []byte) string {
	s.t.Helper()
	code, resp := s.api(method, path, body)
	if code != http.StatusOK {
		s.t.Fatalf("%s %s %s: status %d: %s", method, path, body, code, resp)
	}
	return resp
}

// get fetches path from the site and returns the status and body.
func (s *admServer) get(path string) (int, string, error) {
	resp, err := s.client.Get(s.scheme + "://" + s.siteAddr + path)
	if err != nil {
		return 0, "", err
	}
	defer resp.Body.Close()
	b, err := io.ReadAll(resp.Body)
	if err != nil {
		return 0, "", err
	}
	if resp.ProtoMajor != s.wantProto {
		return 0, "", fmt.Errorf("served over %s, want HTTP/%d", resp.Proto, s.wantProto)
	}
	return resp.StatusCode, string(b), nil
}

// await polls path until it answers with status and body (body "" for
// any), for up to 5 seconds.
func (s *admServer) await(path string, status int, body string) {
	s.t.Helper()
	deadline := time.Now().Add(5 * time.Second)
	for {
		code, got, err := s.get(path)
		if err == nil && code == status && (body == "" || got == body) {
			return
		}
		if time.Now().After(deadline) {
			s.t.Fatalf("GET %s: got %d %q (error %v), want %d %q", path, code, got, err, status, body)
		}
		time.Sleep(10 * time.Millisecond)
	}
}

const admHandlerPath = "/config/apps/http/servers/srv0/routes/0/handle/0"

func TestAdminReconfigure(t *testing.T) {
	for _, tc := range []struct {
		name string
		tls  bool
	}{
		{"http", false},
		{"https h2", true},
	} {
		t.Run(tc.name, func(t *testing.T) {
			rootA, rootB := t.TempDir(), t.TempDir()
			admWriteFiles(t, rootA, map[string]string{"a.txt": "A in root A\n", "b.txt": "B in root A\n"})
			admWriteFiles(t, rootB, map[string]string{"a.txt": "A in root B\n", "b.txt": "B in root B\n"})

			s := admStart(t, rootA, tc.tls)
			s.await("/a.txt", http.StatusOK, "A in root A\n")
			s.await("/nope.txt", http.StatusNotFound, "")

			// (1) a new config with another root
			s.mustAPI(http.MethodPost, "/load", s.config(map[string]any{"root": rootB, "hide": []string{"*.bak"}}))
			s.await("/a.txt", http.StatusOK, "A in root B\n")
			var h map[string]any
			if err := json.Unmarshal([]byte(s.mustAPI(http.MethodGet, admHandlerPath, nil)), &h); err != nil {
				t.Fatal(err)
			}
			if h["handler"] != "h2_file_server" || h["root"] != rootB {
				t.Fatalf("admin API reports the handler as %v", h)
			}

			// (2) hide a file
			s.mustAPI(http.MethodPatch, admHandlerPath+"/hide", []byte(`["*.bak", "a.txt"]`))
			s.await("/a.txt", http.StatusNotFound, "")
			s.await("/b.txt", http.StatusOK, "B in root B\n")
			if got := s.mustAPI(http.MethodGet, admHandlerPath+"/hide", nil); strings.Join(strings.Fields(got), "") != `["*.bak","a.txt"]` {
				t.Errorf("admin API reports hide as %s", got)
			}

			// (3) set, then change, the status code
			s.mustAPI(http.MethodPut, admHandlerPath+"/status_code", []byte(`202`))
			s.await("/b.txt", http.StatusAccepted, "B in root B\n")
			s.mustAPI(http.MethodPatch, admHandlerPath+"/status_code", []byte(`203`))
			s.await("/b.txt", http.StatusNonAuthoritativeInfo, "B in root B\n")

			// (4) a bad config is refused, and the running one stays
			code, resp := s.api(http.MethodPut, admHandlerPath+"/precompressed", []byte(`{"bogus": {}}`))
			if code == http.StatusOK || !strings.Contains(resp, "bogus") {
				t.Errorf("PUT of an unknown precompressed module: status %d: %s", code, resp)
			}
			s.await("/b.txt", http.StatusNonAuthoritativeInfo, "B in root B\n")
			s.await("/a.txt", http.StatusNotFound, "")
		})
	}
}
