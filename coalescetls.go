package h2file

import (
	"context"
	"crypto/tls"
	"io"
	"net"
	"sync/atomic"
	"time"

	"go.uber.org/zap"
	"go.uber.org/zap/zapcore"
)

// tlsConnectionStater is a connection with TLS state, like *tls.Conn.
type tlsConnectionStater interface {
	ConnectionState() tls.ConnectionState
}

// tlsCoalesceConn is a coalesceConn above TLS: it has the wrapped
// connection's TLS state, and since the HTTP/2 server cannot see that
// state through it, enforces HTTP/2's TLS requirements in its place.
type tlsCoalesceConn struct {
	*coalesceConn
	stater     tlsConnectionStater
	handshaker interface{ HandshakeContext(context.Context) error } // nil if the connection has no handshake to wait for
	checked    atomic.Bool
}

// ConnectionState returns the wrapped connection's TLS state.
func (c *tlsCoalesceConn) ConnectionState() tls.ConnectionState {
	return c.stater.ConnectionState()
}

// Read reads from the wrapped connection. The first Read completes the
// TLS handshake (as the wrapped connection's Read would) and then, if
// HTTP/2 was negotiated over TLS that HTTP/2 forbids, rejects the
// connection as the HTTP/2 server does when it sees the TLS state: with
// a GOAWAY frame of type INADEQUATE_SECURITY, sent before reading
// anything.
func (c *tlsCoalesceConn) Read(p []byte) (int, error) {
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

// checkH2 rejects the connection, once the handshake is complete, if it
// negotiated HTTP/2 over TLS that HTTP/2 forbids.
func (c *tlsCoalesceConn) checkH2() error {
	if !c.checked.CompareAndSwap(false, true) {
		return nil
	}
	reason := coalesceH2TLSProblem(c.stater.ConnectionState())
	if reason == "" {
		return nil
	}
	if ce := c.limits.logger.Check(zapcore.DebugLevel, "coalesce: rejecting HTTP/2 connection"); ce != nil {
		ce.Write(zap.Stringer("remote", c.RemoteAddr()), zap.String("reason", reason))
	}
	_, _ = c.Write(coalesceGoAway(coalesceErrCodeInadequateSecurity, reason))
	_ = c.Close()
	return io.EOF
}

const coalesceErrCodeInadequateSecurity = 0xc

// coalesceH2TLSProblem says why HTTP/2 must not be spoken over a
// connection in TLS state st (RFC 9113 §9.2), or "". It makes the same
// decisions as golang.org/x/net/http2 for every cipher suite crypto/tls
// implements: TLS 1.2 or later, and in TLS 1.2 only ephemeral key
// exchange with an AEAD cipher.
func coalesceH2TLSProblem(st tls.ConnectionState) string {
	if st.NegotiatedProtocol != "h2" {
		return ""
	}
	if st.Version < tls.VersionTLS12 {
		return "TLS version too low"
	}
	if st.Version > tls.VersionTLS12 {
		return ""
	}
	switch st.CipherSuite {
	case tls.TLS_ECDHE_ECDSA_WITH_AES_128_GCM_SHA256,
		tls.TLS_ECDHE_RSA_WITH_AES_128_GCM_SHA256,
		tls.TLS_ECDHE_ECDSA_WITH_AES_256_GCM_SHA384,
		tls.TLS_ECDHE_RSA_WITH_AES_256_GCM_SHA384,
		tls.TLS_ECDHE_ECDSA_WITH_CHACHA20_POLY1305_SHA256,
		tls.TLS_ECDHE_RSA_WITH_CHACHA20_POLY1305_SHA256:
		return ""
	}
	return "Prohibited TLS 1.2 Cipher Suite: " + tls.CipherSuiteName(st.CipherSuite)
}

// coalesceGoAway encodes an HTTP/2 GOAWAY frame for stream 0.
func coalesceGoAway(code uint32, debug string) []byte {
	n := 8 + len(debug)
	f := make([]byte, 0, 9+n)
	f = append(f, byte(n>>16), byte(n>>8), byte(n), 0x7, 0, 0, 0, 0, 0) // length, type, flags, stream
	f = append(f, 0, 0, 0, 0)                                           // last stream ID
	f = append(f, byte(code>>24), byte(code>>16), byte(code>>8), byte(code))
	return append(f, debug...)
}

// Interface guards
var (
	_ net.Conn                                       = (*tlsCoalesceConn)(nil)
	_ tlsConnectionStater                            = (*tlsCoalesceConn)(nil)
	_ interface{ NetConn() net.Conn }                = (*tlsCoalesceConn)(nil)
	_ interface{ SetWriteDeadline(time.Time) error } = (*tlsCoalesceConn)(nil)
)
