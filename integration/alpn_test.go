package integration

import (
	"bytes"
	"context"
	"crypto/tls"
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"net"
	"net/http"
	"strings"
	"testing"
	"time"

	"github.com/caddyserver/caddy/v2"
	"golang.org/x/net/http2"

	"github.com/h2file/caddy-h2file/internal/coalesce"
	"github.com/h2file/caddy-h2file/internal/coalesce/coalescetest"
	"github.com/h2file/caddy-h2file/internal/harness"
	"github.com/h2file/caddy-h2file/internal/harness/caddysite"
)

// alpnPositions are the servers of TestALPNDecidesProtocol: stock Caddy
// (no wrapper) and the wrapper below tls, after it and in both places.
var alpnPositions = []struct {
	name     string
	wrappers []any
}{
	{"stock", nil},
	{"below", []any{map[string]any{"wrapper": "coalesce"}, map[string]any{"wrapper": "tls"}}},
	{"after", []any{map[string]any{"wrapper": "coalesce"}}},
	{"both", []any{map[string]any{"wrapper": "coalesce"}, map[string]any{"wrapper": "tls"}, map[string]any{"wrapper": "coalesce"}}},
}

// alpnBody is what every server answers: the protocol of the request.
const alpnBody = "proto={http.request.proto}"

// startALPNCaddy starts Caddy with one TLS server per position and a
// cleartext server (h1, h2c) behind the wrapper, and returns their
// addresses by name ("h2c" for the cleartext one).
func startALPNCaddy(t *testing.T) map[string]string {
	t.Helper()
	t.Setenv("XDG_DATA_HOME", t.TempDir())
	t.Setenv("XDG_CONFIG_HOME", t.TempDir())
	certPEM, keyPEM := caddysite.SelfSignedCert(t)
	routes := []any{map[string]any{"handle": []any{map[string]any{
		"handler": "static_response", "status_code": 200, "body": alpnBody,
	}}}}
	addrs := map[string]string{}
	servers := map[string]any{}
	for _, pos := range alpnPositions {
		addrs[pos.name] = fmt.Sprintf("127.0.0.1:%d", harness.FreePort(t))
		srv := map[string]any{
			"listen":                  []string{addrs[pos.name]},
			"protocols":               []string{"h1", "h2"},
			"routes":                  routes,
			"tls_connection_policies": []any{map[string]any{}},
			"automatic_https":         map[string]any{"disable": true},
		}
		if pos.wrappers != nil {
			srv["listener_wrappers"] = pos.wrappers
		}
		servers[pos.name] = srv
	}
	addrs["h2c"] = fmt.Sprintf("127.0.0.1:%d", harness.FreePort(t))
	servers["h2c"] = map[string]any{
		"listen":            []string{addrs["h2c"]},
		"protocols":         []string{"h1", "h2", "h2c"},
		"routes":            routes,
		"listener_wrappers": []any{map[string]any{"wrapper": "coalesce"}},
		"automatic_https":   map[string]any{"disable": true},
	}
	cfg := map[string]any{
		"admin":   map[string]any{"disabled": true, "config": map[string]any{"persist": false}},
		"logging": map[string]any{"logs": map[string]any{"default": map[string]any{"level": "ERROR"}}},
		"apps": map[string]any{
			"http": map[string]any{"grace_period": 1, "servers": servers},
			"tls": map[string]any{"certificates": map[string]any{
				"load_pem": []any{map[string]any{"certificate": string(certPEM), "key": string(keyPEM)}},
			}},
		},
	}
	raw, err := json.Marshal(cfg)
	if err != nil {
		t.Fatal(err)
	}
	if err := caddy.Load(raw, true); err != nil {
		t.Fatalf("loading Caddy config: %v", err)
	}
	t.Cleanup(func() { caddysite.StopTestCaddy(t) })
	return addrs
}

// alpnExchange is what a client saw on a raw TLS connection.
type alpnExchange struct {
	alpn   string // negotiated
	got    []byte // everything the server sent
	closed bool   // the server closed the connection (rather than keep it open)
}

