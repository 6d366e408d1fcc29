//go:build unix

package integration

import (
	"bytes"
	"context"
	"crypto/tls"
	"crypto/x509"
	"errors"
	"fmt"
	"io"
	"net"
	"net/http"
	"os"
	"os/exec"
	"path/filepath"
	"regexp"
	"runtime/debug"
	"strings"
	"syscall"
	"testing"
	"time"

	"github.com/spf13/pflag"

	"github.com/h2file/caddy-h2file/internal/harness"
	"github.com/h2file/caddy-h2file/internal/harness/caddysite"
)

// TestH2FileServerCommand runs `caddy h2-file-server` as a user does: the
// binary built from ./cmd/caddy, started with its own Caddy state, asked
// over HTTP/2 with TLS (internal CA) and over plain HTTP/1.1 and h2c, and
// stopped with a signal.
func TestH2FileServerCommand(t *testing.T) {
	if testing.Short() {
		t.Skip("builds a Caddy binary")
	}
	bin := buildCaddy(t)

	t.Run("help", func(t *testing.T) {
		out, err := exec.Command(bin, "h2-file-server", "--help").CombinedOutput()
		if err != nil {
			t.Fatalf("--help: %v\n%s", err, out)
		}
		caddysite.CommandFor(t, "h2-file-server").Flags().VisitAll(func(f *pflag.Flag) {
			want := "--" + f.Name
			if f.Shorthand != "" {
				want = "-" + f.Shorthand + ", --" + f.Name
			}
			if !strings.Contains(string(out), want+" ") {
				t.Errorf("--help does not list %q:\n%s", want, out)
			}
		})
	})

	t.Run("tls", func(t *testing.T) {
		trustStore := trustStoreFiles(t)
		port, httpPort := harness.FreePort(t), harness.FreePort(t)
		p := startCommand(t, bin, "h2-file-server", "--root", "../example", "--domain", "localhost",
			"--listen", fmt.Sprintf("127.0.0.1:%d", port), "--http-port", fmt.Sprint(httpPort))
		client := p.tlsClient(t, port)
		checkServes(t, client, fmt.Sprintf("https://localhost:%d", port), 2)

		// automatic HTTPS redirects, on --http-port
		plain := &http.Client{
			Transport:     &http.Transport{DialContext: dialOnly(httpPort)},
			CheckRedirect: func(*http.Request, []*http.Request) error { return http.ErrUseLastResponse },
		}
		resp, err := plain.Get(fmt.Sprintf("http://localhost:%d/files/", httpPort))
		if err != nil {
			t.Fatal(err)
		}
		resp.Body.Close()
		if want := fmt.Sprintf("https://localhost:%d/files/", port); resp.StatusCode != http.StatusPermanentRedirect || resp.Header.Get("Location") != want {
			t.Errorf("plain HTTP: %d to %q, want 308 to %q", resp.StatusCode, resp.Header.Get("Location"), want)
		}
		plain.CloseIdleConnections()
		client.CloseIdleConnections()
		p.stop(t, syscall.SIGINT, port, httpPort)
		if got := trustStoreFiles(t); got != trustStore {
			t.Errorf("the system trust store changed: %q, was %q", got, trustStore)
		}
	})

	t.Run("plain", func(t *testing.T) {
		port := harness.FreePort(t)
		p := startCommand(t, bin, "h2-file-server", "--root", "../example", "--listen", fmt.Sprintf("127.0.0.1:%d", port))
		url := fmt.Sprintf("http://127.0.0.1:%d", port)
		h1 := &http.Client{Transport: &http.Transport{}}
		checkServes(t, h1, url, 1)
		h2c := &http.Transport{Protocols: new(http.Protocols)}
		h2c.Protocols.SetUnencryptedHTTP2(true)
		checkServes(t, &http.Client{Transport: h2c}, url, 2)
		h1.CloseIdleConnections()
		h2c.CloseIdleConnections()
		p.stop(t, syscall.SIGTERM, port)
	})

	t.Run("same answers as file-server", func(t *testing.T) {
		flags := []string{"--root", "../example", "--browse", "--templates", "--precompressed", "gzip"}
		stockPort, h2Port := harness.FreePort(t), harness.FreePort(t)
		stock := startCommand(t, bin, append([]string{"file-server", "--listen", fmt.Sprintf("127.0.0.1:%d", stockPort)}, flags...)...)
		h2 := startCommand(t, bin, append([]string{"h2-file-server", "--listen", fmt.Sprintf("127.0.0.1:%d", h2Port)}, flags...)...)
		tr := &http.Transport{DisableCompression: true}
		client := &http.Client{Transport: tr, CheckRedirect: func(*http.Request, []*http.Request) error { return http.ErrUseLastResponse }}
		for _, port := range []int{stockPort, h2Port} {
			checkServes(t, client, fmt.Sprintf("http://127.0.0.1:%d", port), 1) // waits until it is up
		}
		for _, rq := range []struct{ path, header, value string }{
			{"/", "", ""}, {"/index.html", "", ""}, {"/files", "", ""}, {"/files/", "", ""},
			{"/files/hello.txt", "", ""}, {"/files/hello.txt.bak", "", ""}, {"/nonesuch", "", ""},
			{"/style.css", "Accept-Encoding", "gzip"}, {"/style.css", "Accept-Encoding", "zstd"},
			{"/files/random-200k.bin", "Accept-Encoding", "gzip, zstd"}, {"/files/random-200k.bin", "Range", "bytes=100-199"},
		} {
			var answers [2]string
			for i, port := range []int{stockPort, h2Port} {
				req, err := http.NewRequest(http.MethodGet, fmt.Sprintf("http://127.0.0.1:%d%s", port, rq.path), nil)
				if err != nil {
					t.Fatal(err)
				}
				if rq.header != "" {
					req.Header.Set(rq.header, rq.value)
				}
				resp, err := client.Do(req)
				if err != nil {
					t.Fatal(err)
				}
				body, err := io.ReadAll(resp.Body)
				resp.Body.Close()
				if err != nil {
					t.Fatal(err)
				}
				resp.Header.Del("Date")
				// a listing's CSP nonce is new on every request
				answers[i] = cspNonce.ReplaceAllString(fmt.Sprintf("%d %v %q", resp.StatusCode, resp.Header, body), "NONCE")
			}
			if answers[0] != answers[1] {
				t.Errorf("GET %s (%s: %s):\nfile-server:    %s\nh2-file-server: %s", rq.path, rq.header, rq.value, answers[0], answers[1])
			}
		}
		tr.CloseIdleConnections()
		stock.stop(t, syscall.SIGTERM, stockPort)
		h2.stop(t, syscall.SIGTERM, h2Port)
	})
}

