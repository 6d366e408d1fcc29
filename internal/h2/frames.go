package h2

import (
	"golang.org/x/net/http2"

	"github.com/h2file/caddy-h2file/internal/h2/wire"
)

// The connection-level frames a client sends: SETTINGS, PING,
// WINDOW_UPDATE and RST_STREAM, with x/net's checks.

func (c *conn) processSettings(f *http2.SettingsFrame) error {
	if f.IsAck() {
		c.unackedSettings--
		if c.unackedSettings < 0 {
			return http2.ConnectionError(http2.ErrCodeProtocol)
		}
		return nil
	}
	if f.NumSettings() > 100 || f.HasDuplicates() {
		return http2.ConnectionError(http2.ErrCodeProtocol)
	}
	c.mu.Lock()
	defer c.mu.Unlock()
	err := f.ForeachSetting(func(s http2.Setting) error {
		if err := s.Valid(); err != nil {
			return err
		}
		switch s.ID {
		case http2.SettingHeaderTableSize:
			c.henc.SetMaxDynamicTableSize(s.Val)
		case http2.SettingInitialWindowSize:
			delta := int64(s.Val) - c.peerInitialWindow
			c.peerInitialWindow = int64(s.Val)
			for _, st := range c.streams {
				st.sendWindow += delta
				st.sendHigh += delta
				if st.sendWindow > 1<<31-1 {
					return http2.ConnectionError(http2.ErrCodeFlowControl)
				}
				if delta > 0 {
					st.cond.Broadcast()
				}
			}
		case http2.SettingMaxFrameSize:
			c.peerMaxFrameSize = int(s.Val)
		case http2.SettingNoRFC7540Priorities:
			if s.Val > 1 {
				return http2.ConnectionError(http2.ErrCodeProtocol)
			}
		}
		return nil
	})
	if err != nil {
		return err
	}
	if err := c.backlogLocked(); err != nil {
		return err
	}
	c.batch.appendFrameHeader(0, wire.FrameSettings, wire.FlagAck, 0)
	c.queuePendingLocked() // a larger initial window
	c.kickLocked()
	return nil
}

func (c *conn) processPing(f *http2.PingFrame) error {
	if f.IsAck() {
		return nil
	}
	if f.StreamID != 0 {
		return http2.ConnectionError(http2.ErrCodeProtocol)
	}
	c.mu.Lock()
	defer c.mu.Unlock()
	if err := c.backlogLocked(); err != nil {
		return err
	}
	c.batch.appendFrameHeader(8, wire.FramePing, wire.FlagAck, 0)
	c.batch.buf = append(c.batch.buf, f.Data[:]...)
	c.kickLocked()
	return nil
}

func (c *conn) processWindowUpdate(f *http2.WindowUpdateFrame) error {
	c.mu.Lock()
	defer c.mu.Unlock()
	if f.StreamID == 0 {
		c.noteWindowUpdate(c.sendWindow, &c.sendHigh, &c.sendSmall, f.Increment)
		c.sendWindow += int64(f.Increment)
		if c.sendWindow > 1<<31-1 {
			return http2.ConnectionError(http2.ErrCodeFlowControl)
		}
		c.dispatchLocked() // those in line wait for it
		return nil
	}
	if c.idleLocked(f.StreamID) {
		return http2.ConnectionError(http2.ErrCodeProtocol)
	}
	st := c.streams[f.StreamID]
	if st == nil {
		// closed: RFC 9113 §5.1 allows it (a client gives back what it
		// reads after the response ended, or had not read our
		// RST_STREAM); free while it gives back what was sent
		c.noteClosedWindowUpdate(f.Increment)
		return nil
	}
	c.noteWindowUpdate(st.sendWindow, &st.sendHigh, &st.sendSmall, f.Increment)
	st.sendWindow += int64(f.Increment)
	if st.sendWindow > 1<<31-1 {
		return http2.StreamError{StreamID: f.StreamID, Code: http2.ErrCodeFlowControl}
	}
	// what the handler buffered ahead goes at once, from this goroutine
	if c.sendPendingLocked(st) {
		c.kickLocked()
	}
	st.cond.Broadcast()
	return nil
}

func (c *conn) processResetStream(f *http2.RSTStreamFrame) error {
	c.mu.Lock()
	defer c.mu.Unlock()
	if c.idleLocked(f.StreamID) {
		return http2.ConnectionError(http2.ErrCodeProtocol)
	}
	if st := c.streams[f.StreamID]; st != nil {
		c.closeStreamLocked(st, http2.StreamError{StreamID: f.StreamID, Code: f.ErrCode})
		return nil
	}
	// The client reset a stream we had reset too (our RST_STREAM
	// NO_ERROR after a response that did not wait for the body, crossing
	// its own): a frame it sends on the stream now comes after its
	// RST_STREAM, which RFC 9113 §5.1 makes a STREAM_CLOSED error, not
	// one in flight before it read ours. As x/net, and h2spec 5.1/8-9
	// whichever end reset first.
	c.recentResets.forget(f.StreamID)
	return nil
}
