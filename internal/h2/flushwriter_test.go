package h2

import (
	"context"
	"errors"
	"net"
	"net/http"
	"sync"
	"testing"
	"time"

	"github.com/h2file/caddy-h2file/internal/harness"
)

// addingConn is a connection whose every Write, up to adds of them, has
// another stream add frames to the batch meanwhile, as busy streams do.
type addingConn struct {
	net.Conn
	c *conn

	mu     sync.Mutex
	adds   int
	writes []uint64 // the goroutine of each write
}

func (a *addingConn) Write(p []byte) (int, error) {
	a.mu.Lock()
	a.writes = append(a.writes, goroutineID())
	add := len(a.writes) <= a.adds
	a.mu.Unlock()
	if add {
		a.c.mu.Lock()
		a.c.batch.ensure()
		a.c.batch.buf = append(a.c.batch.buf, make([]byte, 100)...)
		a.c.mu.Unlock()
	}
	return len(p), nil
}

func (a *addingConn) written() []uint64 {
	a.mu.Lock()
	defer a.mu.Unlock()
	return append([]uint64(nil), a.writes...)
}

// TestHandlerWritesItsOwnBatch: a handler's flush writes the batch that
// holds its frames, once; what other streams keep adding during its
// writes goes by a goroutine of the connection's. Writing until the
// batch was empty, the handler wrote the others' frames for as long as
// they kept coming (here 5 writes more).
func TestHandlerWritesItsOwnBatch(t *testing.T) {
	s := NewServer(http.NotFoundHandler(), Config{})
	srv, cli := net.Pipe()
	defer srv.Close()
	defer cli.Close()
	nc := &addingConn{Conn: srv, adds: 5}
	c := newConn(s, context.Background(), nc)
	nc.c = c
	me := goroutineID()
	c.mu.Lock()
	c.flushLocked() // the server's SETTINGS, from this goroutine
	c.mu.Unlock()
	harness.Poll(10*time.Second, func() error {
		if len(nc.written()) < 6 {
			return errors.New("fewer than 6 writes")
		}
		return nil
	})
	writes := nc.written()
	mine := 0
	for _, g := range writes {
		if g == me {
			mine++
		}
	}
	if len(writes) != 6 || mine != 1 {
		t.Errorf("%d writes, %d of them by the flushing handler; want 6, of which 1", len(writes), mine)
	}
	c.closeNow(errServerClosed)
}