// buildCaddy builds ./cmd/caddy, with -race if this test binary has it
// (so the build reuses its compiled packages).
func buildCaddy(t *testing.T) string {
	t.Helper()
	race := false
	if info, ok := debug.ReadBuildInfo(); ok {
		for _, s := range info.Settings {
			race = race || (s.Key == "-race" && s.Value == "true")
		}
	}
	return caddysite.BuildCaddy(t, race)
}

// command is a running `caddy h2-file-server`.
type command struct {
	cmd     *exec.Cmd
	dataDir string
	out     *caddysite.SyncBuffer
	done    chan struct{}
}

// startCommand starts `caddy args` in its own process group,
// with its own HOME and XDG directories and nothing on PATH (so installing
// the internal CA's root into the system trust store fails, as it should in
// a test). The process is killed when the test ends, if still running.
func startCommand(t *testing.T, bin string, args ...string) *command {
	t.Helper()
	dir := t.TempDir()
	p := &command{dataDir: filepath.Join(dir, "data"), out: new(caddysite.SyncBuffer), done: make(chan struct{})}
	p.cmd = exec.Command(bin, args...)
	p.cmd.Env = []string{"HOME=" + dir, "PATH=" + filepath.Join(dir, "bin"), "XDG_DATA_HOME=" + p.dataDir,
		"XDG_CONFIG_HOME=" + filepath.Join(dir, "config"), "XDG_CACHE_HOME=" + filepath.Join(dir, "cache")}
	p.cmd.Stdout, p.cmd.Stderr = p.out, p.out
	p.cmd.SysProcAttr = &syscall.SysProcAttr{Setpgid: true}
	if err := p.cmd.Start(); err != nil {
		t.Fatal(err)
	}
	go func() {
		p.cmd.Wait() //nolint:errcheck // the exit status is read from ProcessState
		close(p.done)
	}()
	t.Cleanup(func() {
		select {
		case <-p.done:
		default:
			syscall.Kill(-p.cmd.Process.Pid, syscall.SIGKILL) //nolint:errcheck // best effort
			<-p.done
		}
		if t.Failed() {
			t.Logf("caddy %q output:\n%s", args, p.out.String())
		}
	})
	return p
}