// alpnProbe connects to addr over TLS offering alpn (none if empty),
// sends each of writes in a TLS record of its own (so that the server
// reads them one by one), and reads until the server closes the
// connection (or 20s pass: then closed is false).
func alpnProbe(t *testing.T, addr, alpn string, writes ...string) alpnExchange {
	t.Helper()
	cfg := &tls.Config{InsecureSkipVerify: true} //nolint:gosec // test certificate
	if alpn != "" {
		cfg.NextProtos = []string{alpn}
	}
	conn, err := tls.DialWithDialer(&net.Dialer{Timeout: 10 * time.Second}, "tcp", addr, cfg)
	if err != nil {
		t.Fatalf("%s: %v", addr, err)
	}
	defer conn.Close()
	for _, w := range writes {
		if _, err := io.WriteString(conn, w); err != nil {
			t.Fatalf("%s: writing: %v", addr, err)
		}
	}
	// every case ends with the server closing the connection; the
	// deadline only bounds a server that does not
	conn.SetReadDeadline(time.Now().Add(20 * time.Second))
	got, err := io.ReadAll(conn)
	var ne net.Error
	return alpnExchange{
		alpn:   conn.ConnectionState().NegotiatedProtocol,
		got:    got,
		closed: !errors.As(err, &ne) || !ne.Timeout(), // EOF, close_notify or a reset
	}
}

// alpnServedHTTP2 reports whether the bytes are HTTP/2 frames: the
// server's SETTINGS frame comes first.
func alpnServedHTTP2(got []byte) bool {
	return len(got) >= 9 && got[3] == 0x4 && !bytes.HasPrefix(got, []byte("HTTP/"))
}

