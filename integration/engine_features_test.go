package integration

import (
	"bufio"
	"bytes"
	"crypto/rand"
	"crypto/sha256"
	"encoding/json"
	"fmt"
	"io"
	"maps"
	"net"
	"net/http"
	"net/http/httptrace"
	"net/textproto"
	"os"
	"path/filepath"
	"slices"
	"strings"
	"testing"
	"time"

	"github.com/h2file/caddy-h2file/internal/h2"
	"github.com/h2file/caddy-h2file/internal/harness/caddysite"
)

// TestEngineFeatures runs Caddy features that touch HTTP/2 through Go's
// HTTP/2 server and then, the same config with the engine's listener
// wrappers, through h2file's engine, and requires the same responses
// (status, headers but Date, body, trailers, 1xx), the same access log
// entries and the same request metrics: reverse_proxy with a 20 MB
// upload, Expect: 100-continue, request_body's max_size, server-sent
// events flushed as they come, full-duplex streaming with trailers to an
// h2c upstream, 103 Early Hints, encode, templates, headers,
// handle_errors, placeholders and strict_sni_host (421). (431 past
// max_header_bytes, which Go's client will not send, is checked against
// Go's server over raw frames in internal/h2; client certificates,
// Alt-Svc and the TLS placeholders in TestListenerCaddy.)
func TestEngineFeatures(t *testing.T) {
	backend := startFeatureBackend(t)
	big := make([]byte, 20<<20)
	rand.Read(big)
	logPath := filepath.Join(t.TempDir(), "access.log")
	s := caddysite.Start(t, caddysite.Config{
		Routes:    featureRoutes(backend),
		Protocols: []string{"h1", "h2"},
		Server: map[string]any{
			"strict_sni_host": true,
			"logs":            map[string]any{},
			"errors": map[string]any{"routes": []any{map[string]any{"handle": []any{
				staticResponse("handled {http.error.status_code}", "{http.error.status_code}"),
			}}}},
		},
	})
	cfg := s.Config()
	cfg["logging"].(map[string]any)["logs"].(map[string]any)["access"] = map[string]any{
		"writer":  map[string]any{"output": "file", "filename": logPath},
		"encoder": map[string]any{"format": "json"},
		"include": []string{"http.log.access"},
		"level":   "INFO",
	}
	cfg["apps"].(map[string]any)["http"].(map[string]any)["metrics"] = map[string]any{}
	if err := s.Load(cfg); err != nil {
		t.Fatal(err)
	}
	s.CloseClients()
	base := strings.Replace(s.URL, "127.0.0.1", "localhost", 1) // SNI and Host agree

	// the config before had no access log
	awaitNewConfig(t, s, base, func() bool { return len(readAccessLog(t, logPath)) > 0 })
	stock := runFeatures(t, s.H2, base, big)
	stockLog := withoutProbes(readAccessLog(t, logPath))
	stockMetrics := requestMetrics(t, s)

	server, _ := caddysite.ServerOf(cfg)
	server["listener_wrappers"] = engineWrappers()
	if err := s.Load(cfg); err != nil {
		t.Fatal(err)
	}
	s.CloseClients()
	// the config before served through Go's server
	streams := h2.ReadStats().Streams
	awaitNewConfig(t, s, base, func() bool { return h2.ReadStats().Streams > streams })
	logged := len(readAccessLog(t, logPath))
	before := h2.ReadStats().Streams
	engine := runFeatures(t, s.H2, base, big)
	if served := h2.ReadStats().Streams - before; served < int64(len(engine)) {
		t.Errorf("the engine served %d requests of %d", served, len(engine))
	}
	engineLog := withoutProbes(readAccessLog(t, logPath)[logged:])
	// each config counts from zero (its own metrics registry)
	engineMetrics := requestMetrics(t, s)
	if len(stockMetrics) == 0 || !slices.Equal(stockMetrics, engineMetrics) {
		t.Errorf("Caddy's request metrics differ:\nGo's server:\n%s\nthe engine:\n%s", strings.Join(stockMetrics, "\n"), strings.Join(engineMetrics, "\n"))
	}

	for _, name := range slices.Sorted(maps.Keys(stock)) {
		if stock[name] != engine[name] {
			t.Errorf("%s:\nGo's server: %s\nthe engine:  %s", name, stock[name], engine[name])
		} else if testing.Verbose() {
			t.Logf("%s: %s", name, stock[name])
		}
	}
	if !slices.Equal(stockLog, engineLog) {
		t.Errorf("access logs differ:\nGo's server:\n%s\nthe engine:\n%s", strings.Join(stockLog, "\n"), strings.Join(engineLog, "\n"))
	}
}

