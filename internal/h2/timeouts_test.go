package h2

import (
	"fmt"
	"net/http"
	"slices"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/h2file/caddy-h2file/internal/harness"
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
		// a handler that goes on after its body failed at ReadTimeout:
		// what the client sends on the stream afterwards is discarded,
		// and its connection window given back at once, as after the
		// handler closes the body (it was held until the handler
		// returned, stalling the connection's other uploads)
		{"read, handler going on", Config{ReadTimeout: timeout}, rawScript{run: func(c *rawConn) {
			c.req(1, "POST", "/read-then-hold", false)
			c.data(1, false, []byte("abc"))
			c.waitHeaders(1)
			c.sync()
			fill(c, 1, 1000000)
			c.sync()
			c.markWindow("after 1 MB more")
			c.rst(1, http2.ErrCodeCancel)
		}, want: []string{`body "read 3: i/o timeout"`, "after 1 MB more: connection WINDOW_UPDATE so far 19"}}},
		// a handler that does not read (it waits on an upstream, here on
		// its context) past ReadTimeout: its body fails at the deadline
		// whether it reads or not, and what the client sends afterwards
		// is discarded and its connection window given back at once (it
		// was held until the handler read or returned, stalling the
		// connection's other uploads)
		{"read, handler not reading", Config{ReadTimeout: timeout}, rawScript{run: func(c *rawConn) {
			c.req(1, "POST", "/ctx", false)
			c.sleep(timeout + 200*time.Millisecond)
			fill(c, 1, 1000000)
			c.sync()
			c.markWindow("after 1 MB past the deadline")
			c.rst(1, http2.ErrCodeCancel)
		}, want: []string{"after 1 MB past the deadline: connection WINDOW_UPDATE so far 19"}}},
		// trailers that end the body after ReadTimeout: the body has
		// failed at the deadline, as when DATA ends it
		{"read, trailers after the deadline", Config{ReadTimeout: timeout}, rawScript{run: func(c *rawConn) {
			c.req(1, "POST", "/read-then-hold?delay=700", false)
			c.data(1, false, []byte("abc"))
			c.sleep(timeout + 150*time.Millisecond)
			c.headers(1, true, hfs("x-trailer", "1"))
			c.waitHeaders(1)
			c.rst(1, http2.ErrCodeCancel)
		}, want: []string{"read 3: i/o timeout"}}},
		// a read deadline cleared by the handler after it passed: the
		// body has failed all the same (x/net's timer has fired)
		{"read, deadline cleared after it passed", Config{ReadTimeout: timeout}, rawScript{run: func(c *rawConn) {
			c.req(1, "POST", "/clear-rdl-then-read", false)
			c.data(1, false, []byte("abc"))
			c.waitEnd(1)
		}, want: []string{"read 3: i/o timeout"}}},
		// a response the client gives no window within WriteTimeout of
		// the HEADERS: the stream is reset (INTERNAL_ERROR)
		{"write", Config{WriteTimeout: timeout}, rawScript{
			open: rawOpen{settings: []http2.Setting{{ID: http2.SettingInitialWindowSize, Val: 0}}},
			run: func(c *rawConn) {
				c.get(1, "/bytes?n=100000")
				c.waitEnd(1)
			}, want: []string{"RST_STREAM INTERNAL_ERROR"}}},
		// a handler that does not write (it waits on an upstream, here
		// on its context) past WriteTimeout: the stream is reset and
		// the context cancelled, whether it writes or not
		{"write, handler not writing", Config{WriteTimeout: timeout}, rawScript{run: func(c *rawConn) {
			c.get(1, "/ctx")
			c.waitEnd(1)
		}, want: []string{"RST_STREAM INTERNAL_ERROR"}}},
		// the same with the deadline set by the handler (as Caddy's
		// IdleTimeoutWriter does), and no WriteTimeout
		{"write deadline set by the handler", Config{}, rawScript{run: func(c *rawConn) {
			c.get(1, "/ctx?wdl=300")
			c.waitEnd(1)
		}, want: []string{"RST_STREAM INTERNAL_ERROR"}}},
		// a whole response that the handler has handed over, still
		// waiting for the client's window at WriteTimeout
		{"write, response handed over", Config{WriteTimeout: timeout}, rawScript{
			open: rawOpen{settings: []http2.Setting{{ID: http2.SettingInitialWindowSize, Val: 0}}},
			run: func(c *rawConn) {
				c.get(1, "/bytes?n=1000")
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

// TestCloseBeforeIdleTimerArmed: a Close that comes between the client
// preface and the arming of the idle timer leaves no timer behind (it
// held the closed connection for IdleTimeout).
func TestCloseBeforeIdleTimerArmed(t *testing.T) {
	s := NewServer(http.HandlerFunc(func(http.ResponseWriter, *http.Request) {}), Config{IdleTimeout: time.Hour})
	closed := make(chan *conn, 1)
	s.onPrefaceRead = func(c *conn) {
		s.Close()
		closed <- c
	}
	_, result := pipeGet(t, s, "/", 0)
	<-result
	c := harness.Recv(t, closed, "the preface read")
	if err := harness.Poll(5*time.Second, func() error {
		if n := s.Conns(); n != 0 {
			return fmt.Errorf("%d connections still served", n)
		}
		return nil
	}); err != nil {
		t.Fatal(err)
	}
	c.mu.Lock()
	armed := c.idleTimer != nil
	c.mu.Unlock()
	if armed {
		t.Error("the closed connection's idle timer was armed")
	}
}

// TestWriteDeadlineAfterClearedDeadlines: handlers that set and clear
// their write deadline again and again (as Caddy's IdleTimeoutWriter does
// around each write), while the connection is listed and unlisted for the
// deadline watch (deadlines.go), then set one that passes while they do
// not write: every stream is reset and every handler's context
// cancelled. A hand-off between the watch and a handler that lost a
// deadline would leave a handler waiting.
func TestWriteDeadlineAfterClearedDeadlines(t *testing.T) {
	const streams = 16
	cancelled := make(chan bool, streams)
	h := http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		rc := http.NewResponseController(w)
		for i := range 100 {
			rc.SetWriteDeadline(time.Now().Add(time.Hour))
			time.Sleep(time.Duration(i%7) * time.Millisecond)
			rc.SetWriteDeadline(time.Time{})
			time.Sleep(time.Duration(i%5) * time.Millisecond)
		}
		rc.SetWriteDeadline(time.Now().Add(20 * time.Millisecond))
		select {
		case <-r.Context().Done():
			cancelled <- true
		case <-time.After(5 * time.Second):
			cancelled <- false
		}
	})
	p := startEngine(t, h, Config{})
	for range streams {
		go func() {
			if resp, err := p.client.Get(p.engineURL + "/"); err == nil {
				resp.Body.Close()
			}
		}()
	}
	for i := range streams {
		if !harness.Recv(t, cancelled, "a handler's end") {
			t.Fatalf("handler %d: not cancelled 5 s after its write deadline", i)
		}
	}
}

// TestWriteDeadlineSetWhileUnwatched: a write deadline that a handler
// sets (without the connection's lock) after the deadline watch found
// none on its connection, and before the watch unlists the connection
// (the handler sees it listed, and lists it not again), is kept all the
// same: the stream is reset and the handler's context cancelled.
func TestWriteDeadlineSetWhileUnwatched(t *testing.T) {
	cancelled := make(chan bool, 1)
	h := http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		rc := http.NewResponseController(w)
		rc.SetWriteDeadline(time.Now().Add(time.Hour)) // lists the connection
		rc.SetWriteDeadline(time.Time{})
		select {
		case <-r.Context().Done():
			cancelled <- true
		case <-time.After(5 * time.Second):
			cancelled <- false
		}
	})
	p := startEngine(t, h, Config{})
	var once sync.Once
	p.engine.onNoDeadlineSeen = func(c *conn) {
		for _, st := range c.streams {
			once.Do(func() {
				// what SetWriteDeadline does, in the watch's gap
				st.writeDeadline.Store(time.Now().Add(20 * time.Millisecond).UnixNano())
				c.watchDeadlines()
			})
		}
	}
	go func() {
		if resp, err := p.client.Get(p.engineURL + "/"); err == nil {
			resp.Body.Close()
		}
	}()
	if !harness.Recv(t, cancelled, "the handler's end") {
		t.Fatal("the handler was not cancelled 5 s after the write deadline it set while its connection was being unlisted")
	}
}
