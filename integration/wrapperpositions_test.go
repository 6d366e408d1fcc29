package integration

import (
	"encoding/json"
	"os"
	"regexp"
	"strings"
	"testing"

	"github.com/caddyserver/caddy/v2"
	"github.com/caddyserver/caddy/v2/caddyconfig"
	_ "github.com/caddyserver/caddy/v2/caddyconfig/caddyfile"

	h2file "github.com/h2file/caddy-h2file"
)

// wpSite is the site appended to a global options block to adapt it.
const wpSite = "\nlocalhost:8443 {\n\trespond \"hi\"\n}\n"

// wpAdapt adapts a Caddyfile and returns the config and the listener
// wrappers of its one server.
func wpAdapt(t *testing.T, caddyfile string) (cfg []byte, wrappers string, err error) {
	t.Helper()
	out, _, err := caddyconfig.GetAdapter("caddyfile").Adapt([]byte(caddyfile), nil)
	if err != nil {
		return nil, "", err
	}
	var parsed struct {
		Apps struct {
			HTTP struct {
				Servers map[string]struct {
					ListenerWrappers json.RawMessage `json:"listener_wrappers"`
				} `json:"servers"`
			} `json:"http"`
		} `json:"apps"`
	}
	if err := json.Unmarshal(out, &parsed); err != nil {
		t.Fatal(err)
	}
	if len(parsed.Apps.HTTP.Servers) != 1 {
		t.Fatalf("want one server: %s", out)
	}
	for _, srv := range parsed.Apps.HTTP.Servers {
		wrappers = wpCanonical(t, srv.ListenerWrappers)
	}
	return out, wrappers, nil
}

// wpCanonical decodes listener wrappers and encodes them again, so that
// equal configs compare equal ("5s" and 5000000000 are the same
// close_timeout).
func wpCanonical(t *testing.T, raw []byte) string {
	t.Helper()
	var wrappers []struct {
		Wrapper string `json:"wrapper"`
		h2file.CoalesceWrapper
	}
	if err := json.Unmarshal(raw, &wrappers); err != nil {
		t.Fatalf("%s: %v", raw, err)
	}
	b, err := json.Marshal(wrappers)
	if err != nil {
		t.Fatal(err)
	}
	return string(b)
}

// wpValidate loads cfg as `caddy validate` does (provisions, starts
// nothing).
func wpValidate(t *testing.T, cfg []byte) error {
	t.Helper()
	var c caddy.Config
	if err := json.Unmarshal(cfg, &c); err != nil {
		t.Fatal(err)
	}
	return caddy.Validate(&c)
}

// Each position docs/coalesce.md's table shows adapts to the JSON the
// table gives for it, and loads.
func TestWrapperPositionsInDocs(t *testing.T) {
	t.Setenv("XDG_DATA_HOME", t.TempDir())
	t.Setenv("XDG_CONFIG_HOME", t.TempDir())
	page, err := os.ReadFile("../docs/coalesce.md")
	if err != nil {
		t.Fatal(err)
	}
	// a row: the wrappers in the Caddyfile's order, then the JSON
	row := regexp.MustCompile("(?m)^\\| ((?:`[a-z0-9_]+` ?)+) \\| `(\\[.*?\\])` \\|")
	rows := row.FindAllStringSubmatch(string(page), -1)
	if len(rows) != 4 {
		t.Fatalf("found %d positions in docs/coalesce.md, want 4 (engine, both, after, below)", len(rows))
	}
	for _, r := range rows {
		names := strings.Fields(strings.ReplaceAll(r[1], "`", " "))
		caddyfile := "{\n\tservers {\n\t\tlistener_wrappers {\n\t\t\t" + strings.Join(names, "\n\t\t\t") + "\n\t\t}\n\t}\n}\n"
		wantJSON := wpCanonical(t, []byte(r[2]))
		cfg, got, err := wpAdapt(t, caddyfile+wpSite)
		if err != nil {
			t.Errorf("%v does not adapt: %v", names, err)
			continue
		}
		if got != wantJSON {
			t.Errorf("%v adapts to %s, docs/coalesce.md says %s", names, got, wantJSON)
		}
		if err := wpValidate(t, cfg); err != nil {
			t.Errorf("%v does not load: %v", names, err)
		}
	}
}