// probePath is a path no route matches: awaitNewConfig's requests are
// logged (and left out of the comparison), never counted in metrics.
const probePath = "/await-new-config"

// awaitNewConfig sends requests on s.H2 until one reached the config just
// loaded (served says so), each on a new connection: Caddy's reload only
// lets the old server's shutdown start before it returns ("the scheduler
// might still pause them right before calling Shutdown()", caddyhttp's
// App.Stop), so the old config may still accept a connection, and every
// request on it. The client keeps the connection that reached the new
// config for the run. (The 20-run series saw the old config take Go's
// server's whole run once: no access log line, no metrics.)
func awaitNewConfig(t *testing.T, s *caddysite.Server, base string, served func() bool) {
	t.Helper()
	for range 100 {
		resp, err := s.H2.Get(base + probePath)
		if err == nil {
			io.Copy(io.Discard, resp.Body)
			resp.Body.Close()
			if served() {
				return
			}
		}
		s.CloseClients()
		time.Sleep(10 * time.Millisecond)
	}
	t.Fatal("the config just loaded served none of 100 requests")
}

// withoutProbes returns the access log entries but awaitNewConfig's.
func withoutProbes(entries []string) []string {
	return slices.DeleteFunc(slices.Clone(entries), func(e string) bool { return strings.Contains(e, " "+probePath+" ") })
}

// startFeatureBackend starts the upstream of reverse_proxy, serving
// HTTP/1.1 and h2c, and returns its address.
func startFeatureBackend(t *testing.T) string {
	mux := http.NewServeMux()
	mux.HandleFunc("/upload", func(w http.ResponseWriter, r *http.Request) {
		h := sha256.New()
		n, err := io.Copy(h, r.Body)
		fmt.Fprintf(w, "%s n=%d err=%v sha=%x", r.Proto, n, err, h.Sum(nil)[:8])
	})
	mux.HandleFunc("/limited", func(w http.ResponseWriter, r *http.Request) {
		_, err := io.Copy(io.Discard, r.Body)
		if err != nil {
			w.WriteHeader(http.StatusRequestEntityTooLarge)
		}
		fmt.Fprintf(w, "err=%v", err)
	})
	mux.HandleFunc("/events", func(w http.ResponseWriter, r *http.Request) {
		w.Header().Set("Content-Type", "text/event-stream")
		for i := range 3 {
			fmt.Fprintf(w, "data: %d\n\n", i)
			http.NewResponseController(w).Flush()
			time.Sleep(150 * time.Millisecond)
		}
	})
	mux.HandleFunc("/duplex", func(w http.ResponseWriter, r *http.Request) {
		w.Header().Set("Content-Type", "application/grpc")
		w.Header().Set("Trailer", "Grpc-Status")
		w.WriteHeader(http.StatusOK)
		rc := http.NewResponseController(w)
		rc.Flush()
		br := bufio.NewReader(r.Body)
		for {
			line, err := br.ReadString('\n')
			if line != "" {
				fmt.Fprintf(w, "%s echo %s", r.Proto, line)
				rc.Flush()
			}
			if err != nil {
				break
			}
		}
		w.Header().Set("Grpc-Status", "0")
		w.Header().Set(http.TrailerPrefix+"X-Late", "late")
	})
	mux.HandleFunc("/hints", func(w http.ResponseWriter, r *http.Request) {
		w.Header().Add("Link", "</style.css>; rel=preload; as=style")
		w.WriteHeader(http.StatusEarlyHints)
		w.Header().Set("Content-Type", "text/plain")
		io.WriteString(w, "after hints")
	})
	ln, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		t.Fatal(err)
	}
	srv := &http.Server{Handler: mux, Protocols: new(http.Protocols)}
	srv.Protocols.SetHTTP1(true)
	srv.Protocols.SetUnencryptedHTTP2(true)
	go srv.Serve(ln)
	t.Cleanup(func() { srv.Close() })
	return ln.Addr().String()
}

func staticResponse(body, status string) map[string]any {
	h := map[string]any{"handler": "static_response", "body": body, "headers": map[string][]string{"Content-Type": {"text/plain"}}}
	if status != "" {
		h["status_code"] = status
	}
	return h
}

