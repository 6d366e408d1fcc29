package h2file

import (
	"bufio"
	"bytes"
	"crypto/ecdsa"
	"crypto/elliptic"
	"crypto/rand"
	"crypto/rsa"
	"crypto/tls"
	"crypto/x509"
	"crypto/x509/pkix"
	"encoding/binary"
	"errors"
	"fmt"
	"io"
	"math/big"
	mrand "math/rand/v2"
	"net"
	"net/http"
	"os"
	"path/filepath"
	"runtime"
	"sync"
	"sync/atomic"
	"testing"
	"time"

	"golang.org/x/net/http2"
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

// lwEventually polls cond for up to 10s.
func lwEventually(t *testing.T, what string, cond func() bool) {
	t.Helper()
	deadline := time.Now().Add(10 * time.Second)
	for !cond() {
		if time.Now().After(deadline) {
			t.Fatalf("timed out waiting for %s", what)
		}
		time.Sleep(time.Millisecond)
	}
}

// lwNoLeaks checks, when the test ends, that every chunk went back to the
// pool and no flusher runs.
func lwNoLeaks(t *testing.T) {
	t.Helper()
	chunks := coalesceChunksOut.Load()
	t.Cleanup(func() {
		t.Helper()
		deadline := time.Now().Add(10 * time.Second)
		for coalesceFlushers.Load() != 0 || coalesceChunksOut.Load() != chunks {
			if time.Now().After(deadline) {
				t.Errorf("leak: %d flushers running, %d chunks out (want 0, %d)",
					coalesceFlushers.Load(), coalesceChunksOut.Load(), chunks)
				return
			}
			time.Sleep(time.Millisecond)
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

// A small Write reaches the peer by itself: no further Write, Flush or
// Close is needed, and nothing waits for more bytes.
func TestCoalesceSmallWriteReachesPeerAtOnce(t *testing.T) {
	lwNoLeaks(t)
	server, client := lwTCPPair(t)
	c := lwWrap(server, 64<<10, 64<<20, 5*time.Second)
	defer c.Close()
	buf := make([]byte, 5)
	for i := range 3 {
		msg := []byte(fmt.Sprintf("ping%d", i))
		if _, err := c.Write(msg); err != nil {
			t.Fatal(err)
		}
		client.SetReadDeadline(time.Now().Add(10 * time.Second))
		if _, err := io.ReadFull(client, buf); err != nil {
			t.Fatalf("write %d did not reach the peer: %v", i, err)
		}
		if !bytes.Equal(buf, msg) {
			t.Fatalf("got %q, want %q", buf, msg)
		}
	}
}

// Request/response ping-pong: every Write is sent alone and at once (one
// socket write per Write), and 200 round trips take about as long as on
// a plain connection.
func TestCoalescePingPong(t *testing.T) {
	lwNoLeaks(t)
	const rounds = 200
	run := func(wrap bool) (time.Duration, int64) {
		server, client := lwTCPPair(t)
		counted := &lwCountConn{Conn: server}
		var conn net.Conn = counted
		if wrap {
			conn = lwWrap(counted, 64<<10, 64<<20, 5*time.Second)
		}
		defer conn.Close()
		done := lwAsync(func() error {
			buf := make([]byte, 64)
			for range rounds {
				if _, err := io.ReadFull(client, buf); err != nil {
					return err
				}
				if _, err := client.Write(buf[:1]); err != nil {
					return err
				}
			}
			return nil
		})
		msg := bytes.Repeat([]byte{'x'}, 64)
		one := make([]byte, 1)
		start := time.Now()
		for range rounds {
			if _, err := conn.Write(msg); err != nil {
				t.Fatal(err)
			}
			if _, err := io.ReadFull(conn, one); err != nil {
				t.Fatal(err)
			}
		}
		elapsed := time.Since(start)
		if err := lwRecv(t, done, "peer"); err != nil {
			t.Fatal(err)
		}
		return elapsed, counted.writes.Load()
	}
	plain, _ := run(false)
	wrapped, socketWrites := run(true)
	t.Logf("%d round trips: plain %v, coalescing %v", rounds, plain, wrapped)
	if socketWrites != rounds {
		t.Errorf("socket writes = %d, want %d: a Write was held back or split", socketWrites, rounds)
	}
	// a very generous bound, that only a wrapper waiting for more bytes
	// before it writes would exceed
	if wrapped > 20*plain+500*time.Millisecond {
		t.Errorf("%d round trips took %v, on a plain connection %v", rounds, wrapped, plain)
	}
}

// Bytes written while a socket write is in progress go out together in
// the next one; the Writes do not wait.
func TestCoalesceBatchesWhileWriteInFlight(t *testing.T) {
	lwNoLeaks(t)
	g := lwNewGate(t)
	c := lwWrap(g, 64<<10, 64<<20, 5*time.Second)
	for i, s := range []string{"a", "b", "c", "d"} {
		r := lwRecv(t, lwAsyncWrite(c, []byte(s)), "Write "+s)
		if r.err != nil || r.n != 1 {
			t.Fatalf("Write(%q) = %d, %v", s, r.n, r.err)
		}
		if i == 0 {
			lwEventually(t, "the flusher to take the first Write", func() bool {
				c.mu.Lock()
				defer c.mu.Unlock()
				return c.queuedBytes == 0
			})
		}
	}
	g.openGate()
	if err := c.Close(); err != nil {
		t.Fatal(err)
	}
	writes, _ := g.written()
	if len(writes) != 2 || string(writes[0]) != "a" || string(writes[1]) != "bcd" {
		t.Fatalf("socket writes = %q, want [a bcd]", writes)
	}
}

// While a batch is written, at most max_pending bytes are queued for the
// next one.
func TestCoalesceQueueLimit(t *testing.T) {
	lwNoLeaks(t)
	g := lwNewGate(t)
	c := lwWrap(g, 2*coalesceChunkSize, 64<<20, time.Second)
	if _, err := c.Write(make([]byte, 2*coalesceChunkSize)); err != nil {
		t.Fatal(err)
	}
	lwEventually(t, "the flusher to take the first Write", func() bool {
		c.mu.Lock()
		defer c.mu.Unlock()
		return c.queuedBytes == 0
	})
	blocked := lwAsyncWrite(c, make([]byte, 3*coalesceChunkSize))
	lwNotYet(t, blocked, "Write beyond max_pending")
	c.mu.Lock()
	queued, pending := c.queuedBytes, c.pending
	c.mu.Unlock()
	if queued != 2*coalesceChunkSize || pending != 4*coalesceChunkSize {
		t.Errorf("queued %d, pending %d; want %d, %d", queued, pending, 2*coalesceChunkSize, 4*coalesceChunkSize)
	}
	g.openGate()
	if r := lwRecv(t, blocked, "Write"); r.err != nil {
		t.Fatal(r.err)
	}
	if err := c.Close(); err != nil {
		t.Fatal(err)
	}
	if _, all := g.written(); len(all) != 5*coalesceChunkSize {
		t.Fatalf("sent %d bytes", len(all))
	}
}

// Concurrent writers: each Write's bytes arrive contiguous and each
// writer's Writes in order, with writes of every size, many larger than
// max_pending.
func TestCoalesceOrderConcurrentWriters(t *testing.T) {
	lwNoLeaks(t)
	server, client := lwTCPPair(t)
	c := lwWrap(server, 20000, 64<<20, 5*time.Second)
	const writers, msgs = 8, 150
	fill := func(p []byte, w, seq int) {
		for i := range p {
			p[i] = byte(w*31 + seq*7 + i)
		}
	}
	var wg sync.WaitGroup
	for w := range writers {
		wg.Go(func() {
			rng := mrand.New(mrand.NewPCG(uint64(w), 1))
			for seq := range msgs {
				var size int
				switch rng.IntN(4) {
				case 0:
					size = rng.IntN(16)
				case 1:
					size = rng.IntN(2 * coalesceChunkSize)
				default:
					size = rng.IntN(70000)
				}
				msg := make([]byte, 9+size)
				msg[0] = byte(w)
				binary.BigEndian.PutUint32(msg[1:], uint32(seq))
				binary.BigEndian.PutUint32(msg[5:], uint32(size))
				fill(msg[9:], w, seq)
				if _, err := c.Write(msg); err != nil {
					t.Error(err)
					return
				}
			}
		})
	}
	done := lwAsync(func() error {
		r := bufio.NewReader(client)
		next := make([]int, writers)
		hdr := make([]byte, 9)
		for range writers * msgs {
			if _, err := io.ReadFull(r, hdr); err != nil {
				return err
			}
			w, seq, size := int(hdr[0]), int(binary.BigEndian.Uint32(hdr[1:])), int(binary.BigEndian.Uint32(hdr[5:]))
			if w >= writers || seq != next[w] {
				return fmt.Errorf("got writer %d message %d, want message %d", w, seq, next[min(w, writers-1)])
			}
			next[w]++
			body := make([]byte, size)
			if _, err := io.ReadFull(r, body); err != nil {
				return err
			}
			want := make([]byte, size)
			fill(want, w, seq)
			if !bytes.Equal(body, want) {
				return fmt.Errorf("writer %d message %d: payload differs", w, seq)
			}
		}
		return nil
	})
	wg.Wait()
	if err := c.Close(); err != nil {
		t.Fatal(err)
	}
	if err := lwRecv(t, done, "reader"); err != nil {
		t.Fatal(err)
	}
}

// Writes of every size, from empty to many times max_pending, arrive
// byte for byte.
func TestCoalesceWriteSizes(t *testing.T) {
	lwNoLeaks(t)
	server, client := lwTCPPair(t)
	c := lwWrap(server, 64<<10, 64<<20, 5*time.Second)
	var want []byte
	done := lwAsync(func() []byte { b, _ := io.ReadAll(client); return b })
	for i, size := range []int{0, 1, coalesceChunkSize - 1, coalesceChunkSize, coalesceChunkSize + 1, 3*coalesceChunkSize + 7, 1<<20 + 3, 2} {
		p := make([]byte, size)
		for j := range p {
			p[j] = byte(i + j*13)
		}
		n, err := c.Write(p)
		if n != size || err != nil {
			t.Fatalf("Write(%d bytes) = %d, %v", size, n, err)
		}
		want = append(want, p...)
	}
	if err := c.Close(); err != nil {
		t.Fatal(err)
	}
	if got := lwRecv(t, done, "reader"); !bytes.Equal(got, want) {
		t.Fatalf("got %d bytes, want %d (or different content)", len(got), len(want))
	}
}

// A full connection makes Write wait until the flusher has sent bytes.
func TestCoalesceBackpressure(t *testing.T) {
	lwNoLeaks(t)
	g := lwNewGate(t)
	c := lwWrap(g, 4096, 64<<20, 5*time.Second)
	if _, err := c.Write([]byte{1}); err != nil { // in flight, blocked in the gate
		t.Fatal(err)
	}
	lwEventually(t, "flusher takes the first byte", func() bool {
		c.mu.Lock()
		defer c.mu.Unlock()
		return c.queuedBytes == 0
	})
	if r := lwRecv(t, lwAsyncWrite(c, make([]byte, 4096)), "Write"); r.err != nil {
		t.Fatal(r.err)
	}
	blocked := lwAsyncWrite(c, bytes.Repeat([]byte{2}, 10))
	lwNotYet(t, blocked, "Write beyond max_pending")
	g.openGate()
	if r := lwRecv(t, blocked, "Write"); r.n != 10 || r.err != nil {
		t.Fatalf("Write = %d, %v", r.n, r.err)
	}
	if err := c.Close(); err != nil {
		t.Fatal(err)
	}
	if _, all := g.written(); len(all) != 1+4096+10 {
		t.Fatalf("sent %d bytes", len(all))
	}
}

// The write deadline ends a Write waiting for room: when it passes, and
// when it is moved into the past while the Write waits. Such a timeout
// does not break the connection.
func TestCoalesceWriteDeadlineWhileBlocked(t *testing.T) {
	lwNoLeaks(t)
	g := lwNewGate(t)
	c := lwWrap(g, 4096, 64<<20, 5*time.Second)
	if _, err := c.Write([]byte{1}); err != nil { // in flight
		t.Fatal(err)
	}
	lwEventually(t, "the flusher to take the first byte", func() bool {
		c.mu.Lock()
		defer c.mu.Unlock()
		return c.queuedBytes == 0
	})
	if _, err := c.Write(make([]byte, 4096)); err != nil { // queue full
		t.Fatal(err)
	}

	c.SetWriteDeadline(time.Now().Add(50 * time.Millisecond))
	r := lwRecv(t, lwAsyncWrite(c, []byte("x")), "Write with deadline")
	if r.n != 0 || !lwIsTimeout(r.err) {
		t.Fatalf("Write = %d, %v; want a timeout", r.n, r.err)
	}

	c.SetWriteDeadline(time.Time{})
	blocked := lwAsyncWrite(c, []byte("y"))
	lwNotYet(t, blocked, "Write without deadline")
	c.SetWriteDeadline(time.Now().Add(-time.Second))
	if r := lwRecv(t, blocked, "Write after deadline moved"); !lwIsTimeout(r.err) {
		t.Fatalf("Write = %d, %v; want a timeout", r.n, r.err)
	}
	if _, err := c.Write([]byte("z")); !lwIsTimeout(err) {
		t.Fatalf("Write with past deadline: %v", err)
	}

	c.SetWriteDeadline(time.Time{})
	g.openGate()
	if _, err := c.Write([]byte("ok")); err != nil {
		t.Fatalf("Write after timeouts: %v", err)
	}
	if err := c.Close(); err != nil {
		t.Fatal(err)
	}
	if _, all := g.written(); len(all) != 1+4096+2 || string(all[1+4096:]) != "ok" {
		t.Fatalf("sent %d bytes", len(all))
	}
}

// The flusher writes under the deadline of the bytes it sends; when that
// write times out, the error is sticky.
func TestCoalesceFlusherHonoursDeadline(t *testing.T) {
	lwNoLeaks(t)
	g := lwNewGate(t)
	c := lwWrap(g, 4096, 64<<20, time.Second)
	dl := time.Now().Add(50 * time.Millisecond)
	c.SetWriteDeadline(dl)
	if _, err := c.Write([]byte("x")); err != nil {
		t.Fatal(err)
	}
	c.SetWriteDeadline(time.Time{})
	lwEventually(t, "the socket write to time out", func() bool {
		c.mu.Lock()
		defer c.mu.Unlock()
		return c.err != nil
	})
	if _, err := c.Write([]byte("y")); !lwIsTimeout(err) {
		t.Fatalf("Write after the flusher timed out: %v; want a timeout", err)
	}
	if _, err2 := c.Write([]byte("z")); !lwIsTimeout(err2) {
		t.Fatalf("error is not sticky: %v", err2)
	}
	if err := c.Close(); !lwIsTimeout(err) {
		t.Fatalf("Close = %v, want the sticky timeout", err)
	}
}

// The same over a real socket whose peer does not read.
func TestCoalesceFlusherDeadlineTCP(t *testing.T) {
	lwNoLeaks(t)
	server, _ := lwTCPPair(t)
	c := lwWrap(server, 64<<10, 64<<20, time.Second)
	c.SetWriteDeadline(time.Now().Add(200 * time.Millisecond))
	big := make([]byte, 1<<20)
	var err error
	for range 256 { // fill the socket buffers
		if _, err = c.Write(big); err != nil {
			break
		}
	}
	if !lwIsTimeout(err) {
		t.Fatalf("Write to a peer that does not read: %v; want a timeout", err)
	}
	c.SetWriteDeadline(time.Time{})
	lwEventually(t, "the socket write to fail", func() bool {
		c.mu.Lock()
		defer c.mu.Unlock()
		return c.err != nil
	})
	if _, err := c.Write([]byte("x")); !lwIsTimeout(err) {
		t.Fatalf("Write after the socket write timed out: %v", err)
	}
	c.Close()
}

// Bytes keep the deadline they were written under: TLS's Close writes
// close_notify under a 5s deadline and then sets the deadline to now;
// close_notify must still be sent, and later Writes must fail at once.
func TestCoalesceQueuedBytesKeepTheirDeadline(t *testing.T) {
	lwNoLeaks(t)
	g := lwNewGate(t)
	c := lwWrap(g, 64<<10, 64<<20, 5*time.Second)
	if _, err := c.Write([]byte("data")); err != nil { // in flight
		t.Fatal(err)
	}
	start := time.Now()
	c.SetWriteDeadline(start.Add(5 * time.Second))
	if _, err := c.Write([]byte("alert")); err != nil {
		t.Fatal(err)
	}
	c.SetWriteDeadline(time.Now())
	if n, err := c.Write([]byte("late")); n != 0 || !lwIsTimeout(err) {
		t.Fatalf("Write after deadline = %d, %v", n, err)
	}
	go func() {
		time.Sleep(20 * time.Millisecond)
		g.openGate()
	}()
	if err := c.Close(); err != nil {
		t.Fatalf("Close = %v", err)
	}
	writes, all := g.written()
	if string(all) != "dataalert" {
		t.Fatalf("sent %q", all)
	}
	g.mu.Lock()
	last := g.deadlines[len(g.deadlines)-1]
	g.mu.Unlock()
	if !last.Equal(start.Add(5 * time.Second)) {
		t.Fatalf("%q written under deadline %v, want %v", writes[len(writes)-1], last, start.Add(5*time.Second))
	}
}

// An error of the wrapped connection's Write is returned by the next
// Writes and by Close.
func TestCoalesceStickyError(t *testing.T) {
	lwNoLeaks(t)
	boom := errors.New("lw boom")
	g := lwNewGate(t)
	g.fail = boom
	g.openGate()
	c := lwWrap(g, 64<<10, 64<<20, time.Second)
	if _, err := c.Write([]byte("x")); err != nil {
		t.Fatal(err)
	}
	var err error
	lwEventually(t, "the error", func() bool {
		_, err = c.Write([]byte("y"))
		return err != nil
	})
	if !errors.Is(err, boom) {
		t.Fatalf("Write = %v, want %v", err, boom)
	}
	if _, err := c.Write([]byte("z")); !errors.Is(err, boom) {
		t.Fatalf("second Write = %v", err)
	}
	if err := c.Close(); !errors.Is(err, boom) {
		t.Fatalf("Close = %v", err)
	}
	if _, err := c.Write([]byte("z")); !errors.Is(err, boom) {
		t.Fatalf("Write after Close = %v", err)
	}
}

// Close sends everything pending before closing, over TCP and through TLS
// (whose close_notify goes through the wrapper too).
func TestCoalesceCloseFlushes(t *testing.T) {
	lwNoLeaks(t)
	payload := make([]byte, 3<<20+17)
	rand.Read(payload)

	t.Run("tcp", func(t *testing.T) {
		server, client := lwTCPPair(t)
		c := lwWrap(server, 64<<10, 64<<20, 5*time.Second)
		done := lwAsync(func() []byte { b, _ := io.ReadAll(client); return b })
		if _, err := c.Write(payload); err != nil {
			t.Fatal(err)
		}
		if err := c.Close(); err != nil {
			t.Fatal(err)
		}
		if got := lwRecv(t, done, "reader"); !bytes.Equal(got, payload) {
			t.Fatalf("peer got %d of %d bytes", len(got), len(payload))
		}
	})

	t.Run("tls", func(t *testing.T) {
		cert, pool := lwServerCert(t, "ecdsa")
		server, client := lwTCPPair(t)
		c := lwWrap(server, 64<<10, 64<<20, 5*time.Second)
		srv := tls.Server(c, &tls.Config{Certificates: []tls.Certificate{cert}, MaxVersion: tls.VersionTLS12})
		raw := &lwRecordConn{Conn: client}
		cli := tls.Client(raw, &tls.Config{RootCAs: pool, ServerName: "localhost"})
		done := lwAsync(func() []byte { b, _ := io.ReadAll(cli); return b })
		if _, err := srv.Write(payload); err != nil {
			t.Fatal(err)
		}
		if err := srv.Close(); err != nil {
			t.Fatal(err)
		}
		if got := lwRecv(t, done, "reader"); !bytes.Equal(got, payload) {
			t.Fatalf("peer got %d of %d bytes", len(got), len(payload))
		}
		if typ := raw.lastRecordType(); typ != 21 {
			t.Fatalf("last TLS record has type %d, want 21 (the close_notify alert)", typ)
		}
	})
}

// lwRecordConn records what is read from a connection.
type lwRecordConn struct {
	net.Conn
	mu   sync.Mutex
	read []byte
}

func (c *lwRecordConn) Read(p []byte) (int, error) {
	n, err := c.Conn.Read(p)
	c.mu.Lock()
	c.read = append(c.read, p[:n]...)
	c.mu.Unlock()
	return n, err
}

// lastRecordType walks the TLS records read and returns the type of the
// last one.
func (c *lwRecordConn) lastRecordType() int {
	c.mu.Lock()
	defer c.mu.Unlock()
	typ := -1
	for b := c.read; len(b) >= 5; {
		n := int(binary.BigEndian.Uint16(b[3:5]))
		if len(b) < 5+n {
			return -1
		}
		typ = int(b[0])
		b = b[5+n:]
	}
	return typ
}

// Close gives up on a peer that does not read after the close timeout,
// and leaves no goroutine behind.
func TestCoalesceCloseTimeout(t *testing.T) {
	lwNoLeaks(t)
	server, _ := lwTCPPair(t)
	counted := &lwCountConn{Conn: server}
	c := lwWrap(counted, 64<<10, 64<<20, 200*time.Millisecond)
	// no deadline: only the close timeout bounds the flusher's write
	writer := lwAsyncWrite(c, make([]byte, 64<<20))
	// wait until the socket takes no more
	last, since := int64(-1), time.Now()
	lwEventually(t, "the socket buffers to fill", func() bool {
		if n := counted.writes.Load(); n != last {
			last, since = n, time.Now()
		}
		return time.Since(since) > 200*time.Millisecond
	})
	start := time.Now()
	err := c.Close()
	t.Logf("Close took %v: %v", time.Since(start), err)
	if !lwIsTimeout(err) {
		t.Fatalf("Close = %v, want a timeout", err)
	}
	if d := time.Since(start); d > 5*time.Second {
		t.Fatalf("Close took %v", d)
	}
	if r := lwRecv(t, writer, "blocked Write"); !errors.Is(r.err, net.ErrClosed) {
		t.Fatalf("blocked Write = %d, %v", r.n, r.err)
	}
}

// Buffers go back to the pool when a connection has nothing pending, not
// only when it closes; many connections leave nothing behind.
func TestCoalescePoolReuse(t *testing.T) {
	lwNoLeaks(t)
	base := coalesceChunksOut.Load()
	limits := newCoalesceLimits(64<<10, 64<<20, 5*time.Second)
	server, client := lwTCPPair(t)
	c := lwWrapShared(server, limits)
	payload := make([]byte, 200<<10)
	read := lwAsync(func() error { _, err := io.ReadFull(client, make([]byte, len(payload))); return err })
	if _, err := c.Write(payload); err != nil {
		t.Fatal(err)
	}
	if err := lwRecv(t, read, "reader"); err != nil {
		t.Fatal(err)
	}
	lwEventually(t, "buffers back in the pool while the connection is open", func() bool {
		return coalesceChunksOut.Load() == base && limits.budget.used.Load() == 0
	})
	c.Close()

	var wg sync.WaitGroup
	for range 20 {
		server, client := lwTCPPair(t)
		c := lwWrapShared(server, limits)
		wg.Go(func() { io.Copy(io.Discard, client) })
		wg.Go(func() {
			for range 10 {
				if _, err := c.Write(make([]byte, 50000)); err != nil {
					t.Error(err)
				}
			}
			if err := c.Close(); err != nil {
				t.Error(err)
			}
		})
	}
	wg.Wait()
	if got := coalesceChunksOut.Load(); got != base {
		t.Fatalf("%d chunks not returned", got-base)
	}
	if used := limits.budget.used.Load(); used != 0 {
		t.Fatalf("budget still has %d chunks in use", used)
	}
}

// The budget of all connections together: when it is used up, a Write
// of another connection waits until chunks are given back.
func TestCoalesceGlobalCap(t *testing.T) {
	lwNoLeaks(t)
	limits := newCoalesceLimits(64<<10, 2*coalesceChunkSize, 5*time.Second)
	ga, gb := lwNewGate(t), lwNewGate(t)
	a, b := lwWrapShared(ga, limits), lwWrapShared(gb, limits)
	if _, err := a.Write([]byte{1}); err != nil { // chunk 1, in flight
		t.Fatal(err)
	}
	lwEventually(t, "the flusher to take the first Write", func() bool {
		a.mu.Lock()
		defer a.mu.Unlock()
		return a.queuedBytes == 0
	})
	blockedA := lwAsyncWrite(a, make([]byte, 20000)) // chunk 2, then waits for a third
	lwEventually(t, "both chunks in use", func() bool { return limits.budget.used.Load() == 2 })
	lwNotYet(t, blockedA, "Write of a beyond the budget")
	blockedB := lwAsyncWrite(b, []byte("b"))
	lwNotYet(t, blockedB, "Write of b beyond the budget")
	if used := limits.budget.used.Load(); used != 2 {
		t.Fatalf("budget used = %d, want 2", used)
	}
	gb.openGate()
	ga.openGate()
	if r := lwRecv(t, blockedA, "Write of a"); r.n != 20000 || r.err != nil {
		t.Fatalf("a: %d, %v", r.n, r.err)
	}
	if r := lwRecv(t, blockedB, "Write of b"); r.n != 1 || r.err != nil {
		t.Fatalf("b: %d, %v", r.n, r.err)
	}
	a.Close()
	b.Close()
	if _, all := ga.written(); len(all) != 20001 {
		t.Fatalf("a sent %d bytes", len(all))
	}
	if _, all := gb.written(); string(all) != "b" {
		t.Fatalf("b sent %q", all)
	}
	if used := limits.budget.used.Load(); used != 0 {
		t.Fatalf("budget used = %d after close", used)
	}
}

// No goroutine outlives its connection.
func TestCoalesceNoGoroutineLeak(t *testing.T) {
	lwNoLeaks(t)
	before := runtime.NumGoroutine()
	func() {
		var wg sync.WaitGroup
		for i := range 30 {
			server, client := lwTCPPair(t)
			c := lwWrap(server, 16<<10, 64<<20, time.Second)
			wg.Go(func() { io.Copy(io.Discard, client); client.Close() })
			wg.Go(func() {
				for range 20 {
					c.Write(make([]byte, 3000+i))
				}
				c.Close()
			})
		}
		wg.Wait()
	}()
	lwEventually(t, "goroutines to end", func() bool {
		return runtime.NumGoroutine() <= before && coalesceFlushers.Load() == 0
	})
}

// Above TLS, the wrapper has the TLS state and the wrapped connection;
// elsewhere it has no TLS state, so it cannot pass for TLS.
func TestCoalesceConnectionState(t *testing.T) {
	lwNoLeaks(t)
	limits := newCoalesceLimits(64<<10, 64<<20, time.Second)
	server, client := lwTCPPair(t)
	plain := newCoalesceConn(server, limits)
	if _, ok := plain.(tlsConnectionStater); ok {
		t.Fatal("wrapper of a TCP connection has ConnectionState")
	}
	if nc := plain.(interface{ NetConn() net.Conn }).NetConn(); nc != server {
		t.Fatal("NetConn is not the wrapped connection")
	}

	cert, pool := lwServerCert(t, "ecdsa")
	srv := tls.Server(server, &tls.Config{Certificates: []tls.Certificate{cert}, NextProtos: []string{"h2", "http/1.1"}})
	wrapped := newCoalesceConn(srv, limits)
	st, ok := wrapped.(tlsConnectionStater)
	if !ok {
		t.Fatal("wrapper of a TLS connection has no ConnectionState")
	}
	cli := tls.Client(client, &tls.Config{RootCAs: pool, ServerName: "localhost", NextProtos: []string{"h2"}})
	go func() { cli.Write([]byte("hello")) }()
	buf := make([]byte, 5)
	if _, err := io.ReadFull(wrapped, buf); err != nil {
		t.Fatal(err)
	}
	got, want := st.ConnectionState(), srv.ConnectionState()
	if !got.HandshakeComplete || got.NegotiatedProtocol != "h2" || got.Version != want.Version || got.CipherSuite != want.CipherSuite {
		t.Fatalf("ConnectionState = %+v, want %+v", got, want)
	}
	if nc := wrapped.(interface{ NetConn() net.Conn }).NetConn(); nc != srv {
		t.Fatal("NetConn is not the wrapped connection")
	}
	wrapped.Close()
}

// lwServerCert makes a self-signed certificate for localhost with an
// ECDSA or RSA key.
func lwServerCert(t *testing.T, kind string) (tls.Certificate, *x509.CertPool) {
	t.Helper()
	var key any
	var pub any
	switch kind {
	case "rsa":
		k, err := rsa.GenerateKey(rand.Reader, 2048)
		if err != nil {
			t.Fatal(err)
		}
		key, pub = k, &k.PublicKey
	default:
		k, err := ecdsa.GenerateKey(elliptic.P256(), rand.Reader)
		if err != nil {
			t.Fatal(err)
		}
		key, pub = k, &k.PublicKey
	}
	tmpl := &x509.Certificate{
		SerialNumber:          big.NewInt(1),
		Subject:               pkix.Name{CommonName: "localhost"},
		DNSNames:              []string{"localhost"},
		NotBefore:             time.Now().Add(-time.Hour),
		NotAfter:              time.Now().Add(time.Hour),
		KeyUsage:              x509.KeyUsageDigitalSignature | x509.KeyUsageKeyEncipherment | x509.KeyUsageCertSign,
		ExtKeyUsage:           []x509.ExtKeyUsage{x509.ExtKeyUsageServerAuth},
		BasicConstraintsValid: true,
		IsCA:                  true,
	}
	der, err := x509.CreateCertificate(rand.Reader, tmpl, tmpl, pub, key)
	if err != nil {
		t.Fatal(err)
	}
	leaf, err := x509.ParseCertificate(der)
	if err != nil {
		t.Fatal(err)
	}
	pool := x509.NewCertPool()
	pool.AddCert(leaf)
	return tls.Certificate{Certificate: [][]byte{der}, PrivateKey: key, Leaf: leaf}, pool
}

// For every TLS 1.2 cipher suite crypto/tls has, the wrapper rejects
// HTTP/2 exactly when golang.org/x/net/http2's server does (it sends a
// GOAWAY frame with INADEQUATE_SECURITY instead of its SETTINGS).
func TestCoalesceH2TLSRequirementsMatchHTTP2Server(t *testing.T) {
	lwNoLeaks(t)
	certs := map[string]tls.Certificate{}
	pools := map[string]*x509.CertPool{}
	for _, kind := range []string{"ecdsa", "rsa"} {
		certs[kind], pools[kind] = lwServerCert(t, kind)
	}
	suites := append(tls.CipherSuites(), tls.InsecureCipherSuites()...)
	tested := 0
	for _, cs := range suites {
		if !lwSupportsTLS12(cs) {
			continue
		}
		kind := "rsa"
		if bytes.Contains([]byte(cs.Name), []byte("ECDSA")) {
			kind = "ecdsa"
		}
		for _, viaWrapper := range []bool{false, true} {
			goaway, st, err := lwFirstH2Frame(t, certs[kind], pools[kind], cs.ID, viaWrapper)
			if err != nil {
				t.Logf("%s: skipped: %v", cs.Name, err)
				continue
			}
			tested++
			if want := coalesceH2TLSProblem(st) != ""; goaway != want {
				t.Errorf("%s (wrapper %v): GOAWAY sent = %v, want %v", cs.Name, viaWrapper, goaway, want)
			}
		}
	}
	if tested < 10 {
		t.Fatalf("only %d cipher suites could be tested", tested)
	}
	// TLS 1.3 is always fine
	if p := coalesceH2TLSProblem(tls.ConnectionState{Version: tls.VersionTLS13, CipherSuite: tls.TLS_AES_128_GCM_SHA256, NegotiatedProtocol: "h2"}); p != "" {
		t.Errorf("TLS 1.3 rejected: %s", p)
	}
	if p := coalesceH2TLSProblem(tls.ConnectionState{Version: tls.VersionTLS11, NegotiatedProtocol: "h2"}); p == "" {
		t.Error("TLS 1.1 accepted")
	}
	if p := coalesceH2TLSProblem(tls.ConnectionState{Version: tls.VersionTLS11, NegotiatedProtocol: "http/1.1"}); p != "" {
		t.Errorf("HTTP/1.1 rejected: %s", p)
	}
}

func lwSupportsTLS12(cs *tls.CipherSuite) bool {
	for _, v := range cs.SupportedVersions {
		if v == tls.VersionTLS12 {
			return true
		}
	}
	return false
}

// lwFirstH2Frame makes a TLS 1.2 connection with cipher suite id and ALPN
// h2 to an HTTP/2 server, directly on the *tls.Conn or through the
// wrapper (above TLS, as the h2c path sees it, without the TLS state),
// and reports whether the server's first frame is a GOAWAY.
func lwFirstH2Frame(t *testing.T, cert tls.Certificate, pool *x509.CertPool, id uint16, viaWrapper bool) (goaway bool, st tls.ConnectionState, err error) {
	server, client := lwTCPPair(t)
	srv := tls.Server(server, &tls.Config{
		Certificates: []tls.Certificate{cert}, NextProtos: []string{"h2"},
		CipherSuites: []uint16{id}, MaxVersion: tls.VersionTLS12,
	})
	h2srv := &http2.Server{}
	handler := http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {})
	served := make(chan struct{})
	go func() {
		defer close(served)
		if !viaWrapper {
			// as net/http does: the handshake, then HTTP/2 on the *tls.Conn
			if err := srv.Handshake(); err != nil {
				return
			}
			h2srv.ServeConn(srv, &http2.ServeConnOpts{Handler: handler})
			return
		}
		wrapped := newCoalesceConn(srv, newCoalesceLimits(64<<10, 64<<20, time.Second))
		// as net/http's h2c path does: read the preface, then hand over
		// a connection that hides the TLS state
		preface := make([]byte, len(http2.ClientPreface))
		if _, err := io.ReadFull(wrapped, preface); err != nil {
			wrapped.Close()
			return
		}
		h2srv.ServeConn(struct{ net.Conn }{wrapped}, &http2.ServeConnOpts{Handler: handler, SawClientPreface: true})
	}()
	defer func() { client.Close(); <-served }()

	cli := tls.Client(client, &tls.Config{
		RootCAs: pool, ServerName: "localhost", NextProtos: []string{"h2"},
		CipherSuites: []uint16{id}, MaxVersion: tls.VersionTLS12,
	})
	cli.SetDeadline(time.Now().Add(10 * time.Second))
	if err := cli.Handshake(); err != nil {
		server.Close()
		return false, st, err
	}
	st = cli.ConnectionState()
	if _, err := io.WriteString(cli, http2.ClientPreface); err != nil {
		return false, st, err
	}
	fr := http2.NewFramer(io.Discard, cli)
	f, err := fr.ReadFrame()
	if err != nil {
		return false, st, fmt.Errorf("reading first frame: %w", err)
	}
	ga, ok := f.(*http2.GoAwayFrame)
	if ok && ga.ErrCode != http2.ErrCodeInadequateSecurity {
		return false, st, fmt.Errorf("GOAWAY with %v", ga.ErrCode)
	}
	return ok, st, nil
}

// ReadFrom sends the pending bytes first, then copies straight into the
// socket (sendfile), in order.
func TestCoalesceReadFrom(t *testing.T) {
	lwNoLeaks(t)
	server, client := lwTCPPair(t)
	c := lwWrap(server, 64<<10, 64<<20, 5*time.Second)
	body := make([]byte, 1<<20+5)
	rand.Read(body)
	name := filepath.Join(t.TempDir(), "body")
	if err := os.WriteFile(name, body, 0o600); err != nil {
		t.Fatal(err)
	}
	f, err := os.Open(name)
	if err != nil {
		t.Fatal(err)
	}
	defer f.Close()
	done := lwAsync(func() []byte { b, _ := io.ReadAll(client); return b })
	head := bytes.Repeat([]byte("h"), 100<<10)
	if _, err := c.Write(head); err != nil {
		t.Fatal(err)
	}
	// net/http's response.ReadFrom calls the connection's ReadFrom with
	// the *os.File, which lets the kernel copy
	if n, err := c.ReadFrom(f); n != int64(len(body)) || err != nil {
		t.Fatalf("ReadFrom = %d, %v", n, err)
	}
	if _, err := c.Write([]byte("tail")); err != nil {
		t.Fatal(err)
	}
	c.Close()
	want := append(append(head, body...), "tail"...)
	if got := lwRecv(t, done, "reader"); !bytes.Equal(got, want) {
		t.Fatalf("got %d bytes, want %d", len(got), len(want))
	}
}

// CloseWrite sends the pending bytes, then shuts down the writing side.
func TestCoalesceCloseWrite(t *testing.T) {
	lwNoLeaks(t)
	server, client := lwTCPPair(t)
	c := lwWrap(server, 64<<10, 64<<20, 5*time.Second)
	defer c.Close()
	payload := make([]byte, 300<<10)
	rand.Read(payload)
	done := lwAsync(func() []byte { b, _ := io.ReadAll(client); return b })
	if _, err := c.Write(payload); err != nil {
		t.Fatal(err)
	}
	if err := c.CloseWrite(); err != nil {
		t.Fatal(err)
	}
	if got := lwRecv(t, done, "reader"); !bytes.Equal(got, payload) {
		t.Fatalf("got %d bytes, want %d", len(got), len(payload))
	}
	if _, err := c.Write([]byte("x")); err == nil {
		t.Fatal("Write after CloseWrite succeeded")
	}
}

// Close while a Write waits for room ends the Write; the bytes it queued
// are still sent.
func TestCoalesceCloseWakesBlockedWriter(t *testing.T) {
	lwNoLeaks(t)
	g := lwNewGate(t)
	c := lwWrap(g, 4096, 64<<20, 5*time.Second)
	blocked := lwAsyncWrite(c, make([]byte, 10000))
	lwNotYet(t, blocked, "Write beyond max_pending")
	closed := lwAsync(c.Close)
	r := lwRecv(t, blocked, "blocked Write")
	if !errors.Is(r.err, net.ErrClosed) || r.n != 8192 { // in flight and queued
		t.Fatalf("Write = %d, %v; want 8192, net.ErrClosed", r.n, r.err)
	}
	g.openGate()
	if err := lwRecv(t, closed, "Close"); err != nil {
		t.Fatal(err)
	}
	if _, all := g.written(); len(all) != 8192 {
		t.Fatalf("sent %d bytes", len(all))
	}
}
