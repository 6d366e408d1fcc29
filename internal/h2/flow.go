package h2

// inflow is a receive window we give the client (x/net's inflow).
type inflow struct {
	avail  int32
	unsent int32
}

// inflowMinRefresh is the smallest WINDOW_UPDATE sent, unless it at
// least doubles the window (x/net's rule).
const inflowMinRefresh = 4 << 10

func (f *inflow) init(n int32) { f.avail = n }

// add gives n bytes back; it returns the increment to send now, or 0.
func (f *inflow) add(n int) int32 {
	unsent := int64(f.unsent) + int64(n)
	if unsent+int64(f.avail) > 1<<31-1 {
		unsent = 1<<31 - 1 - int64(f.avail)
	}
	f.unsent = int32(unsent)
	if f.unsent < inflowMinRefresh && f.unsent < f.avail {
		return 0
	}
	f.avail += f.unsent
	f.unsent = 0
	return int32(unsent)
}

// take takes n bytes of window, or reports false when the client sent
// more than it was given.
func (f *inflow) take(n uint32) bool {
	if n > uint32(f.avail) {
		return false
	}
	f.avail -= int32(n)
	return true
}

// returnConnWindowLocked gives n bytes back to the connection window.
func (c *conn) returnConnWindowLocked(n int) {
	if inc := c.inflow.add(n); inc > 0 {
		c.batch.ensure()
		c.batch.appendWindowUpdate(0, uint32(inc))
	}
}

// returnStreamWindowLocked gives n bytes back to st's window.
func (c *conn) returnStreamWindowLocked(st *stream, n int) {
	if st.closed || st.remoteClosed {
		return
	}
	if inc := st.inflow.add(n); inc > 0 {
		c.batch.ensure()
		c.batch.appendWindowUpdate(st.id, uint32(inc))
	}
}

// discardDataLocked takes n bytes of the connection's window for DATA
// that goes to no body (a stream closed or past the GOAWAY, more than
// Content-Length) and gives them back at once; false means the client
// sent more than its window.
func (c *conn) discardDataLocked(n uint32) bool {
	if !c.inflow.take(n) {
		return false
	}
	c.returnConnWindowLocked(int(n))
	c.kickLocked()
	return true
}
