package coalesce

// Closing a coalesce wrapper: pending bytes go out first, within the close
// timeout; CloseWrite; a blocked writer wakes.

import (
	"bytes"
	"crypto/rand"
	"crypto/tls"
	"encoding/binary"
	"errors"
	"io"
	"net"
	"sync"
	"testing"
	"time"

	"github.com/h2file/caddy-h2file/internal/harness"
)

// Close sends everything pending before closing, over TCP and through TLS
// (whose close_notify goes through the wrapper too).
func TestCoalesceCloseFlushes(t *testing.T) {
	lwNoLeaks(t)
	payload := make([]byte, 3<<20+17)
	rand.Read(payload)

	t.Run("tcp", func(t *testing.T) {
		server, client := harness.TCPPair(t)
		c := lwWrap(server, 64<<10, 64<<20, 5*time.Second)
		done := harness.Async(func() []byte { b, _ := io.ReadAll(client); return b })
		if _, err := c.Write(payload); err != nil {
			t.Fatal(err)
		}
		if err := c.Close(); err != nil {
			t.Fatal(err)
		}
		if got := harness.Recv(t, done, "reader"); !bytes.Equal(got, payload) {
			t.Fatalf("peer got %d of %d bytes", len(got), len(payload))
		}
	})

	t.Run("tls", func(t *testing.T) {
		tc := harness.NewCert(t)
		cert, pool := tc.TLS, tc.Pool
		server, client := harness.TCPPair(t)
		c := lwWrap(server, 64<<10, 64<<20, 5*time.Second)
		srv := tls.Server(c, &tls.Config{Certificates: []tls.Certificate{cert}, MaxVersion: tls.VersionTLS12})
		raw := &lwRecordConn{Conn: client}
		cli := tls.Client(raw, &tls.Config{RootCAs: pool, ServerName: "localhost"})
		done := harness.Async(func() []byte { b, _ := io.ReadAll(cli); return b })
		if _, err := srv.Write(payload); err != nil {
			t.Fatal(err)
		}
		if err := srv.Close(); err != nil {
			t.Fatal(err)
		}
		if got := harness.Recv(t, done, "reader"); !bytes.Equal(got, payload) {
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
	server, _ := harness.TCPPair(t)
	counted := &lwCountConn{Conn: server}
	c := lwWrap(counted, 64<<10, 64<<20, 200*time.Millisecond)
	// no deadline: only the close timeout bounds the flusher's write
	writer := lwAsyncWrite(c, make([]byte, 64<<20))
	// wait until the socket takes no more
	last, since := int64(-1), time.Now()
	harness.WaitUntil(t, "the socket buffers to fill", func() bool {
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
	if r := harness.Recv(t, writer, "blocked Write"); !errors.Is(r.err, net.ErrClosed) {
		t.Fatalf("blocked Write = %d, %v", r.n, r.err)
	}
}

// CloseWrite sends the pending bytes, then shuts down the writing side.
func TestCoalesceCloseWrite(t *testing.T) {
	lwNoLeaks(t)
	server, client := harness.TCPPair(t)
	c := lwWrap(server, 64<<10, 64<<20, 5*time.Second)
	defer c.Close()
	payload := make([]byte, 300<<10)
	rand.Read(payload)
	done := harness.Async(func() []byte { b, _ := io.ReadAll(client); return b })
	if _, err := c.Write(payload); err != nil {
		t.Fatal(err)
	}
	if err := c.CloseWrite(); err != nil {
		t.Fatal(err)
	}
	if got := harness.Recv(t, done, "reader"); !bytes.Equal(got, payload) {
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
	closed := harness.Async(c.Close)
	r := harness.Recv(t, blocked, "blocked Write")
	if !errors.Is(r.err, net.ErrClosed) || r.n != 8192 { // in flight and queued
		t.Fatalf("Write = %d, %v; want 8192, net.ErrClosed", r.n, r.err)
	}
	g.openGate()
	if err := harness.Recv(t, closed, "Close"); err != nil {
		t.Fatal(err)
	}
	if _, all := g.written(); len(all) != 8192 {
		t.Fatalf("sent %d bytes", len(all))
	}
}
