package coalesce

// Connections and helpers for the coalesce wrapper's tests: a fake
// connection whose Writes wait for permission, a check that no chunk or
// flusher leaks (the loopback TCP pair is harness.TCPPair).

import (
	"bytes"
	"errors"
	"fmt"
	"io"
	"net"
	"os"
	"sync"
	"sync/atomic"
	"testing"
	"time"

	"github.com/h2file/caddy-h2file/internal/harness"
)

// lwWrap wraps conn with its own limits.
func lwWrap(conn net.Conn, maxPending int, maxTotal int64, closeTimeout time.Duration) *Conn {
	return lwWrapShared(conn, NewLimits(maxPending, maxTotal, closeTimeout))
}

func lwWrapShared(conn net.Conn, limits *Limits) *Conn {
	switch c := NewConn(conn, limits).(type) {
	case *Conn:
		return c
	case *tlsConn:
		return c.Conn
	default:
		panic(fmt.Sprintf("unexpected %T", c))
	}
}

// lwQueued is what c has queued now.
func lwQueued(c *Conn) int {
	c.mu.Lock()
	defer c.mu.Unlock()
	return c.queuedBytes
}

// lwFlushing writes p to c and waits until the flusher has taken it: the
// batch is then in flight (blocked in a gate, say), and the next Writes
// queue behind it.
func lwFlushing(t *testing.T, c *Conn, p []byte) {
	t.Helper()
	if _, err := c.Write(p); err != nil {
		t.Fatal(err)
	}
	harness.WaitUntil(t, "the flusher to take the first Write", func() bool { return lwQueued(c) == 0 })
}

// lwNoLeaks checks, when the test ends, that every chunk went back to the
// pool and no flusher runs.
func lwNoLeaks(t *testing.T) {
	t.Helper()
	harness.NoLeaks(t, func() (int64, int64) { return flushers.Load(), chunksOut.Load() })
}

// lwGateConn is a fake connection whose Writes wait for permission, and
// which records what was written and under which deadline.
type lwGateConn struct {
	tokens chan struct{} // one per permitted Write; closed when open
	closed chan struct{}
	once   sync.Once

	mu        sync.Mutex
	open      bool
	writes    [][]byte
	deadlines []time.Time
	wdl       time.Time
	fail      error
}

// lwNewGate makes a closed gate; when the test ends, it fails the Writes
// still waiting.
func lwNewGate(t *testing.T) *lwGateConn {
	g := &lwGateConn{tokens: make(chan struct{}, 1024), closed: make(chan struct{})}
	t.Cleanup(func() { g.Close() })
	return g
}

func (g *lwGateConn) permit(n int) {
	for range n {
		g.tokens <- struct{}{}
	}
}

func (g *lwGateConn) openGate() {
	g.mu.Lock()
	defer g.mu.Unlock()
	if !g.open {
		g.open = true
		close(g.tokens)
	}
}

func (g *lwGateConn) Write(p []byte) (int, error) {
	g.mu.Lock()
	dl := g.wdl
	g.mu.Unlock()
	var timeout <-chan time.Time
	if !dl.IsZero() {
		t := time.NewTimer(time.Until(dl))
		defer t.Stop()
		timeout = t.C
	}
	select {
	case <-g.tokens:
	case <-g.closed:
		return 0, net.ErrClosed
	case <-timeout:
		return 0, os.ErrDeadlineExceeded
	}
	g.mu.Lock()
	defer g.mu.Unlock()
	if g.fail != nil {
		return 0, g.fail
	}
	g.writes = append(g.writes, bytes.Clone(p))
	g.deadlines = append(g.deadlines, dl)
	return len(p), nil
}

func (g *lwGateConn) written() (writes [][]byte, all []byte) {
	g.mu.Lock()
	defer g.mu.Unlock()
	for _, w := range g.writes {
		all = append(all, w...)
	}
	return append([][]byte(nil), g.writes...), all
}

func (g *lwGateConn) Read([]byte) (int, error) { <-g.closed; return 0, io.EOF }
func (g *lwGateConn) Close() error {
	g.once.Do(func() { close(g.closed) })
	return nil
}
func (g *lwGateConn) LocalAddr() net.Addr             { return &net.TCPAddr{IP: net.IPv4(127, 0, 0, 1), Port: 1} }
func (g *lwGateConn) RemoteAddr() net.Addr            { return &net.TCPAddr{IP: net.IPv4(127, 0, 0, 1), Port: 2} }
func (g *lwGateConn) SetDeadline(t time.Time) error   { return g.SetWriteDeadline(t) }
func (g *lwGateConn) SetReadDeadline(time.Time) error { return nil }
func (g *lwGateConn) SetWriteDeadline(t time.Time) error {
	g.mu.Lock()
	g.wdl = t
	g.mu.Unlock()
	return nil
}

// lwCountConn counts the Writes made to a connection.
type lwCountConn struct {
	net.Conn
	writes atomic.Int64
}

func (c *lwCountConn) Write(p []byte) (int, error) {
	c.writes.Add(1)
	return c.Conn.Write(p)
}

type lwWriteResult struct {
	n   int
	err error
}

func lwAsyncWrite(c net.Conn, p []byte) <-chan lwWriteResult {
	return harness.Async(func() lwWriteResult {
		n, err := c.Write(p)
		return lwWriteResult{n, err}
	})
}

// lwNotYet checks that ch has not delivered after a short while. It can
// only miss a bug, never fail a correct implementation.
func lwNotYet[T any](t *testing.T, ch <-chan T, what string) {
	t.Helper()
	select {
	case v := <-ch:
		t.Fatalf("%s returned early: %+v", what, v)
	case <-time.After(50 * time.Millisecond):
	}
}

func lwIsTimeout(err error) bool {
	var ne net.Error
	return errors.As(err, &ne) && ne.Timeout() && errors.Is(err, os.ErrDeadlineExceeded)
}
