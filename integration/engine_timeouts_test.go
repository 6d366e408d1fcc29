package integration

import (
	"fmt"
	"io"
	"net/http"
	"strings"
	"testing"
	"time"

	"github.com/h2file/caddy-h2file/internal/h2"
	"github.com/h2file/caddy-h2file/internal/harness"
	"github.com/h2file/caddy-h2file/internal/harness/caddysite"
)

// TestEngineWriteTimeoutSlowUpstream: a server's write_timeout cuts a
// response whose handler is not writing (reverse_proxy waiting for an
// upstream that does not answer) through Go's HTTP/2 server and through
// the engine alike: the client's stream is reset (INTERNAL_ERROR) at
// about write_timeout, and the upstream's request is cancelled then, not
// when the upstream would have answered.
func TestEngineWriteTimeoutSlowUpstream(t *testing.T) {
	const writeTimeout = 700 * time.Millisecond
	cancelled := make(chan time.Duration, 4)
	upstream := startUpstream(t, func(w http.ResponseWriter, r *http.Request) {
		start := time.Now()
		select {
		case <-r.Context().Done():
			cancelled <- time.Since(start)
		case <-time.After(20 * time.Second):
			io.WriteString(w, "late")
		}
	})

	s := caddysite.Start(t, caddysite.Config{
		Routes: []any{map[string]any{
			"match": []any{map[string]any{"path": []string{"/slow"}}},
			"handle": []any{map[string]any{
				"handler": "reverse_proxy", "upstreams": []any{map[string]any{"dial": upstream}},
			}},
		}},
		Protocols: []string{"h1", "h2"},
		Server:    map[string]any{"write_timeout": writeTimeout.String()},
	})
	for _, tc := range []struct {
		name     string
		wrappers []any
	}{{"Go's server", nil}, {"engine", engineWrappers()}} {
		if tc.wrappers != nil {
			cfg := s.Config()
			server, _ := caddysite.ServerOf(cfg)
			server["listener_wrappers"] = tc.wrappers
			if err := s.Load(cfg); err != nil {
				t.Fatal(err)
			}
			s.CloseClients()
			// a connection of the config before may still be accepted
			// and closed by its server: the request waits for one the
			// engine serves
			streams := h2.ReadStats().Streams
			awaitNewConfig(t, s, s.URL, func() bool { return h2.ReadStats().Streams > streams })
		}
		start := time.Now()
		resp, err := s.H2.Get(s.URL + "/slow")
		took := time.Since(start)
		if err == nil {
			body, rerr := io.ReadAll(resp.Body)
			resp.Body.Close()
			err = rerr
			if err == nil {
				err = fmt.Errorf("%s %q", resp.Status, body)
			}
		}
		if !strings.Contains(fmt.Sprint(err), "INTERNAL_ERROR") || took > 4*writeTimeout {
			t.Errorf("%s: the response ended after %v with %v; want a stream reset (INTERNAL_ERROR) at about %v", tc.name, took, err, writeTimeout)
		}
		if d := harness.Recv(t, cancelled, tc.name+": the upstream's request cancelled"); d > 4*writeTimeout {
			t.Errorf("%s: the upstream's request was cancelled after %v; want about %v", tc.name, d, writeTimeout)
		}
	}
}