// featureRoutes are the routes of TestEngineFeatures, to backend.
func featureRoutes(backend string) []any {
	proxy := func(versions ...string) map[string]any {
		h := map[string]any{"handler": "reverse_proxy", "upstreams": []any{map[string]any{"dial": backend}}, "flush_interval": -1}
		if versions != nil {
			h["transport"] = map[string]any{"protocol": "http", "versions": versions}
		}
		return h
	}
	route := func(path string, handlers ...any) any {
		return map[string]any{"match": []any{map[string]any{"path": []string{path}}}, "handle": handlers}
	}
	return []any{
		route("/upload", proxy()),
		route("/limited", map[string]any{"handler": "request_body", "max_size": 1024}, proxy()),
		route("/events", proxy()),
		route("/duplex", proxy("h2c")),
		route("/hints", proxy()),
		route("/encode", map[string]any{"handler": "encode", "encodings": map[string]any{"gzip": map[string]any{}}},
			staticResponse(strings.Repeat("compress me ", 200), "")),
		route("/tmpl", map[string]any{"handler": "templates"}, staticResponse("{{.Req.Method}} {{.Req.Proto}} {{.Req.Host}}", "")),
		route("/hdr", map[string]any{"handler": "headers", "response": map[string]any{"set": map[string][]string{"X-Feature": {"yes"}}}},
			staticResponse("hdr", "")),
		route("/err", map[string]any{"handler": "error", "status_code": 418, "error": "teapot"}),
		route("/place", staticResponse("{http.request.proto} {http.request.proto_major} {http.request.tls.proto} "+
			"{http.request.tls.server_name} {http.request.tls.version} {http.request.host} {http.request.scheme}", "")),
	}
}

// runFeatures sends each feature's requests with c to base (uploads
// from big, 20 MB) and sums up what came back, by feature.
func runFeatures(t *testing.T, c *http.Client, base string, big []byte) map[string]string {
	t.Helper()
	out := map[string]string{}
	do := func(name string, req *http.Request, err error) *http.Response {
		if err != nil {
			t.Fatalf("%s: %v", name, err)
		}
		var hints []string
		req = req.WithContext(httptrace.WithClientTrace(req.Context(), &httptrace.ClientTrace{
			Got1xxResponse: func(code int, h textproto.MIMEHeader) error {
				hints = append(hints, fmt.Sprintf("%d %v", code, h))
				return nil
			},
		}))
		resp, err := c.Do(req)
		if err != nil {
			out[name] = "error: " + err.Error()
			return nil
		}
		body, err := io.ReadAll(resp.Body)
		resp.Body.Close()
		out[name] = summarizeResponse(resp, body, err, hints)
		return resp
	}
	get := func(name, path string, h ...string) {
		req, err := http.NewRequest("GET", base+path, nil)
		for i := 0; err == nil && i+1 < len(h); i += 2 {
			req.Header.Set(h[i], h[i+1])
		}
		do(name, req, err)
	}

	req, err := http.NewRequest("POST", base+"/upload", bytes.NewReader(big))
	do("upload 20 MB", req, err)
	req, err = http.NewRequest("POST", base+"/upload", bytes.NewReader(big[:1<<20]))
	if err == nil {
		req.Header.Set("Expect", "100-continue")
	}
	do("upload with Expect: 100-continue", req, err)
	req, err = http.NewRequest("POST", base+"/limited", bytes.NewReader(big[:4096]))
	do("request_body max_size", req, err)
	get("103 Early Hints", "/hints")
	get("encode", "/encode", "Accept-Encoding", "gzip")
	get("templates", "/tmpl")
	get("headers", "/hdr")
	get("handle_errors", "/err")
	get("placeholders", "/place")
	req, err = http.NewRequest("GET", base+"/place", nil)
	if err == nil {
		req.Host = strings.TrimPrefix(strings.Replace(base, "localhost", "127.0.0.1", 1), "https://") // not the SNI
	}
	do("strict_sni_host", req, err)
	out["server-sent events"] = runEvents(t, c, base)
	out["full duplex to h2c"] = runDuplex(t, c, base)
	return out
}

// summarizeResponse is what a response is compared by: protocol,
// status, headers but Date (sorted), the body (or its length and hash
// when long), trailers, 1xx responses.
func summarizeResponse(resp *http.Response, body []byte, err error, hints []string) string {
	var b strings.Builder
	fmt.Fprintf(&b, "%s %d", resp.Proto, resp.StatusCode)
	for _, k := range slices.Sorted(func(yield func(string) bool) {
		for k := range resp.Header {
			if k != "Date" && !yield(k) {
				return
			}
		}
	}) {
		fmt.Fprintf(&b, " | %s: %s", k, strings.Join(resp.Header[k], ", "))
	}
	if len(body) > 200 {
		fmt.Fprintf(&b, " | body %d bytes sha %x", len(body), sha256.Sum256(body))
	} else {
		fmt.Fprintf(&b, " | body %q", body)
	}
	if err != nil {
		fmt.Fprintf(&b, " | body error %v", err)
	}
	if len(resp.Trailer) > 0 {
		fmt.Fprintf(&b, " | trailers %v", resp.Trailer)
	}
	if len(hints) > 0 {
		fmt.Fprintf(&b, " | 1xx %v", hints)
	}
	return b.String()
}

