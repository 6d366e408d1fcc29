package h2

import (
	"bytes"
	"context"
	"crypto/tls"
	"io"
	"net"
	"runtime"
	"strconv"
	"sync"
	"testing"
)

// The connection's reading goroutine never writes to the socket
// (batch.go): while it is in a Write, nothing is read, and a client that
// writes before it reads (PINGs, SETTINGS, a request body) can deadlock
// the connection until send_timeout, or for ever. Every connection the
// engine serves in these tests goes through readerWriteCheck, so every
// script, scenario and test checks the rule.

// serveChecked has s serve nc on the calling goroutine, which becomes
// the connection's reading goroutine (ServeConn reads on it), and fails
// t if that goroutine writes to nc.
func serveChecked(t *testing.T, s *Server, nc net.Conn) {
	w := &readerWriteCheck{Conn: nc, reader: goroutineID()}
	s.ServeConn(context.Background(), w)
	w.mu.Lock()
	defer w.mu.Unlock()
	if w.writes > 0 {
		t.Errorf("the connection's reading goroutine wrote to the socket %d times; the first:\n%s", w.writes, w.stack)
	}
}

// readerWriteCheck counts the writes made on the reading goroutine.
type readerWriteCheck struct {
	net.Conn
	reader uint64

	mu     sync.Mutex
	writes int
	stack  []byte
}

// ConnectionState is the TLS connection's, when it is one (the engine
// reads it for the request's TLS field).
func (w *readerWriteCheck) ConnectionState() (cs tls.ConnectionState) {
	if c, ok := w.Conn.(interface{ ConnectionState() tls.ConnectionState }); ok {
		return c.ConnectionState()
	}
	return cs
}

// NetConn is the connection beneath TLS, when nc is a TLS connection (the
// engine closes it at once after a failed write).
func (w *readerWriteCheck) NetConn() net.Conn {
	if c, ok := w.Conn.(interface{ NetConn() net.Conn }); ok {
		return c.NetConn()
	}
	return w.Conn
}

func (w *readerWriteCheck) Write(p []byte) (int, error) {
	if goroutineID() == w.reader {
		buf := make([]byte, 16<<10)
		buf = buf[:runtime.Stack(buf, false)]
		w.mu.Lock()
		if w.writes++; w.writes == 1 {
			w.stack = buf
		}
		w.mu.Unlock()
	}
	return w.Conn.Write(p)
}

// goroutineID is the calling goroutine's number, from its stack's first
// line ("goroutine 123 [running]:").
func goroutineID() uint64 {
	var buf [64]byte
	b := buf[:runtime.Stack(buf[:], false)]
	b = bytes.TrimPrefix(b, []byte("goroutine "))
	b = b[:bytes.IndexByte(b, ' ')]
	id, _ := strconv.ParseUint(string(b), 10, 64)
	return id
}

func TestReaderWriteCheckSeesWrites(t *testing.T) {
	// the check must be able to fail: a write from the goroutine that
	// created it is counted, one from another goroutine is not
	a, b := net.Pipe()
	defer a.Close()
	defer b.Close()
	go io.Copy(io.Discard, b)
	w := &readerWriteCheck{Conn: a, reader: goroutineID()}
	w.Write([]byte("x"))
	done := make(chan struct{})
	go func() { w.Write([]byte("y")); close(done) }()
	<-done
	if w.writes != 1 || !bytes.Contains(w.stack, []byte("TestReaderWriteCheckSeesWrites")) {
		t.Fatalf("writes %d, stack:\n%s", w.writes, w.stack)
	}
}