// What docs/coalesce.md says is rejected is, with the words it quotes.
func TestWrapperPositionsRejected(t *testing.T) {
	t.Setenv("XDG_DATA_HOME", t.TempDir())
	t.Setenv("XDG_CONFIG_HOME", t.TempDir())
	wrappers := func(lines ...string) string {
		return "{\n\tservers {\n\t\tlistener_wrappers {\n\t\t\t" + strings.Join(lines, "\n\t\t\t") + "\n\t\t}\n\t}\n}\n" + wpSite
	}
	for _, tc := range []struct {
		name      string
		caddyfile string
		adaptErr  string // part of the error of adapting, if any
		loadErr   string // part of the error of loading, if any
	}{
		{name: "tls first", caddyfile: wrappers("tls", "coalesce"),
			loadErr: "unnecessary to specify the TLS listener wrapper in the first position"},
		{name: "twice after tls", caddyfile: wrappers("coalesce", "coalesce"),
			loadErr: "lists the coalesce listener wrapper twice in a row (listener_wrappers 0 and 1)"},
		{name: "twice below tls", caddyfile: wrappers("coalesce", "coalesce", "tls"),
			loadErr: "twice in a row (listener_wrappers 0 and 1)"},
		{name: "twice after tls, below it too", caddyfile: wrappers("coalesce", "tls", "coalesce", "coalesce"),
			loadErr: "twice in a row (listener_wrappers 2 and 3)"},
		{name: "on one line", caddyfile: wrappers("coalesce coalesce"),
			adaptErr: "coalesce takes no arguments, got 'coalesce'"},
		{name: "max_pending 0", caddyfile: wrappers("coalesce {\n\t\t\t\tmax_pending 0\n\t\t\t}"),
			adaptErr: "max_pending out of range: 0 (must be between 1 byte and 1GiB)"},
		{name: "max_pending 2GiB", caddyfile: wrappers("coalesce {\n\t\t\t\tmax_pending 2GiB\n\t\t\t}"),
			adaptErr: "max_pending out of range: 2GiB (must be between 1 byte and 1GiB)"},
		{name: "max_total 2TiB", caddyfile: wrappers("coalesce {\n\t\t\t\tmax_total 2TiB\n\t\t\t}"),
			adaptErr: "max_total out of range: 2TiB (must be between 1 byte and 1TiB)"},
		{name: "max_total below max_pending", caddyfile: wrappers("coalesce {\n\t\t\t\tmax_pending 1MiB\n\t\t\t\tmax_total 64KiB\n\t\t\t}"),
			loadErr: "max_total (65536) must be at least max_pending (1048576)"},
		// not rejected: separate positions, and separate servers
		{name: "both", caddyfile: wrappers("coalesce", "tls", "coalesce")},
	} {
		cfg, _, err := wpAdapt(t, tc.caddyfile)
		if tc.adaptErr != "" {
			if err == nil || !strings.Contains(err.Error(), tc.adaptErr) {
				t.Errorf("%s: adapting: %v, want an error with %q", tc.name, err, tc.adaptErr)
			}
			continue
		}
		if err != nil {
			t.Errorf("%s: adapting: %v", tc.name, err)
			continue
		}
		err = wpValidate(t, cfg)
		switch {
		case tc.loadErr == "" && err != nil:
			t.Errorf("%s: loading: %v", tc.name, err)
		case tc.loadErr != "" && (err == nil || !strings.Contains(err.Error(), tc.loadErr)):
			t.Errorf("%s: loading: %v, want an error with %q", tc.name, err, tc.loadErr)
		}
	}

	// JSON: the same rule, naming the server by its listen addresses
	// (nothing listens: validating starts nothing)
	cfg := []byte(`{"admin": {"disabled": true}, "apps": {"http": {"servers": {
		"one": {"listen": ["127.0.0.1:0"], "listener_wrappers": [{"wrapper": "coalesce"}, {"wrapper": "tls"}, {"wrapper": "coalesce"}]},
		"two": {"listen": ["127.0.0.2:0"], "listener_wrappers": [{"wrapper": "coalesce", "max_pending": 1024}, {"wrapper": "coalesce"}]}
	}}}}`)
	if err := wpValidate(t, cfg); err == nil || !strings.Contains(err.Error(), "coalesce (server listening on 127.0.0.2:0): the server lists the coalesce listener wrapper twice in a row") {
		t.Errorf("JSON with coalesce twice in a row: %v", err)
	}
}
