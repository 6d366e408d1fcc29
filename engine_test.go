package h2file

import (
	"encoding/json"
	"strings"
	"testing"
	"time"

	"github.com/caddyserver/caddy/v2/caddyconfig/caddyfile"
)

// TestEngineCaddyfile checks h2_engine's Caddyfile: no argument, the
// send_timeout option (and its default), nothing else.
func TestEngineCaddyfile(t *testing.T) {
	for in, want := range map[string]time.Duration{
		"h2_engine":                          defaultSendTimeout,
		"h2_engine {\n\tsend_timeout 5s\n}":  5 * time.Second,
		"h2_engine {\n\tsend_timeout -1s\n}": 0,
		"h2_engine {\n\tsend_timeout 2m\n}":  2 * time.Minute,
	} {
		w := new(EngineWrapper)
		if err := w.UnmarshalCaddyfile(caddyfile.NewTestDispenser(in)); err != nil {
			t.Errorf("%q: %v", in, err)
		} else if got := w.sendTimeout(); got != want {
			t.Errorf("%q: send timeout %v, want %v", in, got, want)
		}
	}
	for _, bad := range []string{
		"h2_engine x",
		"h2_engine {\n\tmax_streams 10\n}",
		"h2_engine {\n\tsend_timeout\n}",
		"h2_engine {\n\tsend_timeout soon\n}",
		"h2_engine {\n\tsend_timeout 5s 6s\n}",
	} {
		if err := new(EngineWrapper).UnmarshalCaddyfile(caddyfile.NewTestDispenser(bad)); err == nil {
			t.Errorf("%q: no error", bad)
		}
	}
}

// TestEnginePlace checks where h2_engine may be listed: last, and right
// after tls or first (tls then comes before it implicitly).
func TestEnginePlace(t *testing.T) {
	for _, tc := range []struct {
		wrappers string
		wantErr  string
	}{
		{"h2_engine", ""},
		{"tls h2_engine", ""},
		{"coalesce tls h2_engine", ""},
		{"coalesce tls", ""},
		{"h2_engine coalesce", "must be the last"},
		{"tls h2_engine coalesce", "must be the last"},
		{"coalesce tls coalesce h2_engine", "right after tls"},
		{"coalesce h2_engine", "right after tls"},
	} {
		var raws []json.RawMessage
		for _, name := range strings.Fields(tc.wrappers) {
			raws = append(raws, json.RawMessage(`{"wrapper":"`+name+`"}`))
		}
		err := checkEnginePlace(wrapperNames(raws))
		switch {
		case tc.wantErr == "" && err != nil:
			t.Errorf("%s: %v", tc.wrappers, err)
		case tc.wantErr != "" && (err == nil || !strings.Contains(err.Error(), tc.wantErr)):
			t.Errorf("%s: error %v, want one saying %q", tc.wrappers, err, tc.wantErr)
		}
	}
}