// tlsClient waits for the internal CA's root and the server's certificate,
// and returns an HTTP/2 client that trusts that root and reaches
// localhost at 127.0.0.1:port.
func (p *command) tlsClient(t *testing.T, port int) *http.Client {
	t.Helper()
	rootFile := filepath.Join(p.dataDir, "caddy", "pki", "authorities", "local", "root.crt")
	var tr *http.Transport
	p.waitFor(t, "a TLS handshake with the internal CA's certificate", func() bool {
		pem, err := os.ReadFile(rootFile)
		if err != nil {
			return false
		}
		roots := x509.NewCertPool()
		if !roots.AppendCertsFromPEM(pem) {
			return false
		}
		cfg := &tls.Config{RootCAs: roots, ServerName: "localhost", NextProtos: []string{"h2"}}
		conn, err := tls.Dial("tcp", fmt.Sprintf("127.0.0.1:%d", port), cfg)
		if err != nil {
			return false
		}
		conn.Close()
		tr = &http.Transport{TLSClientConfig: cfg, ForceAttemptHTTP2: true, DialContext: dialOnly(port)}
		return true
	})
	return &http.Client{Transport: tr, Timeout: time.Minute}
}

// waitFor polls cond until it holds, failing if the process exits first or
// a minute passes.
func (p *command) waitFor(t *testing.T, what string, cond func() bool) {
	t.Helper()
	deadline := time.Now().Add(time.Minute)
	for !cond() {
		select {
		case <-p.done:
			t.Fatalf("caddy exited (%v) before %s", p.cmd.ProcessState, what)
		case <-time.After(20 * time.Millisecond):
		}
		if time.Now().After(deadline) {
			t.Fatalf("no %s within a minute", what)
		}
	}
}

// stop sends sig and checks that Caddy exits with status 0, leaving no
// process in its group and none of its ports bound.
func (p *command) stop(t *testing.T, sig syscall.Signal, ports ...int) {
	t.Helper()
	if err := p.cmd.Process.Signal(sig); err != nil {
		t.Fatal(err)
	}
	select {
	case <-p.done:
	case <-time.After(time.Minute):
		t.Fatalf("caddy still running a minute after %v", sig)
	}
	if code := p.cmd.ProcessState.ExitCode(); code != 0 {
		t.Errorf("exit status %d after %v, want 0", code, sig)
	}
	if err := syscall.Kill(-p.cmd.Process.Pid, 0); !errors.Is(err, syscall.ESRCH) {
		t.Errorf("process group %d still has processes (%v)", p.cmd.Process.Pid, err)
	}
	for _, port := range ports {
		ln, err := net.Listen("tcp", fmt.Sprintf("127.0.0.1:%d", port))
		if err != nil {
			t.Errorf("port %d still bound after exit: %v", port, err)
			continue
		}
		ln.Close()
	}
}

// checkServes asks base for two files of ./example and checks status,
// protocol and body; the first request waits until the listener is up.
func checkServes(t *testing.T, client *http.Client, base string, protoMajor int) {
	t.Helper()
	for i, path := range []string{"/", "/files/hello.txt"} {
		file := path
		if strings.HasSuffix(path, "/") {
			file += "index.html"
		}
		want, err := os.ReadFile(filepath.Join("..", "example", file))
		if err != nil {
			t.Fatal(err)
		}
		var resp *http.Response
		for tries := 0; ; tries++ {
			resp, err = client.Get(base + path)
			if err == nil || i > 0 || tries == 500 {
				break
			}
			time.Sleep(20 * time.Millisecond)
		}
		if err != nil {
			t.Fatalf("GET %s%s: %v", base, path, err)
		}
		body, err := io.ReadAll(resp.Body)
		resp.Body.Close()
		if err != nil {
			t.Fatal(err)
		}
		if resp.StatusCode != http.StatusOK || resp.ProtoMajor != protoMajor || !bytes.Equal(body, want) {
			t.Errorf("GET %s%s: %d over %s, %d bytes; want 200 over HTTP/%d, %d bytes of example%s",
				base, path, resp.StatusCode, resp.Proto, len(body), protoMajor, len(want), file)
		}
	}
}

var cspNonce = regexp.MustCompile(`[0-9a-f]{8}-[0-9a-f]{4}-[0-9a-f]{4}-[0-9a-f]{4}-[0-9a-f]{12}`)

// dialOnly dials 127.0.0.1:port whatever address is asked for.
func dialOnly(port int) func(ctx context.Context, network, _ string) (net.Conn, error) {
	return func(ctx context.Context, network, _ string) (net.Conn, error) {
		var d net.Dialer
		return d.DialContext(ctx, network, fmt.Sprintf("127.0.0.1:%d", port))
	}
}

// trustStoreFiles lists the directories certificates are installed into
// on Linux, for checking that a test left the trust store alone.
func trustStoreFiles(t *testing.T) string {
	t.Helper()
	var names []string
	for _, dir := range []string{"/usr/local/share/ca-certificates", "/etc/pki/ca-trust/source/anchors", "/usr/share/pki/trust/anchors"} {
		entries, err := os.ReadDir(dir)
		if err != nil {
			continue
		}
		for _, e := range entries {
			names = append(names, filepath.Join(dir, e.Name()))
		}
	}
	return strings.Join(names, " ")
}
