package attacker

// Attacks on HTTP/1.1 over TLS.

import (
	"context"
	"crypto/tls"
	"fmt"
	"io"
	"net"
	"time"

	"github.com/h2file/caddy-h2file/internal/harness"
)

// h1Attack is an attack whose attackers each send one GET per
// connection (ALPN http/1.1), read up to readBytes of the response, and
// close the connection with a TCP reset, over and over.
func h1Attack(name string, conns int, readBytes int64) Attack {
	run := func(ctx context.Context, addr, path string, st *Stats) error {
		var last error
		buf := make([]byte, 16<<10)
		for ctx.Err() == nil {
			if err := h1Once(ctx, addr, path, readBytes, buf, st); err != nil {
				last = err
				pause(ctx)
			}
		}
		return last
	}
	return Attack{Name: name, Conns: conns, run: run}
}

// h1Once sends one GET of path on a new connection, reads up to
// readBytes of the response, and resets the connection.
func h1Once(ctx context.Context, addr, path string, readBytes int64, buf []byte, st *Stats) error {
	d := net.Dialer{Timeout: 10 * time.Second}
	raw, err := d.DialContext(ctx, "tcp", addr)
	if err != nil {
		return err
	}
	defer func() {
		raw.(*net.TCPConn).SetLinger(0) //nolint:errcheck // best effort: a reset, not a FIN
		raw.Close()
	}()
	raw.SetDeadline(time.Now().Add(10 * time.Second)) //nolint:errcheck // a fresh connection
	cfg := harness.InsecureTLS()
	cfg.NextProtos = []string{"http/1.1"}
	tc := tls.Client(raw, cfg)
	if err := tc.HandshakeContext(ctx); err != nil {
		return err
	}
	st.Dials.Add(1)
	if _, err := fmt.Fprintf(tc, "GET %s HTTP/1.1\r\nHost: %s\r\n\r\n", path, addr); err != nil {
		return err
	}
	st.Requests.Add(1)
	if readBytes > 0 {
		n, err := io.CopyBuffer(io.Discard, io.LimitReader(tc, readBytes), buf)
		st.Received.Add(n)
		return err
	}
	return nil
}

// AbandonMidResponse fetches a file on each of conns connections at a
// time, reads readBytes of each response, and resets the connection.
func AbandonMidResponse(conns int, readBytes int64) Attack {
	return h1Attack("HTTP/1.1, abandoned mid-response", conns, readBytes)
}

// CloseBeforeBody sends a GET on each of conns connections at a time and
// resets the connection before reading any of the response.
func CloseBeforeBody(conns int) Attack {
	return h1Attack("HTTP/1.1, closed before the body", conns, 0)
}
