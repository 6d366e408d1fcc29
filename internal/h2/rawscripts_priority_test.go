package h2

import (
	"fmt"
	"time"

	"golang.org/x/net/http2"
)

// RFC 9218 priorities against x/net's default write scheduler: with the
// connection window used up by stream 1, streams wait for it, and the
// next WINDOW_UPDATE goes to the most urgent one.
func init() { rawScripts = append(rawScripts, rawPriorityScripts...) }

// notXNetPriorities is why the priority scripts differ from x/net v0.60
// built with Go 1.26: there, its server schedules round robin and ignores
// priorities (clientPriorityDisabled is true before Go 1.27); its
// default, RFC 9218, is what Go 1.27's server runs and the engine follows.
const notXNetPriorities = "x/net v0.60 on Go 1.26 ignores RFC 9218 priorities (round robin)"

// rawBig is a body that outlasts every window these scripts give.
const rawBig = "/bytes?n=300000"

var rawPriorityScripts = []rawScript{
	{name: "priority_header_urgent_first", open: rawOpen{noWindow: true}, run: func(c *rawConn) {
		waitersThen(c, func() {
			c.req(3, "GET", rawBig, true, "priority", "u=7")
			c.req(5, "GET", rawBig, true, "priority", "u=0")
			c.req(7, "GET", rawBig, true)
		}, 3, 5, 7)
	}, want: []string{"stream 5 got 40000", "stream 3 got 0", "stream 7 got 0"}, notXNet: notXNetPriorities},
	{name: "priority_update_raises_stream", open: rawOpen{noWindow: true}, run: func(c *rawConn) {
		waitersThen(c, func() {
			c.get(3, rawBig)
			c.get(5, rawBig)
			c.headersAndWait(3, 5)
			sendPriorityUpdate(c, 5, "u=1")
		}, 3, 5)
	}, want: []string{"stream 5 got 40000", "stream 3 got 0"}, notXNet: notXNetPriorities},
	{name: "priority_update_before_headers", open: rawOpen{noWindow: true}, run: func(c *rawConn) {
		waitersThen(c, func() {
			sendPriorityUpdate(c, 5, "u=0")
			c.get(3, rawBig)
			c.get(5, rawBig)
		}, 3, 5)
	}, want: []string{"stream 5 got 40000", "stream 3 got 0"}, notXNet: notXNetPriorities},
	// through a proxy, the priorities of later requests are not trusted
	{name: "priority_ignored_after_intermediary", open: rawOpen{noWindow: true}, run: func(c *rawConn) {
		// one frame's worth: stream 1, first in line, takes it (x/net's
		// round robin goes a frame a turn, the engine's 32 KiB)
		waitersThenWindow(c, 16384, func() {
			c.req(3, "GET", rawBig, true, "via", "1.1 proxy")
			c.req(5, "GET", rawBig, true, "priority", "u=0")
		}, 3, 5)
	}, want: []string{"stream 1 got 81919", "stream 5 got 0"}},
	{name: "priority_update_on_stream_zero", run: func(c *rawConn) {
		c.rawFrame(http2.FramePriorityUpdate, 0, 0, append(make([]byte, 4), "u=0"...))
	}, want: []string{goAwayProtocol}},
}

// waitersThen is waitersThenWindow with 40,000 bytes.
func waitersThen(c *rawConn, open func(), ids ...uint32) { waitersThenWindow(c, 40000, open, ids...) }

// waitersThenWindow gets a large body on stream 1 until it has used the
// connection's window, opens streams ids with open, waits for their
// responses' HEADERS and lets their handlers wait for the window, then
// adds n bytes to it and marks what each stream got; then it opens the
// window for the rest.
func waitersThenWindow(c *rawConn, n uint32, open func(), ids ...uint32) {
	c.get(1, rawBig)
	c.waitData(1, 65535)
	open()
	c.headersAndWait(ids...)
	c.windowUpdate(0, n)
	c.waitFor("the window's bytes", func() bool { return c.connGot >= 65535+int64(n) })
	c.sleep(50 * time.Millisecond)
	for _, id := range append([]uint32{1}, ids...) {
		c.mark(fmt.Sprintf("after %d", n), id)
	}
	c.windowUpdate(0, 1<<30)
}

// headersAndWait waits for the responses' HEADERS on ids, then long
// enough for their handlers to wait for the connection's window.
func (c *rawConn) headersAndWait(ids ...uint32) {
	for _, id := range ids {
		c.waitHeaders(id)
	}
	c.sleep(100 * time.Millisecond)
}

// sendPriorityUpdate sends a PRIORITY_UPDATE frame for stream id.
func sendPriorityUpdate(c *rawConn, id uint32, value string) {
	c.rawFrame(http2.FramePriorityUpdate, 0, 0, priorityUpdate(id, value))
}
