package h2file

import (
	"net"
	"os"
	"sync"
	"syscall"
	"testing"

	"go.uber.org/zap"

	"github.com/h2file/caddy-h2file/internal/harness"
)

// outOfFDsListener fails its first Accepts with EMFILE, as a process out
// of file descriptors for a moment does, then returns conn, then blocks
// until it is closed.
type outOfFDsListener struct {
	net.Listener // Addr only
	failures     int
	conn         net.Conn

	mu     sync.Mutex
	calls  int
	closed chan struct{}
}

func (l *outOfFDsListener) Accept() (net.Conn, error) {
	l.mu.Lock()
	l.calls++
	n := l.calls
	l.mu.Unlock()
	switch {
	case n <= l.failures:
		return nil, &net.OpError{Op: "accept", Net: "tcp", Err: os.NewSyscallError("accept4", syscall.EMFILE)}
	case n == l.failures+1:
		return l.conn, nil
	}
	<-l.closed
	return nil, net.ErrClosed
}

func (l *outOfFDsListener) Close() error {
	close(l.closed)
	return nil
}

// TestEngineListenerOutlivesEMFILE: the engine's accept loop backs off on
// EMFILE and accepts again, as net/http's Serve does, instead of ending
// the listener.
func TestEngineListenerOutlivesEMFILE(t *testing.T) {
	server, client := net.Pipe()
	defer client.Close()
	inner := &outOfFDsListener{failures: 3, conn: server, closed: make(chan struct{})}
	l := newEngineListener(inner, &EngineWrapper{logger: zap.NewNop()})
	go l.acceptLoop()
	defer l.Close()
	type accepted struct {
		c   net.Conn
		err error
	}
	a := harness.Recv(t, harness.Async(func() accepted {
		c, err := l.Accept()
		return accepted{c, err}
	}), "Accept after 3 EMFILE errors")
	if a.err != nil || a.c != server {
		t.Fatalf("Accept after 3 EMFILE errors: %v, %v; want the connection accepted next", a.c, a.err)
	}
}
