package h2

import (
	"context"
	"net"
	"net/http"
	"sync"
)

// Server serves HTTP/2 connections with one http.Handler. It keeps the
// connections it serves, so that Shutdown can drain them and Close end
// them: net/http's own Shutdown never sees these connections.
type Server struct {
	handler http.Handler
	cfg     Config

	mu           sync.Mutex
	conns        map[*conn]struct{}
	shuttingDown bool
	drained      chan struct{} // closed when shuttingDown and conns is empty

	// onHeadersRead, for tests, runs when processHeaders begins, after
	// processFrame has released the connection's lock
	onHeadersRead func(*conn)
	// onHeadersUnlocked, for tests, runs while processHeaders has
	// released the connection's lock between reading a new stream's ID
	// and opening the stream
	onHeadersUnlocked func(*conn)
	// onPrefaceRead, for tests, runs when the client preface has been
	// read, before the connection's idle timer is armed
	onPrefaceRead func(*conn)
	// onNoDeadlineSeen, for tests, runs when the deadline watch has
	// found no deadline on a connection's streams, before it unlists the
	// connection (deadlines.go)
	onNoDeadlineSeen func(*conn)
}

// NewServer returns a Server that serves h with cfg (zero fields take
// their defaults).
func NewServer(h http.Handler, cfg Config) *Server {
	return &Server{
		handler: h,
		cfg:     cfg.withDefaults(),
		conns:   make(map[*conn]struct{}),
		drained: make(chan struct{}),
	}
}

// ServeConn serves HTTP/2 on nc until the connection ends: the client
// preface is read from nc, so ALPN must have chosen h2 (or the client
// speaks HTTP/2 with prior knowledge). ctx carries the values every
// request's context starts with (http.ServerContextKey and the like);
// its cancellation is not watched: Shutdown and Close end connections.
// ServeConn closes nc before it returns.
func (s *Server) ServeConn(ctx context.Context, nc net.Conn) {
	c := newConn(s, ctx, nc)
	if !s.track(c) {
		c.closeNow(errServerClosed)
		return
	}
	defer s.untrack(c)
	stats.open.Add(1)
	defer stats.open.Add(-1)
	c.serve()
}

// track registers c, or reports false when the server is shutting down
// (the connection is then refused: checked under the same lock that
// Shutdown takes, so no connection slips past it).
func (s *Server) track(c *conn) bool {
	s.mu.Lock()
	defer s.mu.Unlock()
	if s.shuttingDown {
		return false
	}
	s.conns[c] = struct{}{}
	return true
}

func (s *Server) untrack(c *conn) {
	s.mu.Lock()
	defer s.mu.Unlock()
	delete(s.conns, c)
	if s.shuttingDown && len(s.conns) == 0 {
		select {
		case <-s.drained:
		default:
			close(s.drained)
		}
	}
}

// Shutdown sends GOAWAY (NO_ERROR) on every connection, refuses new
// ones, and waits until every connection has finished its streams and
// closed, or until ctx is done: then, as net/http's Shutdown, it returns
// ctx's error and leaves the connections to finish their streams (each
// closes a second after its last one); Close ends them at once.
func (s *Server) Shutdown(ctx context.Context) error {
	conns := s.startShutdown()
	for _, c := range conns {
		c.startGracefulShutdown()
	}
	select {
	case <-s.drained:
		return nil
	case <-ctx.Done():
		return ctx.Err()
	}
}

// Close closes every connection at once (their streams fail) and refuses
// new ones.
func (s *Server) Close() error {
	for _, c := range s.startShutdown() {
		c.closeNow(errServerClosed)
	}
	return nil
}

// startShutdown marks the server shutting down and returns its
// connections.
func (s *Server) startShutdown() []*conn {
	s.mu.Lock()
	defer s.mu.Unlock()
	s.shuttingDown = true
	if len(s.conns) == 0 {
		select {
		case <-s.drained:
		default:
			close(s.drained)
		}
	}
	conns := make([]*conn, 0, len(s.conns))
	for c := range s.conns {
		conns = append(conns, c)
	}
	return conns
}

// Wait waits until Shutdown or Close has ended every connection, or ctx
// is done (then it returns ctx's error).
func (s *Server) Wait(ctx context.Context) error {
	select {
	case <-s.drained:
		return nil
	case <-ctx.Done():
		return ctx.Err()
	}
}

// Conns returns how many connections the server is serving.
func (s *Server) Conns() int {
	s.mu.Lock()
	defer s.mu.Unlock()
	return len(s.conns)
}
