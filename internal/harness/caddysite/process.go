package caddysite

// Caddy in a process of its own: BuildCaddy, StartProcess.

import (
	"bytes"
	"crypto/tls"
	"debug/buildinfo"
	"os"
	"os/exec"
	"path/filepath"
	"runtime"
	"strconv"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/h2file/caddy-h2file/internal/harness"
)

// BuildCaddy builds this module's cmd/caddy (Caddy's standard modules and
// the plugin) into a temporary directory, with the race detector if race,
// and returns the binary's path. A first build on a cold cache takes
// minutes.
func BuildCaddy(t testing.TB, race bool) string {
	t.Helper()
	bin := filepath.Join(t.TempDir(), "caddy")
	args := []string{"build", "-o", bin}
	if race {
		args = append(args, "-race")
	}
	args = append(args, "github.com/h2file/caddy-h2file/cmd/caddy")
	if out, err := exec.Command("go", args...).CombinedOutput(); err != nil {
		t.Fatalf("go %s: %v\n%s", strings.Join(args, " "), err, out)
	}
	// the binary is built by this test's Go (GOTOOLCHAIN included)
	if info, err := buildinfo.ReadFile(bin); err != nil || info.GoVersion != runtime.Version() {
		t.Fatalf("%s is built with %v (%v), want %s", bin, info, err, runtime.Version())
	}
	return bin
}

// Process is a site served by a Caddy binary in a process of its own, for
// tests that measure the server's process (its memory, say) apart from
// the test's.
type Process struct {
	*Server
	Cmd *exec.Cmd
	Out *SyncBuffer // what the process printed

	exited chan struct{}
}

// Stop kills the process (its whole group) and closes the site's
// clients; stopping twice is harmless.
func (p *Process) Stop(t testing.TB) {
	p.CloseClients()
	killGroup(p.Cmd)
	<-p.exited
}

// StartProcess runs sc's config (as Start would load it) with bin, in its
// own process group with its own HOME and XDG directories, waits until
// it serves, and kills it when the test ends.
func StartProcess(t *testing.T, bin string, sc Config) *Process {
	t.Helper()
	s := newServer(t, sc)
	dir := t.TempDir()
	cfg := filepath.Join(dir, "caddy.json")
	if err := os.WriteFile(cfg, s.ConfigJSON(), 0o600); err != nil {
		t.Fatal(err)
	}
	p := &Process{Server: s, Out: new(SyncBuffer)}
	p.Cmd = exec.Command(bin, "run", "--config", cfg)
	p.Cmd.Env = []string{"HOME=" + dir, "PATH=" + filepath.Join(dir, "bin"), "XDG_DATA_HOME=" + filepath.Join(dir, "data"),
		"XDG_CONFIG_HOME=" + filepath.Join(dir, "config"), "XDG_CACHE_HOME=" + filepath.Join(dir, "cache")}
	p.Cmd.Stdout, p.Cmd.Stderr = p.Out, p.Out
	ownProcessGroup(p.Cmd)
	if err := p.Cmd.Start(); err != nil {
		t.Fatal(err)
	}
	exited := make(chan struct{})
	go func() {
		p.Cmd.Wait() //nolint:errcheck // the exit status is read from ProcessState
		close(exited)
	}()
	p.exited = exited
	t.Cleanup(func() { p.Stop(t) })
	harness.Eventually(t, 60*time.Second, func() error {
		select {
		case <-exited:
			t.Fatalf("caddy exited: %v\n%s", p.Cmd.ProcessState, p.Out)
		default:
		}
		var tlsCfg *tls.Config
		if s.Cert != nil {
			tlsCfg = s.Cert.ClientTLS()
		}
		return dialOnce(s.Addr, tlsCfg)
	})
	s.startClients(t)
	return p
}

// RSSKiB is the process's resident memory now (VmRSS), 0 if unknown.
func (p *Process) RSSKiB() uint64 {
	return harness.PidStatusKiB(strconv.Itoa(p.Cmd.Process.Pid), "VmRSS")
}

// SyncBuffer is a bytes.Buffer safe for a process's stdout and stderr.
type SyncBuffer struct {
	mu  sync.Mutex
	buf bytes.Buffer
}

func (b *SyncBuffer) Write(p []byte) (int, error) {
	b.mu.Lock()
	defer b.mu.Unlock()
	return b.buf.Write(p)
}

func (b *SyncBuffer) String() string {
	b.mu.Lock()
	defer b.mu.Unlock()
	return b.buf.String()
}
