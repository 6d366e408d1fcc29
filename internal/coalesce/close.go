package coalesce

// Closing a Conn, and the calls that first send what is pending:
// Close, CloseWrite and ReadFrom (see conn.go).

import (
	"io"
	"net"
	"os"
	"time"

	"go.uber.org/zap"
	"go.uber.org/zap/zapcore"
)

// Close sends what is pending, waiting at most the close timeout, and
// closes the wrapped connection. It returns the error of a failed socket
// write, if any.
func (c *Conn) Close() error {
	c.mu.Lock()
	if c.closed {
		c.mu.Unlock()
		return c.opError("close", net.ErrClosed)
	}
	c.closed = true
	c.releaseHeldLocked()
	flushing := c.flushing
	c.mu.Unlock()
	signal(c.wake)

	timedOut := false
	if flushing {
		t := time.NewTimer(c.limits.closeTimeout)
		select {
		case <-c.closeWait:
		case <-t.C:
			timedOut = true
		}
		t.Stop()
	}
	cerr := c.Conn.Close()
	if timedOut {
		<-c.closeWait // closing the connection ends the flusher's write
		if ce := c.limits.logger.Check(zapcore.DebugLevel, "coalesce: pending bytes not sent before close timeout"); ce != nil {
			ce.Write(zap.Stringer("remote", c.RemoteAddr()))
		}
		return c.opError("close", os.ErrDeadlineExceeded)
	}
	c.mu.Lock()
	err := c.err
	c.mu.Unlock()
	if err != nil {
		return err
	}
	return cerr
}

// CloseWrite sends what is pending, then shuts down the writing side of
// the wrapped connection if it can.
func (c *Conn) CloseWrite() error {
	c.wmu.Lock()
	defer c.wmu.Unlock()
	c.mu.Lock()
	err := c.writeErrLocked()
	c.wclosed = true
	c.mu.Unlock()
	if err != nil {
		return err
	}
	if err := c.drain(time.Now().Add(c.limits.closeTimeout)); err != nil {
		return err
	}
	if cw, ok := c.Conn.(interface{ CloseWrite() error }); ok {
		return cw.CloseWrite()
	}
	return nil
}

// ReadFrom sends what is pending, then copies from r; straight into the
// wrapped connection if it has ReadFrom, so that sendfile still works.
func (c *Conn) ReadFrom(r io.Reader) (int64, error) {
	rf, ok := c.Conn.(io.ReaderFrom)
	if !ok {
		return io.Copy(writerOnly{c}, r)
	}
	c.wmu.Lock()
	defer c.wmu.Unlock()
	c.mu.Lock()
	err, dl := c.writeErrLocked(), c.wdl
	c.mu.Unlock()
	if err != nil {
		return 0, err
	}
	if err := c.drain(dl); err != nil {
		return 0, err
	}
	c.mu.Lock()
	c.direct = true
	if !c.wdl.Equal(c.innerDL) {
		err = c.Conn.SetWriteDeadline(c.wdl)
		c.innerDL = c.wdl
	}
	c.mu.Unlock()
	defer func() {
		c.mu.Lock()
		c.direct = false
		c.mu.Unlock()
	}()
	if err != nil {
		return 0, err
	}
	return rf.ReadFrom(r)
}

// writerOnly hides ReadFrom from io.Copy.
type writerOnly struct{ io.Writer }

// drain waits until nothing is pending, or the deadline dl (zero: none)
// passes. The caller holds wmu, so no Write adds bytes meanwhile.
func (c *Conn) drain(dl time.Time) error {
	for {
		c.mu.Lock()
		c.releaseHeldLocked()
		busy, err := c.flushing, c.err
		if err == nil && c.closed {
			err = c.opError("write", net.ErrClosed)
		}
		c.mu.Unlock()
		switch {
		case err != nil:
			return err
		case !busy:
			return nil
		case !dl.IsZero() && !time.Now().Before(dl):
			return c.opError("write", os.ErrDeadlineExceeded)
		}
		c.waitWake(dl)
	}
}
