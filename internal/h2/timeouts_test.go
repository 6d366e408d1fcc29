package h2

import (
	"slices"
	"strings"
	"testing"
	"time"

	"golang.org/x/net/http2"
)

// TestTimeoutsAgainstXNet runs the server timeouts Caddy sets (idle,
// read and write) through the engine and x/net's server with the same
// settings, over raw frames, and requires the same frames back.
func TestTimeoutsAgainstXNet(t *testing.T) {
	const timeout = 300 * time.Millisecond
	for _, tc := range []struct {
		name   string
		cfg    Config
		script rawScript
	}{
		// no stream for IdleTimeout: GOAWAY (NO_ERROR), then the close
		{"idle", Config{IdleTimeout: timeout}, rawScript{run: func(c *rawConn) {
			c.get(1, "/bytes?n=5")
			c.waitEnd(1)
			c.sleep(3 * timeout)
		}, want: []string{"GOAWAY NO_ERROR", "closed"}}},
		// a request body that does not come within ReadTimeout of the
		// HEADERS: the handler's read fails
		{"read", Config{ReadTimeout: timeout}, rawScript{run: func(c *rawConn) {
			c.req(1, "POST", "/echo", false)
			c.waitEnd(1)
		}, want: []string{"err=i/o timeout"}}},
		// a response the client gives no window within WriteTimeout of
		// the HEADERS: the stream is reset (INTERNAL_ERROR)
		{"write", Config{WriteTimeout: timeout}, rawScript{
			open: rawOpen{settings: []http2.Setting{{ID: http2.SettingInitialWindowSize, Val: 0}}},
			run: func(c *rawConn) {
				c.get(1, "/bytes?n=100000")
				c.waitEnd(1)
			}, want: []string{"RST_STREAM INTERNAL_ERROR"}}},
		// the same while the handler reads the body on another goroutine,
		// whose wait (ReadTimeout, much later) must not put off the
		// write's
		{"write while reading", Config{WriteTimeout: timeout, ReadTimeout: 30 * timeout}, rawScript{
			open: rawOpen{settings: []http2.Setting{{ID: http2.SettingInitialWindowSize, Val: 0}}},
			run: func(c *rawConn) {
				c.req(1, "POST", "/write-while-reading", false)
				c.waitEnd(1)
			}, want: []string{"RST_STREAM INTERNAL_ERROR"}}},
	} {
		t.Run(tc.name, func(t *testing.T) {
			t.Parallel()
			p := startPair(t, rawHandler(nil), tc.cfg)
			tc.script.name = tc.name
			got, err := runRawScript("engine", p.addr(), tc.script)
			if err != nil {
				t.Fatal(err)
			}
			ref, err := runRawScript("x/net", strings.TrimPrefix(p.xnetURL, "https://"), tc.script)
			if err != nil {
				t.Fatal(err)
			}
			g, r := got.lines(), ref.lines()
			text := strings.Join(g, "\n")
			for _, w := range tc.script.want {
				if !strings.Contains(text, w) {
					t.Errorf("the engine's summary lacks %q:\n%s", w, text)
				}
			}
			if !slices.Equal(g, r) {
				t.Errorf("the engine (-) and x/net (+) differ:\n%s", lineDiff(g, r))
			}
		})
	}
}

// TestIdleTimeoutFromLastStream: a stream that lasts more than twice
// IdleTimeout does not let the connection go idle meanwhile, and the
// GOAWAY comes IdleTimeout after it ends, through both servers (the
// engine's timer is not touched per stream: it fires, and is armed again
// for what is left).
func TestIdleTimeoutFromLastStream(t *testing.T) {
	const timeout = 300 * time.Millisecond
	p := startPair(t, rawHandler(nil), Config{IdleTimeout: timeout})
	for _, srv := range []struct{ name, addr string }{
		{"engine", p.addr()},
		{"x/net", strings.TrimPrefix(p.xnetURL, "https://")},
	} {
		t.Run(strings.ReplaceAll(srv.name, "/", ""), func(t *testing.T) {
			t.Parallel()
			c, err := rawDial(srv.addr, rawOpen{})
			if err != nil {
				t.Fatal(err)
			}
			c.get(1, "/sleep?ms=700")
			c.waitEnd(1)
			ended := time.Now()
			c.waitGoAway()
			sum := c.settle()
			c.mu.Lock()
			goAway, at := c.goAway, c.goAwayAt
			c.mu.Unlock()
			if st := sum.streams[1]; st == nil || st.n != len("slept") {
				t.Fatalf("%s: the stream did not end whole: %v", srv.name, sum.lines())
			}
			if gap := at.Sub(ended); !goAway || gap < timeout*3/4 || gap > 5*timeout {
				t.Errorf("%s: GOAWAY %v, %v after the stream ended; want about %v", srv.name, goAway, gap, timeout)
			}
		})
	}
}
