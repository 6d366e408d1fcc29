package h2

import (
	"errors"
	"io"
	"net/http"
	"testing"
)

// TestKeptResponseWriter: a ResponseWriter kept by a goroutine after its
// handler returned (a handler's bug) must fail, and never reach the
// response of the stream whose handler runs with the same pooled state
// next. On the old engine, which pooled the ResponseWriter itself, the
// late Write went into the next response's body.
func TestKeptResponseWriter(t *testing.T) {
	kept := make(chan http.ResponseWriter, 1)
	started, late := make(chan struct{}), make(chan chan struct{}, 1)
	p := startEngine(t, http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		switch r.URL.Path {
		case "/keep":
			w.Write([]byte("kept"))
			kept <- w
		case "/victim":
			w.Write([]byte("victim-1,"))
			w.(http.Flusher).Flush()
			done := <-late
			started <- struct{}{}
			<-done
			w.Write([]byte("victim-2"))
		}
	}), Config{})
	get := func(path string) (*http.Response, string, error) {
		res, err := p.client.Get(p.engineURL + path)
		if err != nil {
			return nil, "", err
		}
		defer res.Body.Close()
		b, err := io.ReadAll(res.Body)
		return res, string(b), err
	}
	for i := range 20 {
		if _, body, err := get("/keep"); err != nil || body != "kept" {
			t.Fatalf("/keep: %q, %v", body, err)
		}
		w := <-kept
		done := make(chan struct{})
		late <- done
		type result struct {
			res  *http.Response
			body string
			err  error
		}
		victim := make(chan result, 1)
		go func() { res, body, err := get("/victim"); victim <- result{res, body, err} }()
		<-started
		// every method of the kept handle, while another handler writes
		w.Header().Set("X-Late", "1")
		w.WriteHeader(http.StatusTeapot)
		_, writeErr := w.Write([]byte("LATE"))
		_, stringErr := io.WriteString(w, "LATE")
		flushErr := http.NewResponseController(w).Flush()
		close(done)
		v := <-victim
		if v.err != nil {
			t.Fatalf("round %d: /victim: %v", i, v.err)
		}
		if v.body != "victim-1,victim-2" || v.res.StatusCode != 200 || v.res.Header.Get("X-Late") != "" {
			t.Fatalf("round %d: the kept ResponseWriter reached another stream: status %d, X-Late %q, body %q",
				i, v.res.StatusCode, v.res.Header.Get("X-Late"), v.body)
		}
		for _, err := range []error{writeErr, stringErr, flushErr} {
			if !errors.Is(err, errHandlerDone) {
				t.Fatalf("round %d: a late call returned %v, want %v", i, err, errHandlerDone)
			}
		}
	}
}
