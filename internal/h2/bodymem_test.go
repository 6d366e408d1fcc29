package h2

import (
	"runtime"
	"strings"
	"testing"

	"golang.org/x/net/http2"
)

// TestBodyMemoryPerStream fills the 1 MiB window of stream after stream
// whose handler reads nothing, each then reset by the client (the shape of
// CVE-2025-8671's "DATA past the window", which makes the server reset):
// the engine must hold what it received in chunks it reuses, not allocate
// a slice of the window (grown by doubling, about 2 MiB) per stream. The
// attack suite saw the engine's process grow 20-27 MiB under it against
// x/net's 9; this measures the cause, the bytes allocated per stream.
func TestBodyMemoryPerStream(t *testing.T) {
	release := make(chan struct{})
	p := startPair(t, rawHandler(release), Config{})
	t.Cleanup(func() { close(release) })
	const streams, warmup = 24, 4
	payload := make([]byte, 16<<10)
	for _, server := range []struct{ name, addr string }{
		{"engine", p.addr()},
		{"x/net", strings.TrimPrefix(p.xnetURL, "https://")},
	} {
		c, err := rawDial(server.addr, rawOpen{})
		if err != nil {
			t.Fatal(err)
		}
		var before runtime.MemStats
		for i := range warmup + streams {
			if i == warmup {
				runtime.GC()
				runtime.ReadMemStats(&before)
			}
			id := uint32(2*i + 1)
			// /ctx waits for its stream's end and reads nothing
			c.req(id, "GET", "/ctx", false)
			for range (1 << 20) / len(payload) {
				c.data(id, false, payload)
			}
			c.rst(id, http2.ErrCodeCancel)
			c.sync() // the server has taken every frame: the window is back
		}
		var after runtime.MemStats
		runtime.ReadMemStats(&after)
		perStream := (after.TotalAlloc - before.TotalAlloc) / streams
		c.mu.Lock()
		gone, goAway := c.gone, c.goAway
		c.mu.Unlock()
		c.tc.Close()
		if gone || goAway {
			t.Fatalf("%s: the connection ended (GOAWAY %v): %v", server.name, goAway, c.sum.conn)
		}
		t.Logf("%s: %d KiB allocated per stream of 1 MiB received and discarded", server.name, perStream>>10)
		// pooled chunks cost a few KiB per stream; with -race, sync.Pool
		// drops a quarter of what is put back, about 270 KiB per stream
		if server.name == "engine" && perStream > 512<<10 {
			t.Errorf("the engine allocated %d KiB per stream whose 1 MiB window the client filled; want at most 512 KiB (pooled chunks)", perStream>>10)
		}
	}
}