// Behind the wrapper after tls, Caddy serves the connection through
// net/http's h2c path, where the first bytes would pick the protocol; the
// wrapper makes the ALPN result pick it, as it does on a *tls.Conn.
// Every case is run against stock Caddy (no wrapper) too.
func TestALPNDecidesProtocol(t *testing.T) {
	addrs := startALPNCaddy(t)
	preface := http2.ClientPreface
	for _, pos := range alpnPositions {
		addr := addrs[pos.name]
		t.Run(pos.name, func(t *testing.T) {
			// ALPN h2 and an invalid preface: closed, no HTTP/1.1
			// answer (x/net's server may have sent its SETTINGS first)
			for _, writes := range [][]string{
				{"INVALID CONNECTION PREFACE\r\n\r\n"}, // h2spec 3.5/2
				{"GET / HTTP/1.1\r\nHost: 127.0.0.1\r\n\r\n"},
				{preface[:14], preface[14:20], "XX\r\n\r\n"}, // goes wrong late, in short reads
				{preface[:23], "X"},
			} {
				ex := alpnProbe(t, addr, "h2", writes...)
				if ex.alpn != "h2" {
					t.Fatalf("negotiated %q, want h2", ex.alpn)
				}
				if !ex.closed || bytes.HasPrefix(ex.got, []byte("HTTP/")) {
					t.Errorf("ALPN h2 with %q: closed %v, got %q; want the connection closed without an HTTP/1.x answer", strings.Join(writes, ""), ex.closed, ex.got)
				}
			}

			// ALPN http/1.1 or none and the preface: never HTTP/2.
			// Stock answers it as an HTTP/1.1 request ("PRI *", then
			// closes); behind the wrapper after tls, net/http's h2c
			// check has to be kept from seeing it, so the wrapper
			// closes the connection without an answer.
			for _, alpn := range []string{"http/1.1", ""} {
				for _, writes := range [][]string{{preface}, {preface[:3], preface[3:17], preface[17:]}} {
					ex := alpnProbe(t, addr, alpn, writes...)
					if ex.alpn != alpn {
						t.Fatalf("negotiated %q, want %q", ex.alpn, alpn)
					}
					if alpnServedHTTP2(ex.got) {
						t.Errorf("ALPN %q with the preface: served HTTP/2 (%q)", alpn, ex.got)
					}
					if !ex.closed {
						t.Errorf("ALPN %q with the preface: connection kept open", alpn)
					}
					if len(ex.got) > 0 && !bytes.HasPrefix(ex.got, []byte("HTTP/1.1 ")) {
						t.Errorf("ALPN %q with the preface: got %q, want an HTTP/1.1 answer or nothing", alpn, ex.got)
					}
					if pos.name == "stock" || pos.name == "below" {
						if !bytes.HasPrefix(ex.got, []byte("HTTP/1.1 ")) {
							t.Errorf("ALPN %q with the preface: got %q, want an HTTP/1.1 answer", alpn, ex.got)
						}
					}
				}

				// HTTP/1.1 requests, one that starts like the preface
				// among them, are answered as by stock
				for _, req := range []string{
					"GET / HTTP/1.1\r\nHost: 127.0.0.1\r\nConnection: close\r\n\r\n",
					"PRI * HTTP/2.0\r\nHost: 127.0.0.1\r\nConnection: close\r\n\r\n",
				} {
					got, want := alpnProbe(t, addr, alpn, req[:5], req[5:]), alpnProbe(t, addrs["stock"], alpn, req)
					if alpnStatus(got.got) != alpnStatus(want.got) || alpnStatus(got.got) == "" {
						t.Errorf("ALPN %q, %q: answered %q, stock %q", alpn, req, alpnStatus(got.got), alpnStatus(want.got))
					}
				}
			}

			// ALPN h2 and the preface: HTTP/2, also if the preface
			// comes a byte at a time
			for _, split := range []bool{false, true} {
				proto, body, err := alpnGetH2(addr, split)
				if err != nil || proto != 2 || body != "proto=HTTP/2.0" {
					t.Errorf("HTTP/2 (preface split %v): HTTP/%d %q, %v", split, proto, body, err)
				}
			}

			// HTTP/1.1 over TLS with ALPN
			tr := &http.Transport{TLSClientConfig: &tls.Config{InsecureSkipVerify: true}, Protocols: new(http.Protocols)} //nolint:gosec // test certificate
			tr.Protocols.SetHTTP1(true)
			defer tr.CloseIdleConnections()
			if proto, body, err := alpnGet(&http.Client{Transport: tr, Timeout: time.Minute}, "https://"+addr+"/"); err != nil || proto != 1 || body != "proto=HTTP/1.1" {
				t.Errorf("HTTP/1.1: HTTP/%d %q, %v", proto, body, err)
			}
		})
	}

	// cleartext behind the wrapper: h2c with prior knowledge, and HTTP/1.1
	t.Run("h2c", func(t *testing.T) {
		for _, h2c := range []bool{true, false} {
			tr := &http.Transport{Protocols: new(http.Protocols)}
			tr.Protocols.SetUnencryptedHTTP2(h2c)
			tr.Protocols.SetHTTP1(!h2c)
			defer tr.CloseIdleConnections()
			want := map[bool]string{true: "proto=HTTP/2.0", false: "proto=HTTP/1.1"}[h2c]
			if _, body, err := alpnGet(&http.Client{Transport: tr, Timeout: time.Minute}, "http://"+addrs["h2c"]+"/"); err != nil || body != want {
				t.Errorf("h2c %v: %q, %v; want %q", h2c, body, err, want)
			}
		}
	})
}

// alpnStatus is the status line at the start of an HTTP/1.x answer.
func alpnStatus(got []byte) string {
	line, _, _ := bytes.Cut(got, []byte("\r\n"))
	if !bytes.HasPrefix(line, []byte("HTTP/1.")) {
		return ""
	}
	return string(line)
}

func alpnGet(client *http.Client, url string) (proto int, body string, err error) {
	resp, err := client.Get(url)
	if err != nil {
		return 0, "", err
	}
	defer resp.Body.Close()
	b, err := io.ReadAll(resp.Body)
	return resp.ProtoMajor, string(b), err
}

