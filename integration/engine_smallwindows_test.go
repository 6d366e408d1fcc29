package integration

import (
	"bytes"
	"cmp"
	"fmt"
	"maps"
	"math/rand/v2"
	"net"
	"net/http"
	"net/url"
	"os/exec"
	"regexp"
	"slices"
	"strconv"
	"strings"
	"sync"
	"testing"
	"time"

	"golang.org/x/net/http2"

	"github.com/h2file/caddy-h2file/internal/h2"
	"github.com/h2file/caddy-h2file/internal/harness/caddysite"
)

// The window suites: Caddy features that stream (reverse_proxy with
// trailers, server-sent events, uploads refused early) fetched by a client
// with small windows, as grpc-go, nghttp and h2load start, through Go's
// HTTP/2 server and through the engine on the same config. Go's client
// (4 MiB windows) and browsers hide what only a small window shows.

// winEachServer runs f in a subtest on Caddy serving routes through Go's
// HTTP/2 server ("go"), then in one through the engine ("engine"), and
// tells f which; the engine's subtest fails if the engine served none of
// its requests.
func winEachServer(t *testing.T, routes []any, f func(t *testing.T, s *caddysite.Server, engine bool)) {
	for _, server := range []struct {
		name     string
		wrappers []any
	}{{"go", goServerWrappers()}, {"engine", engineWrappers()}} {
		t.Run(server.name, func(t *testing.T) {
			s := caddysite.Start(t, caddysite.Config{Routes: routes, Protocols: []string{"h1", "h2"}, Wrappers: server.wrappers})
			before := h2.ReadStats().Streams
			f(t, s, server.name == "engine")
			served := h2.ReadStats().Streams - before
			if server.name == "engine" && served == 0 {
				t.Error("the engine served none of the requests")
			}
			if server.name == "go" && served != 0 {
				t.Errorf("the engine served %d requests meant for Go's server", served)
			}
		})
	}
}

// reset resets stream id (CANCEL).
func (c *winConn) reset(id uint32) error {
	c.mu.Lock()
	defer c.mu.Unlock()
	return c.fr.WriteRSTStream(id, http2.ErrCodeCancel)
}

// winResponse is what the client read of one stream.
type winResponse struct {
	status   string
	body     []byte
	trailers map[string]string
	arrivals []winArrival
	end      string // END_STREAM, RST_STREAM and its code, GOAWAY and its code, or why the reading stopped
}

// winArrival is when the body reached n bytes.
type winArrival struct {
	n  int
	at time.Time
}

// response reads stream id's response until it ends (or the connection
// does, or timeout passes), skipping other streams' frames.
func (c *winConn) response(id uint32, timeout time.Duration) winResponse {
	r := winResponse{trailers: map[string]string{}}
	deadline := time.Now().Add(timeout)
	for {
		f, err := c.nextFrame(deadline)
		if err != nil {
			r.end = err.Error()
			return r
		}
		if f.typ == http2.FrameGoAway {
			r.end = f.String()
			return r
		}
		if f.stream != id {
			continue
		}
		switch f.typ {
		case http2.FrameHeaders:
			for _, hf := range f.fields {
				if hf.Name == ":status" {
					r.status = hf.Value
				} else if r.status != "" && f.end {
					r.trailers[hf.Name] = hf.Value
				}
			}
		case http2.FrameData:
			r.body = append(r.body, f.data...)
			r.arrivals = append(r.arrivals, winArrival{len(r.body), f.at})
		case http2.FrameRSTStream:
			r.end = f.String()
			return r
		}
		if f.end {
			r.end = "END_STREAM"
			return r
		}
	}
}

// winPayload is n bytes of a fixed pseudo-random sequence.
func winPayload(n int) []byte {
	b := make([]byte, n)
	rand.NewChaCha8([32]byte{'h', '2', 'f', 'i', 'l', 'e'}).Read(b)
	return b
}

// winCompareBody says how got differs from want ("" if equal).
func winCompareBody(got, want []byte) string {
	if bytes.Equal(got, want) {
		return ""
	}
	i := 0
	for i < len(got) && i < len(want) && got[i] == want[i] {
		i++
	}
	return fmt.Sprintf("%d bytes of %d, differing from byte %d on", len(got), len(want), i)
}

// winRoute is a route for paths matching path to handlers.
func winRoute(path string, handlers ...any) any {
	return map[string]any{"match": []any{map[string]any{"path": []string{path}}}, "handle": handlers}
}

// winProxy is reverse_proxy to backend, over versions of HTTP (nil:
// HTTP/1.1), with more fields.
func winProxy(backend string, versions []string, extra map[string]any) map[string]any {
	h := map[string]any{"handler": "reverse_proxy", "upstreams": []any{map[string]any{"dial": backend}}}
	if versions != nil {
		h["transport"] = map[string]any{"protocol": "http", "versions": versions}
	}
	for k, v := range extra {
		h[k] = v
	}
	return h
}

