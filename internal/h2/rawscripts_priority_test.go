package h2

import (
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
	{name: "priority_update_on_stream_zero", run: func(c *rawConn) {
		c.rawFrame(http2.FramePriorityUpdate, 0, 0, append(make([]byte, 4), "u=0"...))
	}, want: []string{goAwayProtocol}},
}

// waitersThen gets a large body on stream 1 until it has used the
// connection's window, opens streams ids with open, waits for their
// responses' HEADERS and lets their handlers wait for the window, then
// adds 40,000 bytes to it and marks what each stream got; then it opens
// the window for the rest. (Round robin among streams of one urgency is
// left out: where x/net's ring of streams stands when a window comes
// depends on timing.)
func waitersThen(c *rawConn, open func(), ids ...uint32) {
	const n = 40000
	c.get(1, rawBig)
	c.waitData(1, 65535)
	open()
	c.headersAndWait(ids...)
	c.windowUpdate(0, n)
	c.waitFor("the window's bytes", func() bool { return c.connGot >= 65535+n })
	c.sleep(50 * time.Millisecond)
	for _, id := range append([]uint32{1}, ids...) {
		c.mark("after 40000", id)
	}
	c.windowUpdate(0, 1<<30)
}

// headersAndWait waits for the responses' HEADERS on ids, then long
// enough for their handlers to wait for the connection's window: both
// servers send a response's HEADERS with its first DATA, which then waits
// on the same goroutine, microseconds later; the margin is for a machine
// busy with other tests (100 ms was too short once while the integration
// suites ran).
func (c *rawConn) headersAndWait(ids ...uint32) {
	for _, id := range ids {
		c.waitHeaders(id)
	}
	c.sleep(400 * time.Millisecond)
}

// sendPriorityUpdate sends a PRIORITY_UPDATE frame for stream id.
func sendPriorityUpdate(c *rawConn, id uint32, value string) {
	c.rawFrame(http2.FramePriorityUpdate, 0, 0, priorityUpdate(id, value))
}