// alpnGetH2 makes an HTTP/2 request over TLS with ALPN h2; with split,
// the client preface goes out one byte per TLS record.
func alpnGetH2(addr string, split bool) (proto int, body string, err error) {
	ctx, cancel := context.WithTimeout(context.Background(), time.Minute)
	defer cancel()
	dialer := &tls.Dialer{Config: &tls.Config{InsecureSkipVerify: true, NextProtos: []string{"h2"}}} //nolint:gosec // test certificate
	conn, err := dialer.DialContext(ctx, "tcp", addr)
	if err != nil {
		return 0, "", err
	}
	defer conn.Close()
	if p := conn.(*tls.Conn).ConnectionState().NegotiatedProtocol; p != "h2" {
		return 0, "", fmt.Errorf("negotiated %q", p)
	}
	var c net.Conn = conn
	if split {
		c = &alpnSplitConn{Conn: conn, left: len(http2.ClientPreface)}
	}
	cc, err := new(http2.Transport).NewClientConn(c)
	if err != nil {
		return 0, "", err
	}
	defer cc.Close()
	req, err := http.NewRequestWithContext(ctx, http.MethodGet, "https://"+addr+"/", nil)
	if err != nil {
		return 0, "", err
	}
	resp, err := cc.RoundTrip(req)
	if err != nil {
		return 0, "", err
	}
	defer resp.Body.Close()
	b, err := io.ReadAll(resp.Body)
	return resp.ProtoMajor, string(b), err
}

// alpnSplitConn writes its first left bytes one byte at a time.
type alpnSplitConn struct {
	net.Conn
	left int
}

func (c *alpnSplitConn) Write(p []byte) (int, error) {
	n := 0
	for c.left > 0 && n < len(p) {
		if _, err := c.Conn.Write(p[n : n+1]); err != nil {
			return n, err
		}
		n++
		c.left--
	}
	if n == len(p) {
		return n, nil
	}
	k, err := c.Conn.Write(p[n:])
	return n + k, err
}

// The read ahead of the first Reads hands an HTTP/1.x connection's bytes
// on unchanged, whatever the read sizes, and returns the error it ended
// with after them.
func TestALPNReadAheadPassesBytesOn(t *testing.T) {
	coalescetest.NoLeaks(t)
	testCert := harness.NewCert(t)
	cert, pool := testCert.TLS, testCert.Pool
	for _, tc := range []struct {
		alpn string
		sent string
	}{
		{"http/1.1", "GET / HTTP/1.1\r\nHost: x\r\n\r\n"},
		{"http/1.1", "PRI * HTTP/2.0\r\nHost: x\r\n\r\n"}, // like the preface for 16 bytes
		{"http/1.1", "P"},                      // ends inside the preface
		{"", "PRI * HTTP/2.0\r\n\r\nSM\r\n\r"}, // one byte short of it
		{"h2", http2.ClientPreface + "\x00\x00\x00\x04\x00\x00\x00\x00\x00"},
	} {
		server, client := harness.TCPPair(t)
		srv := tls.Server(server, &tls.Config{Certificates: []tls.Certificate{cert}, NextProtos: []string{"h2", "http/1.1"}})
		ln := coalesce.NewListener(&harness.OneConnListener{Conn: srv}, coalesce.NewLimits(64<<10, 64<<20, time.Second))
		wrapped, err := ln.Accept()
		if err != nil {
			t.Fatal(err)
		}
		cfg := &tls.Config{RootCAs: pool, ServerName: "localhost"}
		if tc.alpn != "" {
			cfg.NextProtos = []string{tc.alpn}
		}
		cli := tls.Client(client, cfg)
		go func() {
			for i := range len(tc.sent) { // a record per byte: short reads
				if _, err := cli.Write([]byte{tc.sent[i]}); err != nil {
					return
				}
			}
			cli.CloseWrite()
		}()
		var got []byte
		buf := make([]byte, 5)
		for {
			n, err := wrapped.Read(buf)
			got = append(got, buf[:n]...)
			if err != nil {
				if err != io.EOF {
					t.Errorf("%q: %v", tc.sent, err)
				}
				break
			}
		}
		if string(got) != tc.sent {
			t.Errorf("ALPN %q: read %q, sent %q", tc.alpn, got, tc.sent)
		}
		wrapped.Close()
		cli.Close()
	}
}