// winBackend serves handler over HTTP/1.1 and h2c on a loopback port,
// until the test ends, and returns its address.
func winBackend(t *testing.T, handler http.Handler) string {
	t.Helper()
	srv := &http.Server{Handler: handler, Protocols: new(http.Protocols)}
	srv.Protocols.SetHTTP1(true)
	srv.Protocols.SetUnencryptedHTTP2(true)
	ln, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		t.Fatal(err)
	}
	go srv.Serve(ln)
	t.Cleanup(func() { srv.Close() })
	return ln.Addr().String()
}

// TestEngineTrailersSmallWindows fetches, through reverse_proxy, a
// response in the shape of gRPC's (1 MiB in 16 flushed writes of 64 KiB,
// then trailers) from an HTTP/1.1 and an h2c upstream, with 64 KB stream
// windows (grpc-go's, nghttp's -w 16) and 16 KB ones, and requires every
// byte, then the trailers, through Go's server and the engine. Bytes
// still waiting for window when the trailers are written must go before
// them: the client otherwise sees a clean end with bytes missing.
func TestEngineTrailersSmallWindows(t *testing.T) {
	payload := winPayload(16 * 64 << 10)
	backend := winBackend(t, http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		w.Header().Set("Content-Type", "application/grpc")
		w.Header().Set("Trailer", "Grpc-Status, Grpc-Message")
		w.WriteHeader(http.StatusOK)
		rc := http.NewResponseController(w)
		for chunk := range slices.Chunk(payload, 64<<10) {
			if _, err := w.Write(chunk); err != nil {
				return
			}
			if err := rc.Flush(); err != nil {
				return
			}
		}
		w.Header().Set("Grpc-Status", "0")
		w.Header().Set("Grpc-Message", "done")
	}))
	routes := []any{
		winRoute("/h1/*", winProxy(backend, nil, nil)),
		winRoute("/h2c/*", winProxy(backend, []string{"h2c"}, nil)),
	}
	winEachServer(t, routes, func(t *testing.T, s *caddysite.Server, _ bool) {
		for _, upstream := range []string{"h1", "h2c"} {
			for _, window := range []uint32{65535, 16384} {
				t.Run(fmt.Sprintf("%s upstream, window %d", upstream, window), func(t *testing.T) {
					c := winDial(t, s.Addr, window, 0)
					id, err := c.request(http.MethodGet, "/"+upstream+"/grpc", true)
					if err != nil {
						t.Fatal(err)
					}
					r := c.response(id, 30*time.Second)
					want := map[string]string{"grpc-status": "0", "grpc-message": "done"}
					if diff := winCompareBody(r.body, payload); r.status != "200" || diff != "" || r.end != "END_STREAM" || !maps.Equal(r.trailers, want) {
						t.Errorf("status %q, body %s, trailers %v, ended by %s; want 200, the %d bytes, trailers %v, END_STREAM",
							r.status, cmp.Or(diff, "complete"), r.trailers, r.end, len(payload), want)
					}
				})
			}
		}
		t.Run("nghttp -w 16", func(t *testing.T) {
			winNghttp(t, s.URL+"/h1/grpc", payload)
		})
	})
}

// winNghttp fetches url with nghttp -w 16 (64 KB stream windows, and
// WINDOW_UPDATE once half of one is read), if nghttp is installed
// (.ci/clients installs it), and requires want as the body, then
// grpc-status 0 in trailers. nghttp writes the body and its -v trace to
// the same stdout (-O is not implemented), so it runs twice: for the body,
// then with -v -n for the frames.
func winNghttp(t *testing.T, url string, want []byte) {
	path, err := exec.LookPath("nghttp")
	if err != nil {
		t.Skip("nghttp is not installed (nghttp2-client)")
	}
	var stderr bytes.Buffer
	cmd := exec.Command(path, "-y", "-w", "16", "-t", "30", url)
	cmd.Stderr = &stderr
	body, err := cmd.Output()
	if diff := winCompareBody(body, want); diff != "" || err != nil {
		t.Errorf("nghttp -w 16: body %s, exit %v %s", cmp.Or(diff, "complete"), err, stderr.Bytes())
	}
	trace, err := exec.Command(path, "-y", "-v", "-n", "-w", "16", "-t", "30", url).CombinedOutput()
	received := 0
	for _, m := range regexp.MustCompile(`recv DATA frame <length=(\d+)`).FindAllSubmatch(trace, -1) {
		n, _ := strconv.Atoi(string(m[1]))
		received += n
	}
	trailer := regexp.MustCompile(`(?s)recv DATA frame [^\n]*\n.*recv \(stream_id=\d+\) grpc-status: 0\n[^\n]*recv HEADERS frame [^\n]*\n[^\n]*END_STREAM`)
	if received != len(want) || err != nil || !trailer.Match(trace) {
		t.Errorf("nghttp -v -n -w 16: %d bytes of DATA of %d, exit %v, trailers with END_STREAM after the DATA: %v\n%s",
			received, len(want), err, trailer.Match(trace), winTail(trace))
	}
}

// winTail is the end of nghttp's trace, the frames that matter.
func winTail(out []byte) string {
	lines := strings.Split(strings.TrimSpace(string(out)), "\n")
	return strings.Join(lines[max(len(lines)-10, 0):], "\n")
}

