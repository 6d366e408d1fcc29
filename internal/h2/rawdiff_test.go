package h2

import (
	"bytes"
	"encoding/binary"
	"fmt"
	"io"
	"net/http"
	"slices"
	"strconv"
	"strings"
	"testing"
	"time"
)

// The raw-frame differential tests: each script is a sequence of client
// frames, legal or not (RFC 9113's stream states, frame sizes, SETTINGS,
// flow control, header blocks, and the engine's DoS limits: rapid reset,
// PING and CONTINUATION floods, concurrent streams and handlers, header
// list size; the other floods are in flood_test.go), sent on one
// connection to the engine and on another to x/net's server (both
// from startPair, serving the same handler); what each server sent back
// is summed up (rawSummary) and the two compared. See rawclient_test.go
// for what the summary keeps and what it leaves out.

// rawScript is one script.
type rawScript struct {
	name string
	open rawOpen
	run  func(c *rawConn)
	// want are texts the engine's summary must contain, so that a script
	// keeps provoking what it is about (both servers failing the same way
	// would otherwise pass).
	want []string
	// prefaceRace leaves out the server's SETTINGS and connection
	// WINDOW_UPDATE, for scripts whose connection fails before the
	// server has read the client's first SETTINGS: x/net writes its
	// SETTINGS on a goroutine of its own and queues its WINDOW_UPDATE
	// behind that write while it reads the preface, so whether either
	// reaches the client before the GOAWAY (after which x/net writes
	// nothing else) or the close depends on timing. The engine writes
	// both before reading the preface.
	prefaceRace bool
	// Documented differences, as in reqCase: when set, the summaries must
	// differ (so the note stays true); else they must be equal.
	notXNet string // from x/net v0.60's server (reference built with Go 1.26)
	not127  string // from Go 1.27's server (reference built with Go 1.27)
}

// rawHandler is diffHandler with paths that block: /hold until the test
// ends (whatever happens to the stream), /ctx until the request's
// context is done, /sleep?ms= for that long before answering,
// /answer-then-read flushes a 200 before it reads the body,
// /write-while-reading writes 1 MiB while another goroutine reads the
// body from 100 ms on, /read-then-hold reads the body until it fails
// (ReadTimeout), answers, and holds as /ctx does; and on
// every path, wdl=ms sets the response's write deadline that far ahead
// (http.ResponseController), and delay=ms waits that long first (so
// that the handler writes to a connection at rest, where no other write
// is under way).
func rawHandler(release <-chan struct{}) http.Handler {
	return http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		if ms, _ := strconv.Atoi(r.URL.Query().Get("wdl")); ms > 0 {
			http.NewResponseController(w).SetWriteDeadline(time.Now().Add(time.Duration(ms) * time.Millisecond))
		}
		if ms, _ := strconv.Atoi(r.URL.Query().Get("delay")); ms > 0 {
			time.Sleep(time.Duration(ms) * time.Millisecond)
		}
		switch r.URL.Path {
		case "/hold":
			<-release
		case "/ctx":
			select {
			case <-r.Context().Done():
			case <-release:
			}
		case "/answer-then-read": // a final response first, then the body
			w.WriteHeader(http.StatusOK)
			w.(http.Flusher).Flush()
			b, _ := io.ReadAll(r.Body)
			fmt.Fprintf(w, "read %d", len(b))
		case "/write-while-reading": // a write waits, then a body read too
			read := make(chan struct{})
			go func() {
				defer close(read)
				time.Sleep(100 * time.Millisecond)
				io.Copy(io.Discard, r.Body)
			}()
			w.Write(make([]byte, 1<<20))
			r.Body.Close()
			<-read
		case "/read-then-hold": // the body until it fails, then an answer, and on
			n, err := io.Copy(io.Discard, r.Body)
			fmt.Fprintf(w, "read %d: %v", n, err)
			w.(http.Flusher).Flush()
			select {
			case <-r.Context().Done():
			case <-release:
			}
		case "/clear-rdl-then-read":
			// clears the read deadline once ReadTimeout has passed
			time.Sleep(600 * time.Millisecond)
			http.NewResponseController(w).SetReadDeadline(time.Time{})
			n, err := io.Copy(io.Discard, r.Body)
			fmt.Fprintf(w, "read %d: %v", n, err)
		case "/sleep":
			ms, _ := strconv.Atoi(r.URL.Query().Get("ms"))
			time.Sleep(time.Duration(ms) * time.Millisecond)
			w.Write([]byte("slept"))
		default:
			diffHandler(w, r)
		}
	})
}

// rawParallel is how many scripts run at once: they mostly wait (for
// quiet, or for the servers to close after GOAWAY), so many more than
// the cores.
const rawParallel = 12