// runEvents reads server-sent events (3, 150 ms apart upstream) and
// says whether the first came well before the stream's end: flushed
// through, not held back.
func runEvents(t *testing.T, c *http.Client, base string) string {
	start := time.Now()
	resp, err := c.Get(base + "/events")
	if err != nil {
		return "error: " + err.Error()
	}
	defer resp.Body.Close()
	br := bufio.NewReader(resp.Body)
	first, err := br.ReadString('\n')
	firstAt := time.Since(start)
	rest, _ := io.ReadAll(br)
	end := time.Since(start)
	streamed := end-firstAt >= 200*time.Millisecond
	return fmt.Sprintf("%s %d %s | %q %q %v | first event before the last: %v", resp.Proto, resp.StatusCode,
		resp.Header.Get("Content-Type"), first, rest, err, streamed)
}

// runDuplex sends lines one at a time through reverse_proxy to an h2c
// upstream, each only after the echo of the one before came back (the
// request body and the response stream at once), then reads the
// trailers.
func runDuplex(t *testing.T, c *http.Client, base string) string {
	pr, pw := io.Pipe()
	req, err := http.NewRequest("POST", base+"/duplex", pr)
	if err != nil {
		t.Fatal(err)
	}
	req.Header.Set("Content-Type", "application/grpc")
	resp, err := c.Do(req)
	if err != nil {
		return "error: " + err.Error()
	}
	defer resp.Body.Close()
	br := bufio.NewReader(resp.Body)
	var transcript []string
	for i := range 3 {
		done := make(chan struct{})
		go func() {
			defer close(done)
			fmt.Fprintf(pw, "line %d\n", i)
		}()
		echo, err := readLineWithin(br, 10*time.Second)
		<-done
		if err != nil {
			transcript = append(transcript, "error: "+err.Error())
			break
		}
		transcript = append(transcript, echo)
	}
	pw.Close()
	rest, err := io.ReadAll(br)
	return fmt.Sprintf("%s %d | %q | rest %q %v | trailers %v", resp.Proto, resp.StatusCode, transcript, rest, err, resp.Trailer)
}

// readLineWithin reads a line, or fails after d.
func readLineWithin(br *bufio.Reader, d time.Duration) (string, error) {
	type result struct {
		line string
		err  error
	}
	ch := make(chan result, 1)
	go func() {
		line, err := br.ReadString('\n')
		ch <- result{line, err}
	}()
	select {
	case r := <-ch:
		return r.line, r.err
	case <-time.After(d):
		return "", fmt.Errorf("no echo within %v", d)
	}
}

// readAccessLog returns the access log's entries so far, each as what
// it is compared by: method, URI, protocol, status, size, bytes read.
func readAccessLog(t *testing.T, path string) []string {
	t.Helper()
	var entries []string
	for range 50 {
		raw, err := os.ReadFile(path)
		if err != nil && !os.IsNotExist(err) {
			t.Fatal(err)
		}
		entries = entries[:0]
		for _, line := range strings.Split(strings.TrimSpace(string(raw)), "\n") {
			if line == "" {
				continue
			}
			var e struct {
				Request struct {
					Method, URI, Proto string
				} `json:"request"`
				Status    int   `json:"status"`
				Size      int64 `json:"size"`
				BytesRead int64 `json:"bytes_read"`
			}
			if err := json.Unmarshal([]byte(line), &e); err != nil {
				t.Fatalf("access log line %q: %v", line, err)
			}
			entries = append(entries, fmt.Sprintf("%s %s %s %d size=%d read=%d", e.Request.Method, e.Request.URI, e.Request.Proto, e.Status, e.Size, e.BytesRead))
		}
		if len(entries) > 0 {
			break
		}
		time.Sleep(20 * time.Millisecond)
	}
	return entries
}

// requestMetrics returns the series of Caddy's request count and
// duration count for the test's server, from the admin API's /metrics,
// each as its labels and value, sorted.
func requestMetrics(t *testing.T, s *caddysite.Server) []string {
	t.Helper()
	code, body, err := s.API(http.MethodGet, "/metrics", nil)
	if err != nil || code != http.StatusOK {
		t.Fatalf("GET /metrics: %d %v", code, err)
	}
	var series []string
	for _, line := range strings.Split(body, "\n") {
		if (strings.HasPrefix(line, "caddy_http_requests_total{") || strings.HasPrefix(line, "caddy_http_request_duration_seconds_count{")) &&
			strings.Contains(line, `server="test"`) {
			series = append(series, line)
		}
	}
	slices.Sort(series)
	return series
}
