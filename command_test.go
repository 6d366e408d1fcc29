package h2file

import (
	"context"
	"encoding/json"
	"fmt"
	"net"
	"os"
	"os/exec"
	"reflect"
	"slices"
	"strings"
	"testing"
	"time"

	"github.com/caddyserver/caddy/v2"
	caddycmd "github.com/caddyserver/caddy/v2/cmd"
	"github.com/caddyserver/caddy/v2/modules/caddyhttp"
	"github.com/spf13/pflag"
	"go.uber.org/zap"
	"go.uber.org/zap/zapcore"
	"go.uber.org/zap/zaptest/observer"

	"github.com/h2file/caddy-h2file/internal/harness"
	"github.com/h2file/caddy-h2file/internal/harness/caddysite"
)

// ownCommandFlags are the flags h2-file-server has and file-server has not.
var ownCommandFlags = []string{"http-port", "no-cache", "no-coalesce", "no-engine"}

// testNetwork is a listener network for running file-server in-process:
// whatever port an address names, its TCP listener is a free loopback
// port, so configs that would bind :80 (automatic HTTPS redirects) bind
// nothing fixed. HTTP/3 listens on the address's UDP port.
const testNetwork = "h2filetest"

func init() {
	caddy.RegisterNetwork(testNetwork, func(ctx context.Context, _, _, _ string, _ uint, cfg net.ListenConfig) (any, error) {
		return cfg.Listen(ctx, "tcp", "127.0.0.1:0")
	})
	caddyhttp.RegisterNetworkHTTP3(testNetwork, "udp")
}

// h2ConfigFor is h2-file-server's config for args, as generic JSON.
func h2ConfigFor(t *testing.T, args ...string) map[string]any {
	t.Helper()
	cmd := caddysite.CommandFor(t, "h2-file-server")
	if err := cmd.ParseFlags(args); err != nil {
		t.Fatalf("parsing %q: %v", args, err)
	}
	cfg, _, err := h2FileServerConfig(caddycmd.Flags{FlagSet: cmd.Flags()})
	if err != nil {
		t.Fatalf("config for %q: %v", args, err)
	}
	return genericJSON(t, cfg)
}

func genericJSON(t *testing.T, v any) map[string]any {
	t.Helper()
	raw, err := json.Marshal(v)
	if err != nil {
		t.Fatal(err)
	}
	var m map[string]any
	if err := json.Unmarshal(raw, &m); err != nil {
		t.Fatal(err)
	}
	return m
}

// asFileServer undoes what h2-file-server changes in file-server's config:
// the handler name and the listener wrappers. It reports how many
// handlers and wrapper lists it changed.
func asFileServer(v any) (handlers, wrappers int) {
	switch v := v.(type) {
	case map[string]any:
		if v["handler"] == "h2_file_server" {
			v["handler"] = "file_server"
			handlers++
		}
		if _, ok := v["listener_wrappers"]; ok {
			delete(v, "listener_wrappers")
			wrappers++
		}
		for _, e := range v {
			h, w := asFileServer(e)
			handlers, wrappers = handlers+h, wrappers+w
		}
	case []any:
		for _, e := range v {
			h, w := asFileServer(e)
			handlers, wrappers = handlers+h, wrappers+w
		}
	}
	return handlers, wrappers
}