// TestRawDiff runs every script against the engine and x/net's server
// and compares their reactions.
func TestRawDiff(t *testing.T) {
	release := make(chan struct{})
	p := startPair(t, rawHandler(release), Config{})
	t.Cleanup(func() { close(release) }) // before startPair's: handlers return, then connections close
	engineAddr := p.addr()
	xnetAddr := strings.TrimPrefix(p.xnetURL, "https://")
	sem := make(chan struct{}, rawParallel)
	for _, s := range rawScripts {
		t.Run(s.name, func(t *testing.T) {
			// The script starts now, on goroutines of its own, and the
			// subtest only waits for it: parallel subtests are limited to
			// GOMAXPROCS at a time, and scripts spend their time waiting.
			type result struct {
				sum *rawSummary
				err error
			}
			engine, xnet := make(chan result, 1), make(chan result, 1)
			go func() {
				sem <- struct{}{}
				defer func() { <-sem }()
				done := make(chan struct{})
				go func() {
					defer close(done)
					sum, err := runRawScript("x/net", xnetAddr, s)
					xnet <- result{sum, err}
				}()
				sum, err := runRawScript("engine", engineAddr, s)
				engine <- result{sum, err}
				<-done
			}()
			t.Parallel()
			e, x := <-engine, <-xnet
			if e.err != nil || x.err != nil {
				t.Fatalf("engine: %v; x/net: %v", e.err, x.err)
			}
			got, ref := e.sum.lines(), x.sum.lines()
			if s.prefaceRace {
				got, ref = withoutPreface(got), withoutPreface(ref)
			}
			text := strings.Join(got, "\n")
			for _, w := range s.want {
				if !strings.Contains(text, w) {
					t.Errorf("the engine's summary lacks %q:\n%s", w, text)
				}
			}
			note := s.notXNet
			if refGo127 {
				note = s.not127
			}
			switch same := slices.Equal(got, ref); {
			case note == "" && !same:
				t.Errorf("the engine (-) and x/net (+) differ:\n%s", lineDiff(got, ref))
			case note != "" && same:
				t.Errorf("documented difference %q not seen; both:\n%s", note, text)
			case note != "":
				t.Logf("differs as documented (%s):\n%s", note, lineDiff(got, ref))
			case testing.Verbose():
				t.Logf("both:\n%s", text)
			}
		})
	}
}

// runRawScript runs s on a new connection to addr.
func runRawScript(name, addr string, s rawScript) (*rawSummary, error) {
	c, err := rawDial(addr, s.open)
	if err != nil {
		return nil, fmt.Errorf("%s: %w", name, err)
	}
	if s.run != nil {
		s.run(c)
	}
	// a last PING: everything the server does in answer to the script's
	// frames on its reading goroutine is written before the ACK
	c.sync()
	return c.settle(), nil
}

// withoutPreface drops the lines of the server's SETTINGS and connection
// window (see rawScript.prefaceRace).
func withoutPreface(lines []string) []string {
	return slices.DeleteFunc(slices.Clone(lines), func(l string) bool {
		return strings.HasPrefix(l, "SETTINGS [") || l == "SETTINGS " || strings.HasPrefix(l, "connection WINDOW_UPDATE total")
	})
}

// Helpers for the scripts.

func p8(s string) (b [8]byte) { copy(b[:], s); return b }

func bodyOf(n int) []byte { return bytes.Repeat([]byte("b"), n) }

// priorityUpdate is a PRIORITY_UPDATE payload (RFC 9218 §7.1).
func priorityUpdate(id uint32, value string) []byte {
	return append(binary.BigEndian.AppendUint32(nil, id), value...)
}

// bigFields returns n fields x-big-000: vvv… of size bytes each.
func bigFields(n, size int) []string {
	var pairs []string
	for i := range n {
		pairs = append(pairs, fmt.Sprintf("x-big-%03d", i), strings.Repeat("v", size))
	}
	return pairs
}

// getThen opens stream 1 with GET /bytes?n=5, waits for its end, then
// runs fn: what fn provokes then happens on a connection at rest.
func getThen(fn func(c *rawConn)) func(c *rawConn) {
	return func(c *rawConn) {
		c.get(1, "/bytes?n=5")
		c.waitEnd(1)
		fn(c)
	}
}

// ctxThen opens stream 1 with GET /ctx (answered only when the stream
// ends), makes sure the server has it, then runs fn.
func ctxThen(fn func(c *rawConn)) func(c *rawConn) {
	return func(c *rawConn) {
		c.get(1, "/ctx")
		c.sync()
		fn(c)
	}
}

// fill sends n bytes of DATA on stream id in frames of 16 KiB, without
// END_STREAM.
func fill(c *rawConn, id uint32, n int) {
	for n > 0 {
		k := min(n, 16384)
		c.data(id, false, bodyOf(k))
		n -= k
	}
}

// refundAtReset is the note of the scripts where a reset stream's unread
// body is given back.
const refundAtReset = "x/net gives a reset stream's unread body back to the connection's window when its handler returns; " +
	"the engine at the reset (a handler that neither reads nor returns would hold the window for ever)"

// lazyWindowCheck is the note of the scripts where a SETTINGS pushes an
// open stream's window past 2^31-1.
const lazyWindowCheck = "x/net checks a stream's window against a new SETTINGS_INITIAL_WINDOW_SIZE only when the stream " +
	"sends or gets a WINDOW_UPDATE, after ACKing the SETTINGS; the engine at once, as RFC 9113 §6.9.2 asks (no ACK)"

const (
	goAwayProtocol = "GOAWAY PROTOCOL_ERROR"
	goAwayFrame    = "GOAWAY FRAME_SIZE_ERROR"
	goAwayFlow     = "GOAWAY FLOW_CONTROL_ERROR"
	resp200        = "HEADERS 200"
)
