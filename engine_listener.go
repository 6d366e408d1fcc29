package h2file

import (
	"context"
	"errors"
	"net"
	"sync"
	"time"

	"go.uber.org/zap"

	"github.com/h2file/caddy-h2file/internal/h2/wire"
)

// engineListener accepts connections on its own goroutine, finishes their
// TLS handshakes, serves those that negotiated h2 with the engine, and
// returns the others from Accept, as net/http would have accepted them.
type engineListener struct {
	net.Listener
	w     *EngineWrapper
	conns chan net.Conn // for net/http

	closeOnce sync.Once
	closed    chan struct{}

	mu          sync.Mutex
	acceptErr   error
	handshaking map[net.Conn]struct{}
}

// newEngineListener returns w's listener on ln, its accept loop not yet
// started.
func newEngineListener(ln net.Listener, w *EngineWrapper) *engineListener {
	return &engineListener{
		Listener:    ln,
		w:           w,
		conns:       make(chan net.Conn),
		closed:      make(chan struct{}),
		handshaking: make(map[net.Conn]struct{}),
	}
}

// Accept returns the next connection that is not the engine's.
func (l *engineListener) Accept() (net.Conn, error) {
	select {
	case c := <-l.conns:
		return c, nil
	case <-l.closed:
		l.mu.Lock()
		defer l.mu.Unlock()
		if l.acceptErr != nil {
			return nil, l.acceptErr
		}
		return nil, net.ErrClosed
	}
}

// Close stops accepting and closes the connections still in their
// handshake; the engine's connections are drained by the server's
// shutdown, not here.
func (l *engineListener) Close() error {
	err := l.Listener.Close()
	l.stop(nil)
	return err
}

func (l *engineListener) stop(acceptErr error) {
	l.closeOnce.Do(func() {
		l.mu.Lock()
		l.acceptErr = acceptErr
		for c := range l.handshaking {
			c.Close()
		}
		l.mu.Unlock()
		close(l.closed)
	})
}

// temporary is what net/http's Serve asks of an Accept error before it
// backs off and accepts again (net.Error's Temporary, deprecated for
// other uses): EMFILE and ENFILE among others.
type temporary interface{ Temporary() bool }

// acceptLoop accepts until the listener fails, backing off on temporary
// errors (a process out of file descriptors for a moment) as net/http
// does.
func (l *engineListener) acceptLoop() {
	var delay time.Duration
	for {
		c, err := l.Listener.Accept()
		if err != nil {
			var te temporary
			if errors.As(err, &te) && te.Temporary() {
				delay = min(max(2*delay, 5*time.Millisecond), time.Second)
				l.w.logger.Error("accepting a connection", zap.Error(err), zap.Duration("retry_in", delay))
				select {
				case <-time.After(delay):
					continue
				case <-l.closed:
					return
				}
			}
			l.stop(err)
			return
		}
		delay = 0
		if !l.track(c) {
			c.Close()
			return
		}
		go l.handshake(c)
	}
}

func (l *engineListener) track(c net.Conn) bool {
	l.mu.Lock()
	defer l.mu.Unlock()
	select {
	case <-l.closed:
		return false
	default:
	}
	l.handshaking[c] = struct{}{}
	return true
}

func (l *engineListener) untrack(c net.Conn) {
	l.mu.Lock()
	delete(l.handshaking, c)
	l.mu.Unlock()
}

// handshake finishes c's TLS handshake and serves it with the engine if
// it negotiated h2 (and meets RFC 9113 §9.2); any other connection goes to
// Accept, its deadlines cleared, with a failed handshake's error cached
// for net/http to log.
func (l *engineListener) handshake(c net.Conn) {
	hc, ok := c.(tlsHandshaker)
	if !ok {
		l.untrack(c)
		l.pass(c)
		return
	}
	if d := l.w.handshakeTimeout(); d > 0 {
		c.SetDeadline(time.Now().Add(d))
	}
	ctx, cancel := context.WithCancel(context.Background())
	go func() {
		select {
		case <-l.closed:
			cancel()
		case <-ctx.Done():
		}
	}()
	err := hc.HandshakeContext(ctx)
	cancel()
	l.untrack(c)
	c.SetDeadline(time.Time{})
	if err != nil {
		l.pass(c)
		return
	}
	st := hc.ConnectionState()
	if st.NegotiatedProtocol != "h2" || wire.TLSProblem(st) != "" {
		l.pass(c)
		return
	}
	l.w.engine.ServeConn(l.w.baseContext(), c)
}

// pass hands c to net/http through Accept, or closes it if the listener
// is closed.
func (l *engineListener) pass(c net.Conn) {
	select {
	case l.conns <- c:
	case <-l.closed:
		c.Close()
	}
}