func TestH2FileServerFlagsMatchFileServer(t *testing.T) {
	fileServer, h2 := caddysite.CommandFor(t, "file-server").Flags(), caddysite.CommandFor(t, "h2-file-server").Flags()
	fileServer.VisitAll(func(f *pflag.Flag) {
		g := h2.Lookup(f.Name)
		if g == nil {
			t.Errorf("h2-file-server has no --%s", f.Name)
			return
		}
		if g.Shorthand != f.Shorthand || g.Value.Type() != f.Value.Type() || g.DefValue != f.DefValue || g.Usage != f.Usage {
			t.Errorf("--%s: h2-file-server has -%s %s default %q %q, file-server -%s %s default %q %q", f.Name,
				g.Shorthand, g.Value.Type(), g.DefValue, g.Usage, f.Shorthand, f.Value.Type(), f.DefValue, f.Usage)
		}
	})
	var own []string
	h2.VisitAll(func(f *pflag.Flag) {
		if fileServer.Lookup(f.Name) == nil {
			own = append(own, f.Name)
		}
	})
	if !reflect.DeepEqual(own, ownCommandFlags) {
		t.Errorf("h2-file-server's own flags are %q, want %q", own, ownCommandFlags)
	}
	if sub, _, err := caddysite.CommandFor(t, "h2-file-server").Find([]string{"export-template"}); err != nil || sub.Name() != "export-template" {
		t.Errorf("no export-template subcommand (%v)", err)
	}
}

// TestH2FileServerConfigDefaults checks what the parity test cannot run:
// default listeners on fixed ports, and h2file's own flags.
func TestH2FileServerConfigDefaults(t *testing.T) {
	server := func(cfg map[string]any) map[string]any {
		return cfg["apps"].(map[string]any)["http"].(map[string]any)["servers"].(map[string]any)["static"].(map[string]any)
	}
	handler := func(cfg map[string]any) map[string]any {
		hs := server(cfg)["routes"].([]any)[0].(map[string]any)["handle"].([]any)
		return hs[len(hs)-1].(map[string]any)
	}
	for _, tc := range []struct {
		args   []string
		listen string
	}{
		{nil, ":80"},
		{[]string{"--domain", "example.com"}, ":443"},
		{[]string{"--http-port", "8080"}, ":8080"},
		{[]string{"--domain", "example.com", "--http-port", "8080"}, ":443"},
		{[]string{"--listen", "127.0.0.1:9"}, "127.0.0.1:9"},
	} {
		if got := server(h2ConfigFor(t, tc.args...))["listen"]; !reflect.DeepEqual(got, []any{tc.listen}) {
			t.Errorf("%q: listen %v, want [%s]", tc.args, got, tc.listen)
		}
	}

	cfg := h2ConfigFor(t)
	for _, tc := range []struct {
		args []string
		want []string
	}{
		{nil, []string{"coalesce", "tls", "h2_engine"}},
		{[]string{"--no-engine"}, []string{"coalesce", "tls", "coalesce"}},
		{[]string{"--no-coalesce"}, []string{"h2_engine"}},
		{[]string{"--no-coalesce", "--no-engine"}, nil},
	} {
		c := cfg
		if tc.args != nil {
			c = h2ConfigFor(t, tc.args...)
		}
		var got []string
		list, _ := server(c)["listener_wrappers"].([]any)
		for _, w := range list {
			got = append(got, fmt.Sprint(w.(map[string]any)["wrapper"]))
		}
		if !slices.Equal(got, tc.want) {
			t.Errorf("%q: listener_wrappers %v, want %v", tc.args, got, tc.want)
		}
	}
	if h := handler(cfg); h["handler"] != "h2_file_server" || h["cache"] != nil {
		t.Errorf("default handler %v, want h2_file_server with the default cache", h)
	}
	if _, ok := cfg["apps"].(map[string]any)["http"].(map[string]any)["http_port"]; ok {
		t.Error("http_port set without --http-port")
	}
	if got := handler(h2ConfigFor(t, "--no-cache"))["cache"]; !reflect.DeepEqual(got, map[string]any{"disabled": true}) {
		t.Errorf("--no-cache: cache %v", got)
	}
	if got := h2ConfigFor(t, "--http-port", "8080")["apps"].(map[string]any)["http"].(map[string]any)["http_port"]; got != float64(8080) {
		t.Errorf("--http-port 8080: http_port %v", got)
	}
	for _, args := range [][]string{{"--http-port", "-1"}, {"--http-port", "65536"}, {"--precompressed", "nonesuch"}} {
		cmd := caddysite.CommandFor(t, "h2-file-server")
		if err := cmd.ParseFlags(args); err != nil {
			t.Fatal(err)
		}
		if _, _, err := h2FileServerConfig(caddycmd.Flags{FlagSet: cmd.Flags()}); err == nil {
			t.Errorf("%q accepted", args)
		}
	}
}

