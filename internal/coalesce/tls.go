package coalesce

import (
	"context"
	"crypto/tls"
	"io"
	"net"
	"sync/atomic"
	"time"

	"go.uber.org/zap"
	"go.uber.org/zap/zapcore"

	"github.com/h2file/caddy-h2file/internal/h2/wire"
)

// tlsConnectionStater is a connection with TLS state, like *tls.Conn.
type tlsConnectionStater interface {
	ConnectionState() tls.ConnectionState
}

// tlsConn is a Conn above TLS: it has the wrapped
// connection's TLS state, and since the HTTP/2 server cannot see that
// state through it, enforces HTTP/2's TLS requirements in its place.
//
// Behind it, Caddy serves the connection through net/http's h2c path,
// which picks HTTP/2 by the first bytes (the client preface) where a
// *tls.Conn is served by its ALPN result. With sniff set (by the
// listener), the first Reads make ALPN decide, as on a *tls.Conn: they
// read ahead until the bytes are the client preface or cannot become it,
// then reject a connection that negotiated h2 without the preface, or
// the preface without h2, and hand everything else on unchanged.
type tlsConn struct {
	*Conn
	stater     tlsConnectionStater
	handshaker interface{ HandshakeContext(context.Context) error } // nil if the connection has no handshake to wait for
	checked    atomic.Bool

	sniff bool        // decide the protocol by ALPN on the first Reads
	read  atomic.Bool // the first Reads are over: read straight through

	// The first Reads' state; Reads are not concurrent.
	decided  bool
	rejected bool                    // closed by the first Reads: they return io.EOF
	head     [len(wire.Preface)]byte // bytes read ahead
	headN    int
	headOff  int   // bytes of head already returned
	headErr  error // what the read ahead ended with, returned after head
	// scan looks at the client's opening frames after the preface, for
	// Conn.peer; nil once it is over (or when not HTTP/2)
	scan *peerScanner
}

// ConnectionState returns the wrapped connection's TLS state.
func (c *tlsConn) ConnectionState() tls.ConnectionState {
	return c.stater.ConnectionState()
}

// Read reads from the wrapped connection. The first Read completes the
// TLS handshake (as the wrapped connection's Read would) and then, if
// HTTP/2 was negotiated over TLS that HTTP/2 forbids, rejects the
// connection as the HTTP/2 server does when it sees the TLS state: with
// a GOAWAY frame of type INADEQUATE_SECURITY, sent before reading
// anything. With sniff set, the first Reads also make the ALPN result
// decide the protocol (see tlsConn).
func (c *tlsConn) Read(p []byte) (int, error) {
	if c.read.Load() {
		return c.Conn.Read(p)
	}
	if !c.sniff {
		return c.readChecked(p)
	}
	if c.rejected {
		return 0, io.EOF
	}
	if !c.decided {
		if err := c.decide(); err != nil {
			return 0, err
		}
	}
	if c.headOff == c.headN {
		if c.headErr != nil {
			// the read ahead ended with an error: return it once
			err := c.headErr
			c.headErr = nil
			c.read.Store(true)
			return 0, err
		}
		// the client's opening frames pass by the scan
		n, err := c.Conn.Read(p)
		if c.scan == nil || c.scan.feed(c.Conn.peer, p[:n]) || err != nil {
			c.scan = nil
			c.read.Store(true)
		}
		return n, err
	}
	if len(p) == 0 {
		return 0, nil
	}
	n := copy(p, c.head[c.headOff:c.headN])
	c.headOff += n
	if c.headOff == c.headN && c.headErr == nil && c.scan == nil {
		c.read.Store(true)
	}
	return n, nil
}

// readChecked is Read without sniffing.
func (c *tlsConn) readChecked(p []byte) (int, error) {
	if c.checked.Load() {
		return c.Conn.Read(p)
	}
	if c.handshaker != nil {
		if err := c.handshaker.HandshakeContext(context.Background()); err != nil {
			return 0, err
		}
		if err := c.checkH2(); err != nil {
			return 0, err
		}
		return c.Conn.Read(p)
	}
	n, err := c.Conn.Read(p)
	if n > 0 {
		if err := c.checkH2(); err != nil {
			return 0, err
		}
	}
	return n, err
}

// decide completes the handshake, reads ahead until the bytes read are
// the client preface or cannot become it (or reading fails), and then
// rejects the connection if HTTP/2 is forbidden over its TLS, if it
// negotiated h2 but does not start with the preface (x/net's server
// closes it then), or if it starts with the preface but did not
// negotiate h2 (over TLS, only ALPN selects HTTP/2: RFC 9113 §3.3).
// Rejecting closes the connection and returns io.EOF. An HTTP/1.x
// request other than PRI differs from the preface within its first two
// bytes, so for it this is one Read; a client sending the preface is
// waited for only as long as the h2c path would wait for it.
func (c *tlsConn) decide() error {
	if c.handshaker != nil {
		if err := c.handshaker.HandshakeContext(context.Background()); err != nil {
			return err // not decided: the next Read fails the same way
		}
		if err := c.checkH2(); err != nil {
			c.decided, c.rejected = true, true
			return err
		}
	}
	c.decided = true
	for empty := 0; c.headN < len(c.head) && string(c.head[:c.headN]) == wire.Preface[:c.headN]; {
		n, err := c.Conn.Read(c.head[c.headN:])
		c.headN += n
		if err == nil && n == 0 {
			if empty++; empty == 100 { // as bufio.Reader gives up
				err = io.ErrNoProgress
			}
		}
		if err != nil {
			c.headErr = err
			break
		}
	}
	if err := c.checkH2(); err != nil { // no handshaker: the first Read made it
		c.rejected = true
		return err
	}
	preface := string(c.head[:c.headN]) == wire.Preface
	var reason string
	switch h2 := c.stater.ConnectionState().NegotiatedProtocol == "h2"; {
	case h2 && !preface:
		reason = "ALPN h2 without the HTTP/2 connection preface"
	case !h2 && preface:
		reason = "HTTP/2 connection preface without ALPN h2"
	case h2:
		c.scan = new(peerScanner)
		return nil
	default:
		return nil
	}
	if ce := c.limits.logger.Check(zapcore.DebugLevel, "coalesce: closing connection"); ce != nil {
		ce.Write(zap.Stringer("remote", c.RemoteAddr()), zap.String("reason", reason))
	}
	c.rejected = true
	_ = c.Close()
	if c.headErr != nil {
		return c.headErr
	}
	return io.EOF
}

// checkH2 rejects the connection, once the handshake is complete, if it
// negotiated HTTP/2 over TLS that HTTP/2 forbids.
func (c *tlsConn) checkH2() error {
	if !c.checked.CompareAndSwap(false, true) {
		return nil
	}
	reason := wire.TLSProblem(c.stater.ConnectionState())
	if reason == "" {
		return nil
	}
	if ce := c.limits.logger.Check(zapcore.DebugLevel, "coalesce: rejecting HTTP/2 connection"); ce != nil {
		ce.Write(zap.Stringer("remote", c.RemoteAddr()), zap.String("reason", reason))
	}
	_, _ = c.Write(wire.AppendGoAway(nil, 0, wire.ErrCodeInadequateSecurity, reason))
	_ = c.Close()
	return io.EOF
}

// Interface guards
var (
	_ net.Conn                                       = (*tlsConn)(nil)
	_ tlsConnectionStater                            = (*tlsConn)(nil)
	_ interface{ NetConn() net.Conn }                = (*tlsConn)(nil)
	_ interface{ SetWriteDeadline(time.Time) error } = (*tlsConn)(nil)
)
