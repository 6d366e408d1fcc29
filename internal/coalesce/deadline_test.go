package coalesce

// The coalesce wrapper's write deadlines and errors: a Write waiting for
// room, the flusher, and queued bytes keep their deadline; an error of the
// wrapped connection sticks.

import (
	"errors"
	"testing"
	"time"

	"github.com/h2file/caddy-h2file/internal/harness"
)

// The write deadline ends a Write waiting for room: when it passes, and
// when it is moved into the past while the Write waits. Such a timeout
// does not break the connection.
func TestCoalesceWriteDeadlineWhileBlocked(t *testing.T) {
	lwNoLeaks(t)
	g := lwNewGate(t)
	c := lwWrap(g, 4096, 64<<20, 5*time.Second)
	lwFlushing(t, c, []byte{1})                            // in flight
	if _, err := c.Write(make([]byte, 4096)); err != nil { // queue full
		t.Fatal(err)
	}

	c.SetWriteDeadline(time.Now().Add(50 * time.Millisecond))
	r := harness.Recv(t, lwAsyncWrite(c, []byte("x")), "Write with deadline")
	if r.n != 0 || !lwIsTimeout(r.err) {
		t.Fatalf("Write = %d, %v; want a timeout", r.n, r.err)
	}

	c.SetWriteDeadline(time.Time{})
	blocked := lwAsyncWrite(c, []byte("y"))
	lwNotYet(t, blocked, "Write without deadline")
	c.SetWriteDeadline(time.Now().Add(-time.Second))
	if r := harness.Recv(t, blocked, "Write after deadline moved"); !lwIsTimeout(r.err) {
		t.Fatalf("Write = %d, %v; want a timeout", r.n, r.err)
	}
	if _, err := c.Write([]byte("z")); !lwIsTimeout(err) {
		t.Fatalf("Write with past deadline: %v", err)
	}

	c.SetWriteDeadline(time.Time{})
	g.openGate()
	if _, err := c.Write([]byte("ok")); err != nil {
		t.Fatalf("Write after timeouts: %v", err)
	}
	if err := c.Close(); err != nil {
		t.Fatal(err)
	}
	if _, all := g.written(); len(all) != 1+4096+2 || string(all[1+4096:]) != "ok" {
		t.Fatalf("sent %d bytes", len(all))
	}
}

// The flusher writes under the deadline of the bytes it sends; when that
// write times out, the error is sticky.
func TestCoalesceFlusherHonoursDeadline(t *testing.T) {
	lwNoLeaks(t)
	g := lwNewGate(t)
	c := lwWrap(g, 4096, 64<<20, time.Second)
	dl := time.Now().Add(50 * time.Millisecond)
	c.SetWriteDeadline(dl)
	if _, err := c.Write([]byte("x")); err != nil {
		t.Fatal(err)
	}
	c.SetWriteDeadline(time.Time{})
	harness.WaitUntil(t, "the socket write to time out", func() bool {
		c.mu.Lock()
		defer c.mu.Unlock()
		return c.err != nil
	})
	if _, err := c.Write([]byte("y")); !lwIsTimeout(err) {
		t.Fatalf("Write after the flusher timed out: %v; want a timeout", err)
	}
	if _, err2 := c.Write([]byte("z")); !lwIsTimeout(err2) {
		t.Fatalf("error is not sticky: %v", err2)
	}
	if err := c.Close(); !lwIsTimeout(err) {
		t.Fatalf("Close = %v, want the sticky timeout", err)
	}
}

// The same over a real socket whose peer does not read.
func TestCoalesceFlusherDeadlineTCP(t *testing.T) {
	lwNoLeaks(t)
	server, _ := harness.TCPPair(t)
	c := lwWrap(server, 64<<10, 64<<20, time.Second)
	c.SetWriteDeadline(time.Now().Add(200 * time.Millisecond))
	big := make([]byte, 1<<20)
	var err error
	for range 256 { // fill the socket buffers
		if _, err = c.Write(big); err != nil {
			break
		}
	}
	if !lwIsTimeout(err) {
		t.Fatalf("Write to a peer that does not read: %v; want a timeout", err)
	}
	c.SetWriteDeadline(time.Time{})
	harness.WaitUntil(t, "the socket write to fail", func() bool {
		c.mu.Lock()
		defer c.mu.Unlock()
		return c.err != nil
	})
	if _, err := c.Write([]byte("x")); !lwIsTimeout(err) {
		t.Fatalf("Write after the socket write timed out: %v", err)
	}
	c.Close()
}

// Bytes keep the deadline they were written under: TLS's Close writes
// close_notify under a 5s deadline and then sets the deadline to now;
// close_notify must still be sent, and later Writes must fail at once.
func TestCoalesceQueuedBytesKeepTheirDeadline(t *testing.T) {
	lwNoLeaks(t)
	g := lwNewGate(t)
	c := lwWrap(g, 64<<10, 64<<20, 5*time.Second)
	if _, err := c.Write([]byte("data")); err != nil { // in flight
		t.Fatal(err)
	}
	start := time.Now()
	c.SetWriteDeadline(start.Add(5 * time.Second))
	if _, err := c.Write([]byte("alert")); err != nil {
		t.Fatal(err)
	}
	c.SetWriteDeadline(time.Now())
	if n, err := c.Write([]byte("late")); n != 0 || !lwIsTimeout(err) {
		t.Fatalf("Write after deadline = %d, %v", n, err)
	}
	go func() {
		time.Sleep(20 * time.Millisecond)
		g.openGate()
	}()
	if err := c.Close(); err != nil {
		t.Fatalf("Close = %v", err)
	}
	writes, all := g.written()
	if string(all) != "dataalert" {
		t.Fatalf("sent %q", all)
	}
	g.mu.Lock()
	last := g.deadlines[len(g.deadlines)-1]
	g.mu.Unlock()
	if !last.Equal(start.Add(5 * time.Second)) {
		t.Fatalf("%q written under deadline %v, want %v", writes[len(writes)-1], last, start.Add(5*time.Second))
	}
}

// An error of the wrapped connection's Write is returned by the next
// Writes and by Close.
func TestCoalesceStickyError(t *testing.T) {
	lwNoLeaks(t)
	boom := errors.New("lw boom")
	g := lwNewGate(t)
	g.fail = boom
	g.openGate()
	c := lwWrap(g, 64<<10, 64<<20, time.Second)
	if _, err := c.Write([]byte("x")); err != nil {
		t.Fatal(err)
	}
	var err error
	harness.WaitUntil(t, "the error", func() bool {
		_, err = c.Write([]byte("y"))
		return err != nil
	})
	if !errors.Is(err, boom) {
		t.Fatalf("Write = %v, want %v", err, boom)
	}
	if _, err := c.Write([]byte("z")); !errors.Is(err, boom) {
		t.Fatalf("second Write = %v", err)
	}
	if err := c.Close(); !errors.Is(err, boom) {
		t.Fatalf("Close = %v", err)
	}
	if _, err := c.Write([]byte("z")); !errors.Is(err, boom) {
		t.Fatalf("Write after Close = %v", err)
	}
}
