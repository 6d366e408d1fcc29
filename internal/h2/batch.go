package h2

import (
	"errors"
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
	buf []byte
}

func (b *batch) ensure() {
	if b.buf == nil {
		b.buf = (*batchPool.Get().(*[]byte))[:0]
	}
}

func (b *batch) appendFrameHeader(length int, t wire.FrameType, flags wire.Flags, id uint32) {
	b.ensure()
	b.buf = append(b.buf,
		byte(length>>16), byte(length>>8), byte(length),
		byte(t), byte(flags),
		byte(id>>24)&0x7f, byte(id>>16), byte(id>>8), byte(id))
}

func (b *batch) appendWindowUpdate(id, n uint32) {
	b.appendFrameHeader(4, wire.FrameWindowUpdate, 0, id)
	b.buf = append(b.buf, byte(n>>24)&0x7f, byte(n>>16), byte(n>>8), byte(n))
}

func (b *batch) appendRSTStream(id uint32, code wire.ErrCode) {
	b.appendFrameHeader(4, wire.FrameRSTStream, 0, id)
	b.buf = append(b.buf, byte(code>>24), byte(code>>16), byte(code>>8), byte(code))
}

// asyncFlushMin is the batch size from which its write (TLS encryption
// and the system call) goes to a goroutine of its own, so that the
// goroutine that filled it (a handler sending a large body) reads its next
// bytes meanwhile; smaller batches are written at once by the goroutine
// that has them, with no hop.
const asyncFlushMin = 64 << 10

// flushLocked writes the batch unless another goroutine is writing (it
// then writes what was added meanwhile once its write returns). It is
// called with c.mu held, releases it during the write, and returns with
// it held. A batch of asyncFlushMin or more is written by a new
// goroutine.
func (c *conn) flushLocked() {
	c.flushPending = false
	if len(c.batch.buf) >= asyncFlushMin && !c.writing() && !c.closed {
		c.inWrite = true
		go c.flushAsync()
		return
	}
	c.writeBatchesLocked()
}

// flushAsync writes batches until none is left.
func (c *conn) flushAsync() {
	c.mu.Lock()
	defer c.mu.Unlock()
	c.inWrite = false
	c.writeBatchesLocked()
}

// writeBatchesLocked writes the batch, and what is added during each
// write, until it is empty, unless another goroutine is writing.
func (c *conn) writeBatchesLocked() {
	for !c.writing() && len(c.batch.buf) > 0 && !c.closed {
		buf := c.batch.buf
		c.batch.buf = nil
		c.inWrite = true
		c.mu.Unlock()
		if c.cfg.WriteProgressTimeout > 0 {
			c.nc.SetWriteDeadline(time.Now().Add(c.cfg.WriteProgressTimeout))
		}
		_, err := c.nc.Write(buf)
		c.mu.Lock()
		c.inWrite = false
		if cap(buf) <= maxKeptBatch {
			buf = buf[:0]
			batchPool.Put(&buf)
		}
		c.wakeQueueLocked()
		c.roomCond.Broadcast()
		if err != nil {
			if errors.Is(err, os.ErrDeadlineExceeded) {
				stats.sendTimeouts.Add(1) // the only write deadline is WriteProgressTimeout's
			}
			c.mu.Unlock()
			c.logDebug("writing", err)
			c.closeNow(errClientGone)
			c.mu.Lock()
			return
		}
	}
}

func (c *conn) writing() bool { return c.inWrite }

// roomLocked is how many more bytes the batch may take now.
func (c *conn) roomLocked() int { return maxBatch - len(c.batch.buf) }

// waitRoomLocked waits, for the serve goroutine, until the batch is
// below maxBatch or the connection is closed.
func (c *conn) waitRoomLocked() {
	for len(c.batch.buf) >= maxBatch && !c.closed {
		if !c.writing() {
			c.flushLocked()
			continue
		}
		c.roomCond.Wait()
	}
	c.batch.ensure()
}

// deferredFlushDelay is how long frames may wait in the batch for the
// rest of their response (see writeChunk): a handler that wrote its whole
// declared body normally returns, and adds END_STREAM, within
// microseconds; one that does not still has its bytes sent after this.
const deferredFlushDelay = time.Millisecond

// deferFlushLocked leaves the batch for the next frames of the caller's
// response, with a timer that writes it if they do not come.
func (c *conn) deferFlushLocked() {
	if c.flushPending || c.closed {
		return
	}
	c.flushPending = true
	if c.flushTimer == nil {
		c.flushTimer = time.AfterFunc(deferredFlushDelay, c.timedFlush)
		return
	}
	c.flushTimer.Reset(deferredFlushDelay)
}

// timedFlush writes what a deferred flush left in the batch.
func (c *conn) timedFlush() {
	c.mu.Lock()
	defer c.mu.Unlock()
	c.flushPending = false
	c.flushLocked()
}
