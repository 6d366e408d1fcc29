package h2

import (
	"errors"
	"net"
	"os"
	"sync"
	"time"

	"github.com/h2file/caddy-h2file/internal/h2/wire"
)

// maxBatch is how many bytes of frames a connection holds before the
// goroutines that add more wait for the write under way: it bounds a
// connection's write memory (the batch being added to and the one being
// written) and makes every write but the last of a burst a large one.
const maxBatch = 256 << 10

// maxKeptBatch is the largest batch buffer kept for reuse.
const maxKeptBatch = 2 * maxBatch

var batchPool = sync.Pool{New: func() any { b := make([]byte, 0, 64<<10); return &b }}

// batch is the frames waiting to be written to a connection.
type batch struct {
	buf    []byte
	pooled *[]byte // what batchPool gave for buf, put back with it after its write

	// After a GOAWAY with an error nothing more is written (x/net's
	// rule, RFC 9113 §6.8), whatever is added meanwhile: the DATA of a
	// stream in line, a window given back, a handler's frames.
	end    int  // where that GOAWAY ends in buf (0: none in buf)
	sealed bool // it went to a write: what is added is dropped

	// blockExcess is how far header blocks took buf past maxBatch: a
	// handler's header block is added whole once the batch is below
	// maxBatch (waitRoomLocked), and is not the reading goroutine's
	// backlog (backlogLocked)
	blockExcess int
}

// seal has the frames added after the last one (a GOAWAY with an error)
// dropped instead of written.
func (b *batch) seal() { b.end = len(b.buf) }

// take hands what is to be written over to the writer, which puts
// pooled back after the write: after seal, the frames up to the GOAWAY,
// then nothing.
func (b *batch) take() (buf []byte, pooled *[]byte) {
	buf, pooled = b.buf, b.pooled
	b.buf, b.pooled, b.blockExcess = nil, nil, 0
	switch {
	case b.sealed:
		buf = buf[:0]
	case b.end > 0:
		buf, b.sealed = buf[:b.end], true
	}
	b.end = 0
	return buf, pooled
}

func (b *batch) ensure() {
	if b.buf == nil {
		b.pooled = batchPool.Get().(*[]byte)
		b.buf = (*b.pooled)[:0]
	}
}

func (b *batch) appendFrameHeader(length int, t wire.FrameType, flags wire.Flags, id uint32) {
	b.ensure()
	b.buf = wire.AppendFrameHeader(b.buf, wire.FrameHeader{Length: uint32(length), Type: t, Flags: flags, StreamID: id})
}

func (b *batch) appendWindowUpdate(id, n uint32) {
	b.appendFrameHeader(4, wire.FrameWindowUpdate, 0, id)
	b.buf = append(b.buf, byte(n>>24)&0x7f, byte(n>>16), byte(n>>8), byte(n))
}

func (b *batch) appendRSTStream(id uint32, code wire.ErrCode) {
	b.appendFrameHeader(4, wire.FrameRSTStream, 0, id)
	b.buf = append(b.buf, byte(code>>24), byte(code>>16), byte(code>>8), byte(code))
}

// asyncFlushMin is the batch size from which a handler's flush has the
// write (TLS encryption and the system call) done by a goroutine of its
// own, so that the handler reads its next bytes meanwhile; smaller
// batches are written at once by the handler that has them, with no hop.
const asyncFlushMin = 64 << 10

// Who writes the batch: whichever goroutine finds no write under way
// writes it, and what is added during its write after it; the lock is
// released during each write. A handler's goroutine may write (flushLocked);
// the connection's reading goroutine never does: it has a goroutine of
// its own write (kickLocked), so that it goes on reading whatever the
// socket does (a client that writes before it reads cannot deadlock the
// connection), and it never waits for room in the batch (maxBacklog
// bounds what it may add beyond maxBatch).

// flushLocked writes the batch, from a handler's goroutine, unless
// another goroutine is writing (it then writes what was added meanwhile
// once its write returns). It is called with c.mu held, releases it
// during the write, and returns with it held: callers check again what
// they were waiting for. A batch of asyncFlushMin or more is written by
// a goroutine of its own, and so is what other streams added during the
// handler's write: a handler writes the batch that holds its frames, not
// the connection's for as long as others keep adding to it (which would
// hold back its next bytes, its end, and its wait for the body).
func (c *conn) flushLocked() {
	c.flushPending = false
	if len(c.batch.buf) >= asyncFlushMin {
		c.kickLocked()
		return
	}
	c.writeBatchesLocked(1)
	c.kickLocked()
}

// kickLocked has the batch written by a goroutine of its own, unless a
// write is under way (whose goroutine writes what was added) or the
// batch is empty. It never releases the lock.
func (c *conn) kickLocked() {
	if c.inWrite || len(c.batch.buf) == 0 || c.closed {
		return
	}
	c.flushPending = false
	c.inWrite = true
	go c.flushAsync()
}

