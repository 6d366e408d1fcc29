package h2file

import (
	"encoding/json"
	"strings"
	"testing"

	"github.com/caddyserver/caddy/v2/caddyconfig/caddyfile"
)

// TestEngineCaddyfile checks that h2_engine takes no argument and no
// option.
func TestEngineCaddyfile(t *testing.T) {
	if err := new(EngineWrapper).UnmarshalCaddyfile(caddyfile.NewTestDispenser("h2_engine")); err != nil {
		t.Errorf("h2_engine: %v", err)
	}
	for _, bad := range []string{"h2_engine x", "h2_engine {\n\tmax_streams 10\n}"} {
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
		err := checkEnginePlace(raws)
		switch {
		case tc.wantErr == "" && err != nil:
			t.Errorf("%s: %v", tc.wrappers, err)
		case tc.wantErr != "" && (err == nil || !strings.Contains(err.Error(), tc.wantErr)):
			t.Errorf("%s: error %v, want one saying %q", tc.wrappers, err, tc.wantErr)
		}
	}
}
