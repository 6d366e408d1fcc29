package h2

import (
	"bytes"
	"crypto/sha256"
	"fmt"
	"io"
	"maps"
	"net/http"
	"net/http/httptrace"
	"net/textproto"
	"slices"
	"strconv"
	"strings"
	"sync"
	"testing"
)

// exchange is what a client saw of one request: compared between the
// engine and x/net.
type exchange struct {
	Status        int
	Header        http.Header // without Date
	ContentLength int64
	Body          string // or its length and hash when long
	Trailer       http.Header
	Informational []string // 1xx statuses with their headers
	Err           string   // the request failed (only whether it did)
}

func (e exchange) String() string {
	return fmt.Sprintf("status %d, content-length %d, header %v, trailer %v, 1xx %v, body %q, err %q",
		e.Status, e.ContentLength, e.Header, e.Trailer, e.Informational, e.Body, e.Err)
}

// do sends req's method, path, header and body to base and records what
// came back.
func do(t *testing.T, client *http.Client, base string, rq testRequest) exchange {
	t.Helper()
	var body io.Reader
	if rq.body != "" {
		body = strings.NewReader(rq.body)
	}
	req, err := http.NewRequest(rq.method, base+rq.path, body)
	if err != nil {
		t.Fatal(err)
	}
	maps.Copy(req.Header, rq.header)
	var ex exchange
	var mu sync.Mutex
	req = req.WithContext(httptrace.WithClientTrace(req.Context(), &httptrace.ClientTrace{
		Got1xxResponse: func(code int, h textproto.MIMEHeader) error {
			mu.Lock()
			defer mu.Unlock()
			ex.Informational = append(ex.Informational, fmt.Sprintf("%d %v", code, h))
			return nil
		},
	}))
	resp, err := client.Do(req)
	if err != nil {
		ex.Err = "failed"
		if testing.Verbose() {
			t.Logf("%s %s: %v", rq.method, rq.path, err)
		}
		return ex
	}
	defer resp.Body.Close()
	b, err := io.ReadAll(resp.Body)
	if err != nil {
		ex.Err = "body failed"
	}
	ex.Status = resp.StatusCode
	ex.Header = resp.Header.Clone()
	ex.Header.Del("Date")
	ex.ContentLength = resp.ContentLength
	ex.Trailer = resp.Trailer
	if resp.ProtoMajor != 2 {
		t.Fatalf("%s %s: protocol %s", rq.method, rq.path, resp.Proto)
	}
	if len(b) > 200 {
		ex.Body = fmt.Sprintf("%d bytes, sha256 %x", len(b), sha256.Sum256(b))
	} else {
		ex.Body = string(b)
	}
	return ex
}

type testRequest struct {
	method, path string
	header       http.Header
	body         string
}

// diffHandler answers by path, with the handler behaviours whose framing
// x/net defines (see TestEngineAgainstXNet).
func diffHandler(w http.ResponseWriter, r *http.Request) {
	q := r.URL.Query()
	n, _ := strconv.Atoi(q.Get("n"))
	body := bytes.Repeat([]byte("0123456789abcdef"), n/16+1)[:n]
	switch r.URL.Path {
	case "/bytes": // n bytes, in writes of w bytes, sniffed type unless t
		if t := q.Get("t"); t != "" {
			w.Header().Set("Content-Type", t)
		}
		if q.Get("cl") != "" {
			w.Header().Set("Content-Length", strconv.Itoa(n))
		}
		step, _ := strconv.Atoi(q.Get("w"))
		if step <= 0 {
			step = len(body) + 1
		}
		for len(body) > 0 {
			k := min(step, len(body))
			w.Write(body[:k])
			body = body[k:]
			if q.Get("flush") != "" {
				w.(http.Flusher).Flush()
			}
		}
	case "/status":
		code, _ := strconv.Atoi(q.Get("code"))
		w.Header().Set("X-Code", q.Get("code"))
		w.WriteHeader(code)
		_, err := w.Write(body)
		fmt.Fprintf(w, "write error: %v", err)
	case "/flush-empty":
		w.Header().Set("X-A", "1")
		w.(http.Flusher).Flush()
	case "/trailers":
		w.Header().Set("Trailer", "X-Declared, X-Unset")
		w.Header().Set("Content-Type", "text/plain")
		w.Write(body)
		w.Header().Set("X-Declared", "d")
		w.Header().Set(http.TrailerPrefix+"X-Late", "late")
	case "/early-hints":
		w.Header().Set("Link", "</a.css>; rel=preload")
		w.Header().Set("Content-Length", "99")
		w.WriteHeader(http.StatusEarlyHints)
		w.Header().Del("Content-Length")
		w.Write([]byte("after hints"))
	case "/echo":
		b, err := io.ReadAll(r.Body)
		fmt.Fprintf(w, "%s %d %q err=%v sum=%x trailer=%v cl=%d", r.Method, len(b), r.Header.Get("X-In"), err, sha256.Sum256(b), r.Trailer, r.ContentLength)
	case "/request":
		host, _, _ := strings.Cut(r.Host, ":") // the two servers' ports differ
		fmt.Fprintf(w, "%s %s %s host=%s uri=%s proto=%s %d.%d cl=%d tls=%v cookie=%q",
			r.Method, r.URL, r.URL.RawQuery, host, r.RequestURI, r.Proto, r.ProtoMajor, r.ProtoMinor, r.ContentLength, r.TLS != nil, r.Header.Get("Cookie"))
		keys := slices.Sorted(maps.Keys(r.Header))
		fmt.Fprintf(w, " keys=%v", keys)
	case "/too-much":
		w.Header().Set("Content-Length", "5")
		_, err := w.Write([]byte("123456"))
		w.Header().Set("X-Never", fmt.Sprint(err)) // after the header: not sent
	case "/big-header":
		w.Header().Set("X-Big", strings.Repeat("v", 20000))
		w.Write([]byte("ok"))
	case "/connection-close":
		w.Header().Set("Connection", "close")
		w.Write([]byte("bye"))
	case "/panic":
		w.Write([]byte("partial"))
		w.(http.Flusher).Flush()
		panic("test panic")
	case "/abort":
		panic(http.ErrAbortHandler)
	case "/invalid-header":
		w.Header().Set("X-Bad", "a\x00b")
		w.Header()["bad name"] = []string{"x"}
		w.Header().Set("Transfer-Encoding", "chunked")
		w.Write([]byte("ok"))
	default:
		http.NotFound(w, r)
	}
}

