package integration

// Reliability suite, part 3 (continued): config reloads under load, and
// the leak check's own late-dial case (see leak_scenarios_test.go).

import (
	"context"
	"crypto/tls"
	"errors"
	"fmt"
	"io"
	"math/rand/v2"
	"net"
	"net/http"
	"net/http/httptrace"
	"net/url"
	"sync"
	"sync/atomic"
	"syscall"
	"testing"
	"time"

	"github.com/h2file/caddy-h2file/internal/harness"
	"github.com/h2file/caddy-h2file/internal/harness/caddysite"
)

// (e) Config reloads through the admin API every 200 ms while clients
// (HTTP/2 and HTTP/1.1) fetch files and check every byte. Each reload
// changes the cache settings (a new cache; the old one is closed when its
// config is gone) and, with the wrapper, its max_pending (new wrapper
// instances on the same listener). The last reload restores the original
// config.
func lkReloadUnderLoad(t *testing.T, s *caddysite.Server, pos lkPosition, small, medium, big []harness.SiteFile) {
	orig, err := s.RunningConfig()
	if err != nil {
		t.Fatal(err)
	}
	files := append(append(append([]harness.SiteFile(nil), small...), medium...), big[:4]...)
	var requests, failures, raced, refused, unanswered atomic.Int64
	stop := make(chan struct{})
	var wg sync.WaitGroup
	for w := range 8 {
		client, h1, name := s.H2, w >= 6, "HTTP/2"
		if h1 {
			client, name = s.H1, "HTTP/1.1"
		}
		wg.Go(func() {
			rng := rand.New(rand.NewPCG(uint64(w), 7))
			for {
				select {
				case <-stop:
					return
				default:
				}
				var gotConn, reused atomic.Bool
				ctx := httptrace.WithClientTrace(context.Background(), &httptrace.ClientTrace{
					GotConn: func(ci httptrace.GotConnInfo) { gotConn.Store(true); reused.Store(ci.Reused) },
				})
				err := harness.FetchFile(ctx, client, s.URL, files[rng.IntN(len(files))])
				requests.Add(1)
				switch {
				case err == nil:
				case !gotConn.Load():
					// a new connection that failed before the request
					// went out: Caddy resets a few TLS handshakes while it
					// swaps servers, with the stock file_server too
					refused.Add(1)
				case h1 && reused.Load() && lkKeepAliveRace(err):
					// HTTP/1.1's keep-alive race: the old server closed an
					// idle connection as the request went out on it;
					// net/http retries only if nothing was written yet
					raced.Add(1)
				case lkUnanswered(err):
					// the connection was closed or reset before any of
					// the response arrived, by the server being replaced
					// (grace_period 1ns): seen without the wrapper too,
					// on Go 1.26 and 1.27; nothing reached the client, so
					// no byte can be wrong; bounded below
					unanswered.Add(1)
				default:
					failures.Add(1)
					t.Errorf("during reloads, %s on a %s connection: %v", name, map[bool]string{true: "reused", false: "new"}[reused.Load()], err)
				}
			}
		})
	}
	reloads := 0
	var reloadErr error
	for i := range 20 {
		time.Sleep(200 * time.Millisecond)
		cfg, err := s.RunningConfig()
		if err != nil {
			reloadErr = err
			break
		}
		server, handler := caddysite.ServerOf(cfg)
		handler["cache"] = map[string]any{"max_files": 8 + 4*(i%3), "max_memory": 4 << 20}
		if pos.layers > 0 {
			server["listener_wrappers"] = pos.wrappers(lkCoalesce(32<<10 + (i%2)*(32<<10)))
		}
		if err := s.Load(cfg); err != nil {
			reloadErr = fmt.Errorf("reload %d: %w", i, err)
			break
		}
		reloads++
	}
	close(stop)
	wg.Wait()
	if reloadErr != nil {
		t.Fatal(reloadErr)
	}
	if err := s.Load(orig); err != nil {
		t.Fatalf("restoring the config: %v", err)
	}
	t.Logf("%d reloads, %d requests, %d failed; lost to a reload: %d new connections, %d HTTP/1.1 requests on a keep-alive connection it closed, %d requests closed or reset unanswered",
		reloads, requests.Load(), failures.Load(), refused.Load(), raced.Load(), unanswered.Load())
	if requests.Load() < 50 || failures.Load() > 0 {
		t.Errorf("%d requests during %d reloads, %d failed; want at least 50, none failed", requests.Load(), reloads, failures.Load())
	}
	if unanswered.Load() > int64(reloads) {
		t.Errorf("%d requests closed or reset unanswered during %d reloads; want at most one a reload", unanswered.Load(), reloads)
	}
	// a reload can only catch the connections being opened or reused at
	// that moment, fewer than the 8 clients
	if lost := refused.Load() + raced.Load(); lost > int64(8*reloads) {
		t.Errorf("%d requests lost to %d reloads, more than the 8 clients could have had under way", lost, reloads)
	}
}

// lkUnanswered reports whether err is a request's that got no response at
// all (the client's Do failed, not the body's read) because its connection
// was closed or reset.
func lkUnanswered(err error) bool {
	var ue *url.Error
	return errors.As(err, &ue) && lkKeepAliveRace(err)
}

// lkKeepAliveRace reports whether err is what a client gets when the
// server closes a keep-alive connection it has just sent a request on.
func lkKeepAliveRace(err error) bool {
	return errors.Is(err, io.EOF) || errors.Is(err, io.ErrUnexpectedEOF) || errors.Is(err, syscall.ECONNRESET)
}

// TestLeakCheckLateDial: a client dial that outlives its request and
// completes its HTTP/2 set-up after the scenario closed the idle
// connections (as one of reload_under_load's HTTP/2 clients' can, once
// the last reload's GOAWAY left it no connection) leaves an idle
// connection in the client's pool: both sockets, the server's serve loop
// and frame reader and the client's read loop. The release check must
// close it, not count it as the server's leak.
func TestLeakCheckLateDial(t *testing.T) {
	root := t.TempDir()
	small := harness.WriteSiteFiles(t, root, "small", 2, func(i int) int { return 200 + i*1_499 })
	s := lkStart(t, root, lkLeakCache(), lkNone, nil)
	c := s.Client(t, "h2")
	lkWarm(t, s, small)
	base := lkMeasure(t, root)

	// the dial completes the TLS handshake, then waits until the idle
	// connections have been closed
	handshaken, release := make(chan struct{}), make(chan struct{})
	var dialed sync.WaitGroup
	dialed.Add(1)
	c.Transport.(*http.Transport).DialTLSContext = func(ctx context.Context, network, _ string) (net.Conn, error) {
		defer dialed.Done()
		conn, err := new(net.Dialer).DialContext(ctx, network, s.Addr)
		if err != nil {
			return nil, err
		}
		cfg := s.Cert.ClientTLS()
		cfg.NextProtos = []string{"h2"}
		tc := tls.Client(conn, cfg)
		if err := tc.HandshakeContext(ctx); err != nil {
			conn.Close()
			return nil, err
		}
		close(handshaken)
		<-release
		return tc, nil
	}
	ctx, cancel := context.WithCancel(context.Background())
	done := make(chan error, 1)
	go func() { done <- harness.FetchFile(ctx, c, s.URL, small[0]) }()
	<-handshaken
	cancel() // the request gives up, as when another connection served it; the dial goes on
	if err := <-done; !errors.Is(err, context.Canceled) {
		t.Fatalf("request: %v, want it canceled", err)
	}
	s.CloseClients()
	close(release)
	dialed.Wait()
	lkCheckReleased(t, "late dial", root, base, lkMaxFiles)
}