// flushAsync writes batches until none is left.
func (c *conn) flushAsync() {
	c.mu.Lock()
	defer c.mu.Unlock()
	c.inWrite = false
	c.writeBatchesLocked(-1)
}

// writeBatchesLocked writes the batch, and what is added during each
// write, until it is empty or limit batches are written (limit < 0: no
// limit), unless another goroutine is writing. After each write, room is
// free again: the line goes on (what it adds is written by this loop).
func (c *conn) writeBatchesLocked(limit int) {
	for n := 0; n != limit && !c.inWrite && len(c.batch.buf) > 0 && !c.closed; n++ {
		buf, pooled := c.batch.take()
		c.inWrite = true
		c.mu.Unlock()
		var err error
		if len(buf) > 0 {
			c.refreshWriteDeadline()
			_, err = c.nc.Write(buf)
		}
		c.mu.Lock()
		if cap(buf) <= maxKeptBatch {
			if pooled == nil {
				pooled = new([]byte) // a batch begun by append, not ensure
			}
			*pooled = buf[:0]
			batchPool.Put(pooled)
		}
		if err != nil {
			c.inWrite = false
			if errors.Is(err, os.ErrDeadlineExceeded) {
				stats.sendTimeouts.Add(1) // the only write deadline is WriteProgressTimeout's
			}
			c.mu.Unlock()
			c.logDebug("writing", err)
			c.closeBeneathTLS()
			c.closeNow(errClientGone)
			c.mu.Lock()
			return
		}
		c.dispatchLocked()
		c.roomCond.Broadcast()
		c.inWrite = false
	}
	c.closeIfDrainedLocked()
}

// closeBeneathTLS closes the connection under nc when nc is a TLS
// connection, for a write that failed: closing the *tls.Conn itself would
// first send a close_notify alert, which waits up to 5 s (crypto/tls's own
// deadline) for a client that reads nothing, keeping the connection, its
// descriptor and its reader that long after send_timeout ended it; and
// after a failed write the alert may follow half a record anyway.
func (c *conn) closeBeneathTLS() {
	if tc, ok := c.nc.(interface{ NetConn() net.Conn }); ok {
		tc.NetConn().Close()
	}
}

// roomLocked is how many more bytes the batch may take now.
func (c *conn) roomLocked() int { return maxBatch - len(c.batch.buf) }

// maxBacklog is how far beyond maxBatch the reading goroutine may fill
// the batch with the frames it answers with (ACKs, WINDOW_UPDATE,
// RST_STREAM) while a write does not return: past it, the client has
// read nothing for that long while sending, and the connection is closed
// (as x/net closes one with too many control frames queued). It is
// checked before a SETTINGS or PING is answered and before a DATA frame
// is taken (whose window may be given back at once); the RST_STREAMs the
// reader sends for stream errors are counted by the flood meter
// (flood.go) instead. A client within its windows stays far below it: a
// WINDOW_UPDATE answers 4 KiB or more (inflowMinRefresh), so the 1 MiB
// windows it may send without reading are worth a few hundred.
const maxBacklog = maxBatch

var errNotReading = errors.New("h2: the client sends frames to answer and reads none of the answers")

// backlogLocked is errNotReading once the batch holds maxBacklog beyond
// maxBatch, for the reading goroutine, before it adds an answer.
func (c *conn) backlogLocked() error {
	if len(c.batch.buf) > maxBatch+maxBacklog+c.batch.blockExcess {
		return errNotReading
	}
	return nil
}

// waitRoomLocked waits, for st's handler, until the batch is below
// maxBatch, or st or the connection is closed (a reset at st's write
// deadline, or by the client, wakes it: closeStreamLocked). x/net's
// handler waits for its stream's close too, which for a reset of its
// own comes only once the RST_STREAM is written: behind a stuck socket,
// never.
func (c *conn) waitRoomLocked(st *stream) {
	for len(c.batch.buf) >= maxBatch && !c.closed && !st.closed {
		if !c.inWrite {
			c.flushLocked()
			continue
		}
		c.roomWaiters++
		c.roomCond.Wait()
		c.roomWaiters--
	}
	c.batch.ensure()
}

// refreshWriteDeadline sets the socket's write deadline for the write
// about to start (WriteProgressTimeout), unless the one set before is
// still at least seven eighths of it away: a deadline set is a timer of
// the runtime's poller modified, and per write it made the runtime
// rescan the process's timers (see workers.go). A write thus fails
// between 7/8 and all of WriteProgressTimeout after it started. Called
// by the goroutine that writes (inWrite), the only one that touches
// writeDeadline.
func (c *conn) refreshWriteDeadline() {
	d := c.cfg.WriteProgressTimeout
	if d <= 0 {
		return
	}
	now := time.Now()
	if c.writeDeadline.Sub(now) >= d-d/8 {
		return
	}
	c.writeDeadline = now.Add(d)
	c.nc.SetWriteDeadline(c.writeDeadline)
}