// parityChildEnv marks the child process TestH2FileServerConfigMatchesFileServer
// runs file-server in: file-server's command traps signals and never
// returns, so it runs in a process of its own.
const parityChildEnv = "H2FILE_PARITY_CHILD"

// TestH2FileServerConfigMatchesFileServer runs Caddy's own file-server
// command for sets of flags and checks that h2-file-server's config for
// the same flags, with file_server for h2_file_server and without the
// listener wrappers, is the very config file-server is running: loading
// it does not reload Caddy (Caddy skips a config equal to the running one).
func TestH2FileServerConfigMatchesFileServer(t *testing.T) {
	if os.Getenv(parityChildEnv) == "" {
		runParityChild(t)
		return
	}
	for i, args := range [][]string{
		{"--root", "example"},
		{"--root", "example", "--domain", "localhost"},
		{"--root", "example", "--browse", "--reveal-symlinks", "--file-limit", "5"},
		{"--root", "example", "--templates", "--access-log", "--debug", "--no-compress", "--precompressed", "br,gzip"},
		{"-r", "example", "-d", "localhost", "-b", "-p", "zstd", "-p", "gzip", "-a"},
		{"--domain", "localhost", "--no-compress", "--templates"},
	} {
		t.Run(fmt.Sprint(i), func(t *testing.T) {
			args = append(args, "--listen", fmt.Sprintf("%s/127.0.0.1:%d", testNetwork, harness.FreePort(t)))
			mine := h2ConfigFor(t, args...)
			candidate := genericJSON(t, mine)
			if h, w := asFileServer(candidate); h != 1 || w != 1 {
				t.Fatalf("h2-file-server's config has %d h2_file_server handlers and %d wrapper lists, want 1 and 1", h, w)
			}
			runFileServer(t, args)
			running := caddy.ActiveContext().Context
			if err := caddy.Load(caddysite.MustJSON(t, candidate), false); err != nil {
				t.Fatalf("loading h2-file-server's config as file-server's: %v", err)
			}
			if caddy.ActiveContext().Context != running {
				t.Errorf("file-server %q runs another config than h2-file-server's with file_server and no wrappers:\n%s", args, caddysite.MustJSON(t, candidate))
			}
			// the control: h2-file-server's own config differs, and runs
			if err := caddy.Load(caddysite.MustJSON(t, mine), false); err != nil {
				t.Fatalf("loading h2-file-server's config: %v", err)
			}
			if caddy.ActiveContext().Context == running {
				t.Error("h2-file-server's own config did not reload Caddy: the comparison proves nothing")
			}
		})
	}
}

// runFileServer starts `caddy file-server args` in this process and waits
// until its config runs. Caddy is stopped when the test ends; the
// command's goroutine stays blocked, as it does in `caddy file-server`.
func runFileServer(t *testing.T, args []string) {
	t.Helper()
	if err := caddy.Stop(); err != nil {
		t.Fatal(err)
	}
	cmd := caddysite.CommandFor(t, "file-server")
	cmd.SetArgs(args)
	cmd.SilenceUsage = true
	failed := make(chan error, 1)
	go func() { failed <- cmd.Execute() }()
	t.Cleanup(func() {
		if err := caddy.Stop(); err != nil {
			t.Errorf("stopping Caddy: %v", err)
		}
	})
	tick := time.NewTicker(10 * time.Millisecond)
	defer tick.Stop()
	deadline := time.After(time.Minute)
	for caddy.ActiveContext().Context == nil {
		select {
		case err := <-failed:
			t.Fatalf("file-server %q: %v", args, err)
		case <-deadline:
			t.Fatalf("file-server %q did not start within a minute", args)
		case <-tick.C:
		}
	}
}