// TestEngineAgainstXNet serves the same handler through the engine and
// through x/net's server and compares what Go's client sees: status,
// every header but Date, Content-Length, body, trailers, 1xx responses,
// failures.
func TestEngineAgainstXNet(t *testing.T) {
	p := startPair(t, http.HandlerFunc(diffHandler), Config{})
	get := func(path string) testRequest { return testRequest{method: "GET", path: path} }
	reqs := []testRequest{
		get("/bytes?n=0"), get("/bytes?n=5"), get("/bytes?n=4096"), get("/bytes?n=4097"),
		get("/bytes?n=100000&w=1000"), get("/bytes?n=100000&w=70000"), get("/bytes?n=3000000&w=65536"),
		get("/bytes?n=5000&t=text/x-test"), get("/bytes?n=5000&cl=1"), get("/bytes?n=5000&w=100&flush=1"),
		get("/bytes?n=16384"), get("/bytes?n=16385&w=16385"), get("/bytes?n=2000000&cl=1&w=2000000"),
		{method: "HEAD", path: "/bytes?n=5"}, {method: "HEAD", path: "/bytes?n=100000"}, {method: "HEAD", path: "/bytes?n=0"},
		{method: "HEAD", path: "/bytes?n=5000&cl=1"},
		get("/status?code=204&n=3"), get("/status?code=304&n=3"), get("/status?code=404&n=3"), get("/status?code=500&n=0"),
		get("/status?code=299&n=10"), get("/status?code=999&n=1"),
		get("/flush-empty"), get("/trailers?n=10"), get("/trailers?n=10000"), get("/early-hints"),
		get("/too-much"), get("/big-header"), get("/invalid-header"), get("/missing"),
		get("/request?a=1&b=%20x"), get("/request/%2e%2e/x?y"),
		{method: "GET", path: "/request", header: http.Header{"Cookie": {"a=1", "b=2"}, "X-Multi": {"1", "2"}}},
		{method: "POST", path: "/echo", body: ""},
		{method: "POST", path: "/echo", body: "hello", header: http.Header{"X-In": {"in"}}},
		{method: "PUT", path: "/echo", body: strings.Repeat("x", 100_000)},
		{method: "POST", path: "/echo", body: strings.Repeat("y", 3_000_000)},
		{method: "POST", path: "/echo", body: "continue", header: http.Header{"Expect": {"100-continue"}}},
		{method: "OPTIONS", path: "/request"}, {method: "DELETE", path: "/request"},
		get("/panic"), get("/abort"),
	}
	for _, rq := range reqs {
		want := do(t, p.client, p.xnetURL, rq)
		got := do(t, p.client, p.engineURL, rq)
		if got.String() != want.String() {
			t.Errorf("%s %s\nengine: %v\nx/net:  %v", rq.method, rq.path, got, want)
		}
	}
	// Connection: close last: x/net and the engine send GOAWAY
	rq := get("/connection-close")
	if got, want := do(t, p.client, p.engineURL, rq), do(t, p.client, p.xnetURL, rq); got.String() != want.String() {
		t.Errorf("%s %s\nengine: %v\nx/net:  %v", rq.method, rq.path, got, want)
	}
}
