package integration

import (
	"context"
	"crypto/sha256"
	"errors"
	"io"
	"net"
	"os"
	"testing"
	"time"

	"golang.org/x/net/http2"

	"github.com/h2file/caddy-h2file/internal/h2"
	"github.com/h2file/caddy-h2file/internal/harness"
	"github.com/h2file/caddy-h2file/internal/harness/caddysite"
	"github.com/h2file/caddy-h2file/internal/harness/h2client"
)

// TestEngineInCaddy runs h2_file_server behind the h2_engine listener
// wrapper: HTTP/2 is served by the engine and HTTP/1.1 by net/http, a
// download in progress survives a config reload (the old config's
// engine drains it within the grace period), and once Caddy stops no
// engine connection is left.
func TestEngineInCaddy(t *testing.T) {
	root := t.TempDir()
	files := harness.WriteSiteFiles(t, root, "f", 2, func(i int) int { return []int{5_000, 20 << 20}[i] })
	small, big := files[0], files[1]
	s := caddysite.Start(t, caddysite.Config{
		Handlers: []any{caddysite.H2FileServer(root, nil)},
		Wrappers: engineWrappers(),
	})
	// a grace period long enough for the download below
	cfg, err := s.RunningConfig()
	if err != nil {
		t.Fatal(err)
	}
	cfg["apps"].(map[string]any)["http"].(map[string]any)["grace_period"] = "20s"
	if err := s.Load(cfg); err != nil {
		t.Fatal(err)
	}
	s.CloseClients()

	before := h2.ReadStats()
	resp, err := s.H2.Get(s.URL + small.Path)
	if err != nil {
		t.Fatal(err)
	}
	body, _ := io.ReadAll(resp.Body)
	resp.Body.Close()
	if resp.ProtoMajor != 2 || sha256.Sum256(body) != small.Sum {
		t.Fatalf("HTTP/2: %s, %d bytes", resp.Proto, len(body))
	}
	after := h2.ReadStats()
	if after.Conns <= before.Conns || after.Streams <= before.Streams {
		t.Fatalf("the engine served nothing: stats %+v then %+v", before, after)
	}
	if err := harness.FetchFile(context.Background(), s.H1, s.URL, small); err != nil {
		t.Fatalf("HTTP/1.1 through the engine's listener: %v", err)
	}
	if st := h2.ReadStats(); st.Streams != after.Streams {
		t.Errorf("an HTTP/1.1 request went to the engine: stats %+v then %+v", after, st)
	}

	// a download read slowly across a reload
	resp, err = s.H2.Get(s.URL + big.Path)
	if err != nil {
		t.Fatal(err)
	}
	defer resp.Body.Close()
	h := sha256.New()
	if _, err := io.CopyN(h, resp.Body, 1<<20); err != nil {
		t.Fatal(err)
	}
	if err := s.Reconfigure(func(server, handler map[string]any) { handler["index_names"] = []string{"other.html"} }); err != nil {
		t.Fatal(err)
	}
	for {
		time.Sleep(5 * time.Millisecond)
		_, err := io.CopyN(h, resp.Body, 1<<20)
		if err == io.EOF {
			break
		}
		if err != nil {
			t.Fatalf("the download failed after the reload: %v", err)
		}
	}
	if [32]byte(h.Sum(nil)) != big.Sum {
		t.Fatal("the download across the reload has the wrong bytes")
	}
	// the old config's engine sent GOAWAY: its connection closes once
	// the download is over (a second after, as x/net's would)
	harness.WaitUntil(t, "the old config's engine connection to close", func() bool { return h2.ReadStats().Open == 0 })
	// the new config serves
	if err := harness.FetchFile(context.Background(), s.H2, s.URL, small); err != nil {
		t.Fatalf("after the reload: %v", err)
	}

	caddysite.StopCaddy(t)
	s.CloseClients()
	harness.WaitUntil(t, "every engine connection to end after Caddy stopped", func() bool { return h2.ReadStats().Open == 0 })
}

// TestEngineIdleTimeout checks that the server's idle_timeout reaches
// the engine: a connection that opens no stream gets GOAWAY (NO_ERROR)
// and is closed once it has passed.
func TestEngineIdleTimeout(t *testing.T) {
	root := t.TempDir()
	s := caddysite.Start(t, caddysite.Config{
		Handlers: []any{caddysite.H2FileServer(root, nil)},
		Wrappers: engineWrappers(),
		Server:   map[string]any{"idle_timeout": "300ms"},
	})
	c, err := h2client.Dial(s.Addr, h2client.Options{})
	if err != nil {
		t.Fatal(err)
	}
	defer c.Close()
	start := time.Now()
	c.SetReadDeadline(start.Add(10 * time.Second))
	fl, _ := c.Drain()
	if took := time.Since(start); !fl.GotAway || fl.GoAway != http2.ErrCodeNo || took < 300*time.Millisecond || took > 5*time.Second {
		t.Errorf("an idle connection: GOAWAY %v (%v) after %v; want NO_ERROR after 300 ms and the close", fl.GotAway, fl.GoAway, took)
	}
}

// TestEngineHandshakeTimeout checks that the server's
// read_header_timeout bounds the TLS handshake through the engine's
// listener as it does in net/http: a client that connects and sends
// nothing is closed once it has passed, with or without the engine.
func TestEngineHandshakeTimeout(t *testing.T) {
	root := t.TempDir()
	for _, wrappers := range [][]any{nil, engineWrappers()} {
		s := caddysite.Start(t, caddysite.Config{
			Handlers: []any{caddysite.H2FileServer(root, nil)},
			Wrappers: wrappers,
			Server:   map[string]any{"read_header_timeout": "300ms"},
		})
		conn, err := net.Dial("tcp", s.Addr)
		if err != nil {
			t.Fatal(err)
		}
		start := time.Now()
		conn.SetReadDeadline(start.Add(10 * time.Second))
		_, err = conn.Read(make([]byte, 1))
		took := time.Since(start)
		conn.Close()
		if err == nil || errors.Is(err, os.ErrDeadlineExceeded) || took < 250*time.Millisecond || took > 5*time.Second {
			t.Errorf("wrappers %v: a silent client got %v after %v; want the connection closed after 300 ms", wrappers, err, took)
		}
		caddysite.StopCaddy(t)
	}
}
