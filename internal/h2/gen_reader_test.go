package h2

import (
	"fmt"
	"slices"
	"time"

	"golang.org/x/net/http2"
	"golang.org/x/net/http2/hpack"
)

// The reading side of the generative test's client (gen_client_test.go):
// what the server sends is recorded on its stream (genRun), its body
// checked byte by byte, its DATA checked against the windows the client
// gave, and window given back as the scenario's policies say.

// read reads the server's frames until the connection ends.
func (c *genConn) read() {
	fr := http2.NewFramer(nil, c.tc)
	dec := hpack.NewDecoder(4096, nil)
	if c.sc.TableSize >= 0 {
		dec.SetAllowedMaxDynamicTableSize(uint32(c.sc.TableSize))
	}
	fr.ReadMetaHeaders = dec
	fr.MaxHeaderListSize = 64 << 20
	if c.sc.FrameSize != 0 {
		fr.SetMaxReadFrameSize(c.sc.FrameSize)
	}
	for {
		f, err := fr.ReadFrame()
		c.mu.Lock()
		if err != nil {
			c.gone = true
			if !c.closedByUs && !isConnEnd(err) && !time.Now().After(c.deadline) {
				c.violations = append(c.violations, "client read error: "+err.Error())
			}
			for _, r := range c.runs {
				if r.opened && !r.ended() {
					r.end = "closed"
				}
			}
			c.mu.Unlock()
			c.cond.Broadcast()
			return
		}
		if _, settings := f.(*http2.SettingsFrame); c.errGoAway != "" && !settings {
			// x/net writes nothing after it but an ACK it owed already
			c.violations = append(c.violations, fmt.Sprintf("%v on stream %d after GOAWAY %s", f.Header().Type, f.Header().StreamID, c.errGoAway))
		}
		c.frames++
		c.lastActive = time.Now()
		pause := c.sc.PauseEvery > 0 && c.frames%c.sc.PauseEvery == 0
		out := c.onFrame(f)
		c.mu.Unlock()
		c.cond.Broadcast()
		if out != nil {
			c.write(out)
		}
		if pause {
			time.Sleep(time.Duration(c.sc.PauseMs) * time.Millisecond)
		}
	}
}

// onFrame records f (c.mu held) and returns what to write in answer, if
// anything.
func (c *genConn) onFrame(f http2.Frame) func() {
	switch f := f.(type) {
	case *http2.SettingsFrame:
		if f.IsAck() {
			return nil
		}
		if v, ok := f.Value(http2.SettingInitialWindowSize); ok {
			delta := int64(v) - c.peerInitial
			c.peerInitial = int64(v)
			for _, r := range c.runs {
				r.sendWin += delta
			}
		}
		return func() { c.fr.WriteSettingsAck() }
	case *http2.PingFrame:
		if f.IsAck() {
			c.pingAcked = true
			return nil
		}
		return func() { c.fr.WritePing(true, f.Data) }
	case *http2.WindowUpdateFrame:
		if f.StreamID == 0 {
			c.connSend += int64(f.Increment)
		} else if r := c.byIDOf(f.StreamID); r != nil {
			r.sendWin += int64(f.Increment)
		}
		return nil
	case *http2.GoAwayFrame:
		c.goAways = append(c.goAways, f.ErrCode.String())
		if f.ErrCode != http2.ErrCodeNo {
			c.errGoAway = f.ErrCode.String()
		}
		c.goAwayLast = f.LastStreamID
		for _, r := range c.runs {
			if r.opened && !r.ended() && r.id > f.LastStreamID {
				r.end = "unprocessed"
			}
		}
		return nil
	case *http2.RSTStreamFrame:
		r := c.byIDOf(f.StreamID)
		if r == nil {
			c.violations = append(c.violations, fmt.Sprintf("RST_STREAM on stream %d, never opened", f.StreamID))
			return nil
		}
		r.serverRST = true
		if r.ended() {
			r.after = append(r.after, "RST_STREAM "+f.ErrCode.String())
		} else {
			r.end = "RST_STREAM " + f.ErrCode.String()
		}
		return nil
	case *http2.MetaHeadersFrame:
		r := c.byIDOf(f.StreamID)
		if r == nil {
			c.violations = append(c.violations, fmt.Sprintf("HEADERS on stream %d, never opened", f.StreamID))
			return nil
		}
		var fields []string
		for _, hf := range f.RegularFields() {
			if hf.Name != "date" {
				fields = append(fields, hf.Name+": "+hf.Value)
			}
		}
		slices.Sort(fields)
		status := f.PseudoValue("status")
		switch {
		case r.ended():
			r.after = append(r.after, "HEADERS")
		case status == "":
			r.trail = fields
		case status[0] == '1':
			r.info = append(r.info, fmt.Sprintf("%s %v", status, fields))
		default:
			r.status, r.header = status, fields
		}
		if f.StreamEnded() && !r.ended() {
			r.end = "END_STREAM"
		}
		return nil
	case *http2.DataFrame:
		return c.onData(f)
	}
	return nil
}

