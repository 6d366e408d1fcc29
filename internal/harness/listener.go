package harness

import (
	"net"
	"os"
)

// OneConnListener is a listener that accepts Conn once, then reports that
// it is closed.
type OneConnListener struct {
	net.Listener
	Conn net.Conn
}

// Accept returns Conn the first time.
func (l *OneConnListener) Accept() (net.Conn, error) {
	if l.Conn == nil {
		return nil, os.ErrClosed
	}
	c := l.Conn
	l.Conn = nil
	return c, nil
}
