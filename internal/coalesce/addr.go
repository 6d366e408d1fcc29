package coalesce

import (
	"context"
	"net"
	"net/http"
)

// Addr is the local address of a coalescing connection: the wrapped
// connection's, marked, so that a handler can see through
// http.LocalAddrContextKey that its connection batches writes (below TLS,
// tls.Conn reports its connection's local address).
type Addr struct {
	net.Addr
	peer *Peer // nil below TLS
}

// NewAddr marks a as a coalescing connection's local address, with what
// the connection learnt of the client's windows (nil: nothing).
func NewAddr(a net.Addr, peer *Peer) Addr { return Addr{Addr: a, peer: peer} }

// AddrFrom returns the local address of the request whose context is ctx,
// if its connection is a coalescing one.
func AddrFrom(ctx context.Context) (Addr, bool) {
	a, ok := ctx.Value(http.LocalAddrContextKey).(Addr)
	return a, ok
}

// Peer returns what the connection learnt of the client's HTTP/2 windows:
// nil below TLS, or for a connection that is not HTTP/2.
func (a Addr) Peer() *Peer { return a.peer }