func (c *genConn) byIDOf(id uint32) *genRun {
	if id%2 == 0 || id == 0 || int(id/2) >= len(c.runs) || !c.runs[id/2].opened {
		return nil
	}
	return c.runs[id/2]
}

// onData checks f's bytes and the windows, and gives window back.
func (c *genConn) onData(f *http2.DataFrame) func() {
	r := c.byIDOf(f.StreamID)
	if r == nil {
		c.violations = append(c.violations, fmt.Sprintf("DATA on stream %d, never opened", f.StreamID))
		return nil
	}
	n := int64(f.Length)
	c.connRecv.avail -= n
	r.recv.avail -= n
	if c.connRecv.avail < 0 {
		c.violations = append(c.violations, fmt.Sprintf("DATA on stream %d beyond the connection window", r.id))
	}
	if r.recv.avail < 0 && !r.clientRST {
		c.violations = append(c.violations, fmt.Sprintf("DATA on stream %d beyond its window", r.id))
	}
	p := f.Data()
	if r.ended() {
		r.after = append(r.after, fmt.Sprintf("DATA %d", len(p)))
	} else {
		if i := genMismatch(r.seed, r.n, p); i >= 0 && r.badAt < 0 {
			r.badAt = r.n + int64(i)
		}
		r.n += int64(len(p))
		r.sha.Write(p)
		if f.StreamEnded() {
			r.end = "END_STREAM"
		}
	}
	sp := r.plan
	// the connection's window comes back for every DATA frame, on a
	// stream reset by this frame too (a client that skipped it here
	// left the server without window, for ever: generator seed 839)
	connInc := c.refill(&c.connRecv, c.sc.ConnWindow, 0)
	rst := sp.RST == genRSTAfterGot && r.n >= int64(sp.RSTArg) && !r.ended() && !r.clientRST
	var streamInc uint32
	if rst {
		r.clientRST = true
	} else if !r.ended() && !r.clientRST {
		streamInc = c.refill(&r.recv, sp.Window, r.id)
	}
	if connInc == 0 && streamInc == 0 && !rst {
		return nil
	}
	return func() {
		if rst {
			c.fr.WriteRSTStream(r.id, http2.ErrCode(sp.RSTCode))
		}
		if connInc > 0 {
			c.fr.WriteWindowUpdate(0, connInc)
		}
		if streamInc > 0 {
			c.fr.WriteWindowUpdate(r.id, streamInc)
		}
	}
}

// refill applies policy p to window w after DATA (c.mu held); it returns
// the WINDOW_UPDATE to send now, and schedules a late one.
func (c *genConn) refill(w *genWindow, p genPolicy, id uint32) uint32 {
	used := w.base - w.avail
	grant := int64(0)
	switch p.Kind {
	case genWinEager:
		grant = used
	case genWinLazy:
		if used >= max(1, w.base/2) {
			grant = used
		}
	case genWinEmpty:
		if w.avail <= 0 {
			grant = used
		}
	case genWinBytes:
		if w.avail <= 0 {
			grant = int64(p.Arg) - w.avail
		}
	case genWinLate:
		if w.avail <= 0 && !w.late {
			w.late = true
			time.AfterFunc(time.Duration(p.Arg)*time.Millisecond, func() {
				c.mu.Lock()
				w.late = false
				inc := w.base - w.avail
				run := c.byIDOf(id)
				if c.gone || inc <= 0 || (run != nil && (run.ended() || run.clientRST)) {
					c.mu.Unlock()
					return
				}
				w.avail += inc
				if inc < 1024 {
					c.dribble++
				}
				c.mu.Unlock()
				c.write(func() { c.fr.WriteWindowUpdate(id, uint32(inc)) })
			})
		}
	}
	if grant <= 0 {
		return 0
	}
	w.avail += grant
	if grant < 1024 {
		c.dribble++
	}
	return uint32(grant)
}