// TestEngineEventsSmallWindows streams server-sent events through
// reverse_proxy (flush_interval -1) from an upstream that flushes each
// event and pauses between them, some larger than the client's window
// or what is left of it, to a client with small windows that gives them
// back as it reads: alone on its connection, and beside downloads that
// take the connection's window whenever it opens. Each event must reach
// the client within winEventBound of the upstream's flush, through Go's
// server (milliseconds) and the engine: the tail of an event that waited
// for window goes out when the window opens, not with the next event, and
// a client that gives back the credit of each DATA frame as it comes is
// no flood, however small the frames the server chose to send.
func TestEngineEventsSmallWindows(t *testing.T) {
	sizes := []int{40_000, 40_000, 100_000, 3_000, 40_000, 70_000, 40_000, 40_000}
	var mu sync.Mutex
	sentAt := map[string][]time.Time{} // by the query's run
	backend := winBackend(t, http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		w.Header().Set("Content-Type", "text/event-stream")
		w.WriteHeader(http.StatusOK)
		rc := http.NewResponseController(w)
		rc.Flush()
		run := r.URL.Query().Get("run")
		for i, n := range sizes {
			if i > 0 {
				time.Sleep(winEventPause)
			}
			w.Write(winEvent(i, n))
			if rc.Flush() != nil {
				return
			}
			mu.Lock()
			sentAt[run] = append(sentAt[run], time.Now())
			mu.Unlock()
		}
	}))
	chunk := winPayload(32 << 10)
	download := winBackend(t, http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		w.Header().Set("Content-Type", "application/octet-stream")
		for {
			if _, err := w.Write(chunk); err != nil {
				return
			}
		}
	}))
	routes := []any{
		winRoute("/events", winProxy(backend, nil, map[string]any{"flush_interval": -1})),
		winRoute("/download", winProxy(download, nil, map[string]any{"flush_interval": -1})),
	}
	var want []byte
	for i, n := range sizes {
		want = append(want, winEvent(i, n)...)
	}
	cases := []struct {
		name      string
		window    uint32
		creditAt  int64 // credit is given back once this much is unreturned; 0: after each DATA frame
		downloads int   // endless downloads on the same connection
	}{
		{"alone, 64 KB window, credit at once", 65535, 0, 0},
		{"beside 4 downloads, 16 KB windows, credit at half", 16384, 8192, 4},
		{"beside a download, 64 KB windows, credit at once", 65535, 0, 1},
	}
	winEachServer(t, routes, func(t *testing.T, s *caddysite.Server, _ bool) {
		for _, tc := range cases {
			t.Run(tc.name, func(t *testing.T) {
				c := winDial(t, s.Addr, tc.window, tc.creditAt)
				id, err := c.request(http.MethodGet, "/events?run="+url.QueryEscape(t.Name()), true)
				if err != nil {
					t.Fatal(err)
				}
				for range tc.downloads {
					dl, err := c.request(http.MethodGet, "/download", true)
					if err != nil {
						t.Fatal(err)
					}
					defer c.reset(dl)
				}
				r := c.response(id, 30*time.Second)
				if diff := winCompareBody(r.body, want); r.status != "200" || diff != "" || r.end != "END_STREAM" {
					t.Fatalf("status %q, body %s, ended by %s; want 200, the %d bytes of %d events, END_STREAM",
						r.status, cmp.Or(diff, "complete"), r.end, len(want), len(sizes))
				}
				mu.Lock()
				sent := sentAt[t.Name()]
				mu.Unlock()
				var report []string
				late := false
				end := 0
				for i, n := range sizes {
					end += n
					k := slices.IndexFunc(r.arrivals, func(a winArrival) bool { return a.n >= end })
					delay := max(r.arrivals[k].at.Sub(sent[i]), 0)
					late = late || delay > winEventBound
					report = append(report, fmt.Sprintf("event %d (%d bytes): %v", i, n, delay.Round(100*time.Microsecond)))
				}
				if late {
					t.Errorf("events came later than %v after the upstream flushed them:\n%s", winEventBound, strings.Join(report, "\n"))
				} else if testing.Verbose() {
					t.Logf("each event's delay after the upstream's flush: %s", strings.Join(report, ", "))
				}
			})
		}
	})
}

const (
	// winEventPause is the upstream's pause between events: an event's
	// tail held back until the next one comes that much late.
	winEventPause = 500 * time.Millisecond
	// winEventBound is how late an event may reach the client after the
	// upstream flushed it: below winEventPause by a margin that a loaded
	// machine's scheduling does not cross (Go's server took 208 ms for an
	// event of 40,000 bytes beside 4 downloads under -race, with both
	// cores busy with a benchmark).
	winEventBound = 400 * time.Millisecond
)

// winEvent is event i of the stream, n bytes long.
func winEvent(i, n int) []byte {
	head := fmt.Sprintf("id: %d\ndata: ", i)
	return []byte(head + strings.Repeat(string(rune('a'+i%26)), n-len(head)-2) + "\n\n")
}