// runParityChild runs TestH2FileServerConfigMatchesFileServer in a child
// process with its own Caddy state and no programs on PATH, so that
// installing the internal CA's root (automatic HTTPS for localhost) fails
// instead of changing the system's trust store.
func runParityChild(t *testing.T) {
	dir := t.TempDir()
	env := []string{parityChildEnv + "=1", "PATH=" + dir, "HOME=" + dir,
		"XDG_DATA_HOME=" + dir + "/data", "XDG_CONFIG_HOME=" + dir + "/config", "XDG_CACHE_HOME=" + dir + "/cache"}
	for _, kv := range os.Environ() {
		if k, _, _ := strings.Cut(kv, "="); k == "GOCOVERDIR" || k == "GORACE" || k == "GOTRACEBACK" || k == "TMPDIR" {
			env = append(env, kv)
		}
	}
	cmd := exec.Command(os.Args[0], "-test.run=^TestH2FileServerConfigMatchesFileServer$", "-test.v", "-test.count=1")
	cmd.Env = env
	out, err := cmd.CombinedOutput()
	if err != nil || !strings.Contains(string(out), "--- PASS: TestH2FileServerConfigMatchesFileServer") {
		t.Fatalf("child: %v\n%s", err, lastLines(string(out), 80))
	}
}

// lastLines is the end of s without Caddy's JSON log lines, at most n
// lines.
func lastLines(s string, n int) string {
	var lines []string
	for _, l := range strings.Split(strings.TrimRight(s, "\n"), "\n") {
		if !strings.HasPrefix(l, `{"level":`) {
			lines = append(lines, l)
		}
	}
	if len(lines) > n {
		lines = lines[len(lines)-n:]
	}
	return strings.Join(lines, "\n")
}

// TestH2FileServerStartLine checks the line h2-file-server logs once
// Caddy runs: where it listens and which server serves HTTP/2, h2file's
// engine or Go's.
func TestH2FileServerStartLine(t *testing.T) {
	for _, tc := range []struct {
		args  []string
		http2 string
	}{
		{[]string{"--domain", "example.com"}, "h2file's engine (h2_engine)"},
		{[]string{"--domain", "example.com", "--no-coalesce"}, "h2file's engine (h2_engine)"},
		{[]string{"--domain", "example.com", "--no-engine"}, "Go's HTTP/2 server (--no-engine)"},
		{nil, "Go's HTTP/2 server, h2c only (no TLS without --domain; h2_engine serves HTTP/2 over TLS)"},
		{[]string{"--no-engine"}, "Go's HTTP/2 server, h2c only (no TLS without --domain; h2_engine serves HTTP/2 over TLS)"},
	} {
		cmd := caddysite.CommandFor(t, "h2-file-server")
		if err := cmd.ParseFlags(tc.args); err != nil {
			t.Fatal(err)
		}
		fs := caddycmd.Flags{FlagSet: cmd.Flags()}
		_, listen, err := h2FileServerConfig(fs)
		if err != nil {
			t.Fatal(err)
		}
		core, logs := observer.New(zapcore.InfoLevel)
		logStarted(zap.New(core), fs, listen)
		entries := logs.TakeAll()
		if len(entries) != 1 || entries[0].Message != "Caddy serving static files with h2_file_server" {
			t.Fatalf("%q: logged %+v, want the one start line", tc.args, entries)
		}
		want := map[string]any{"listen": listen, "http2": tc.http2}
		if got := entries[0].ContextMap(); !reflect.DeepEqual(got, want) {
			t.Errorf("%q: start line fields %v, want %v", tc.args, got, want)
		}
		t.Logf("%q: %q %v", tc.args, entries[0].Message, entries[0].ContextMap())
	}
}
