package h2

import (
	"bytes"
	"io"
	"net/http"
	"strings"
	"testing"
	"time"

	"golang.org/x/net/http2"

	"github.com/h2file/caddy-h2file/internal/harness/h2client"
)

// TestBodyReceivedWholeOutlivesReset: a request body that arrived whole
// (END_STREAM) before the client reset the stream is still read whole by
// the handler, then io.EOF, on both servers; never a shorter body that
// ends as if complete. The handler reads only once the reset has
// cancelled its context.
func TestBodyReceivedWholeOutlivesReset(t *testing.T) {
	body := bytes.Repeat([]byte("0123456789abcdef"), 50_000/16)
	type read struct {
		n   int
		err error
	}
	reads := make(chan read, 1)
	h := http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		<-r.Context().Done()
		b, err := io.ReadAll(r.Body)
		if err == nil && !bytes.Equal(b, body) {
			err = io.ErrUnexpectedEOF
		}
		reads <- read{len(b), err}
	})
	p := startPair(t, h, Config{})
	for _, srv := range []struct{ name, url string }{{"engine", p.engineURL}, {"x/net", p.xnetURL}} {
		t.Run(srv.name, func(t *testing.T) {
			c, err := h2client.Dial(strings.TrimPrefix(srv.url, "https://"), h2client.Options{})
			if err != nil {
				t.Fatal(err)
			}
			defer c.Close()
			go c.Drain()
			id, err := c.Open("/upload", false, [2]string{"content-length", "50000"})
			if err != nil {
				t.Fatal(err)
			}
			if err := c.WriteData(id, true, body); err != nil {
				t.Fatal(err)
			}
			if err := c.RST(id, http2.ErrCodeCancel); err != nil {
				t.Fatal(err)
			}
			select {
			case r := <-reads:
				if r.n != len(body) || r.err != nil {
					t.Errorf("the handler read %d of %d bytes, then %v; want all, then io.EOF", r.n, len(body), r.err)
				}
			case <-time.After(10 * time.Second):
				t.Fatal("the handler did not finish reading 10 s after the reset")
			}
		})
	}
}

// TestQueuedBodyWindowAfterReset: a request that waited for a handler
// slot, whose body arrived whole and which the client then reset, gives
// its body's connection window back when the slot frees (its handler
// never runs); else every such request would shrink the connection's
// window for good.
func TestQueuedBodyWindowAfterReset(t *testing.T) {
	p := startEngine(t, rawHandler(nil), Config{MaxConcurrentStreams: 1})
	c, err := rawDial(p.addr(), rawOpen{})
	if err != nil {
		t.Fatal(err)
	}
	defer c.tc.Close()
	c.get(1, "/sleep?ms=300") // holds the one handler slot
	c.rst(1, http2.ErrCodeCancel)
	c.req(3, "POST", "/bytes?n=1", false)
	c.data(3, true, bodyOf(100_000)) // waits for the slot, body whole
	c.rst(3, http2.ErrCodeCancel)
	c.sync()
	c.mu.Lock()
	reset := c.sum.connWindow
	c.mu.Unlock()
	// the first handler returns after 300 ms, and the slot frees
	c.waitFor("the queued body's window", func() bool { return c.sum.connWindow-reset >= 100_000 })
	c.mu.Lock()
	free := c.sum.connWindow
	c.mu.Unlock()
	if free-reset < 100_000 {
		t.Errorf("the connection window given back for the queued request's 100,000-byte body: %d (%d, then %d)\n%s",
			free-reset, reset, free, strings.Join(c.settle().lines(), "\n"))
	}
}
