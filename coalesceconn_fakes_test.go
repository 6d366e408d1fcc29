package h2file

// Connections and helpers for the coalesce wrapper's tests: a loopback
// TCP pair, a fake connection whose Writes wait for permission, a check
// that no chunk or flusher leaks.

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
)

// lwTCPPair returns the two ends of a loopback TCP connection.
func lwTCPPair(t *testing.T) (server, client net.Conn) {
	t.Helper()
	ln, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		t.Fatal(err)
	}
	defer ln.Close()
	type result struct {
		c   net.Conn
		err error
	}
	ch := make(chan result, 1)
	go func() {
		c, err := ln.Accept()
		ch <- result{c, err}
	}()
	client, err = net.Dial("tcp", ln.Addr().String())
	if err != nil {
		t.Fatal(err)
	}
	r := <-ch
	if r.err != nil {
		t.Fatal(r.err)
	}
	t.Cleanup(func() { r.c.Close(); client.Close() })
	return r.c, client
}

// lwWrap wraps conn with its own limits.
func lwWrap(conn net.Conn, maxPending int, maxTotal int64, closeTimeout time.Duration) *coalesceConn {
	return lwWrapShared(conn, newCoalesceLimits(maxPending, maxTotal, closeTimeout))
}

func lwWrapShared(conn net.Conn, limits *coalesceLimits) *coalesceConn {
	switch c := newCoalesceConn(conn, limits).(type) {
	case *coalesceConn:
		return c
	case *tlsCoalesceConn:
		return c.coalesceConn
	default:
		panic(fmt.Sprintf("unexpected %T", c))
	}
}

// lwNoLeaks checks, when the test ends, that every chunk went back to the
// lwQueued is what c has queued now.
func lwQueued(c *coalesceConn) int {
	c.mu.Lock()
	defer c.mu.Unlock()
	return c.queuedBytes
}

// lwFlushing writes p to c and waits until the flusher has taken it: the
// batch is then in flight (blocked in a gate, say), and the next Writes
// queue behind it.
func lwFlushing(t *testing.T, c *coalesceConn, p []byte) {
	t.Helper()
	if _, err := c.Write(p); err != nil {
		t.Fatal(err)
	}
	waitUntil(t, "the flusher to take the first Write", func() bool { return lwQueued(c) == 0 })
}

// pool and no flusher runs.
func lwNoLeaks(t *testing.T) {
	t.Helper()
	chunks := coalesceChunksOut.Load()
	t.Cleanup(func() {
		t.Helper()
		if err := poll(10*time.Second, func() error {
			if n, c := coalesceFlushers.Load(), coalesceChunksOut.Load(); n != 0 || c != chunks {
				return fmt.Errorf("leak: %d flushers running, %d chunks out (want 0, %d)", n, c, chunks)
			}
			return nil
		}); err != nil {
			t.Error(err)
		}
	})
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

// lwAsync runs f in a goroutine and returns a channel with its result.
func lwAsync[T any](f func() T) <-chan T {
	ch := make(chan T, 1)
	go func() { ch <- f() }()
	return ch
}

type lwWriteResult struct {
	n   int
	err error
}

func lwAsyncWrite(c net.Conn, p []byte) <-chan lwWriteResult {
	return lwAsync(func() lwWriteResult {
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

func lwRecv[T any](t *testing.T, ch <-chan T, what string) T {
	t.Helper()
	select {
	case v := <-ch:
		return v
	case <-time.After(10 * time.Second):
		t.Fatalf("%s did not return", what)
		panic("unreachable")
	}
}

func lwIsTimeout(err error) bool {
	var ne net.Error
	return errors.As(err, &ne) && ne.Timeout() && errors.Is(err, os.ErrDeadlineExceeded)
}
