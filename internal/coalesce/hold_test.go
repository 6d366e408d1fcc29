package coalesce

import (
	"bytes"
	"crypto/tls"
	"fmt"
	"io"
	"net"
	"sync"
	"testing"
	"time"

	"github.com/h2file/caddy-h2file/internal/harness"
)

// lwRecordsConn stands in for a *tls.Conn over a Conn: it writes
// what it is given to the connection below in records of at most 16 KiB
// (as TLS does), and notes whether that connection held them.
type lwRecordsConn struct {
	*Conn // below
	mu    sync.Mutex
	held  []bool // per record: the connection below was holding
	done  chan struct{}
}

func (r *lwRecordsConn) Write(p []byte) (int, error) {
	n := 0
	for n < len(p) {
		k := min(len(p)-n, 16<<10)
		r.Conn.mu.Lock()
		held := r.Conn.held
		r.Conn.mu.Unlock()
		r.mu.Lock()
		r.held = append(r.held, held)
		r.mu.Unlock()
		w, err := r.Conn.Write(p[n : n+k])
		n += w
		if err != nil {
			return n, err
		}
	}
	r.done <- struct{}{}
	return n, nil
}

// ConnectionState is that of a TLS connection after its handshake.
func (r *lwRecordsConn) ConnectionState() tls.ConnectionState {
	return tls.ConnectionState{HandshakeComplete: true}
}
func (r *lwRecordsConn) NetConn() net.Conn { return r.Conn }

func (r *lwRecordsConn) records() []bool {
	r.mu.Lock()
	defer r.mu.Unlock()
	return append([]bool(nil), r.held...)
}

// lwBothSides stacks the wrapper below and above a record-writing
// connection over the gate g.
func lwBothSides(t *testing.T, g *lwGateConn, belowPending int) (above, below *Conn, rec *lwRecordsConn) {
	t.Helper()
	below = lwWrap(g, belowPending, 64<<20, 5*time.Second)
	rec = &lwRecordsConn{Conn: below, done: make(chan struct{}, 64)}
	above = lwWrap(rec, 512<<10, 64<<20, 5*time.Second)
	if above.below != below {
		t.Fatal("the wrapper above did not find the wrapper below TLS")
	}
	return above, below, rec
}

// A small batch above TLS is held below and goes out as one batch there,
// taken before its first socket write; a large one is not held, so the
// flusher below sends its first records while TLS makes the next.
func TestCoalesceHoldsSmallBatchesBelowTLS(t *testing.T) {
	lwNoLeaks(t)
	for _, size := range []int{1, 16 << 10, 40 << 10, holdMax, holdMax + 1, 200 << 10} {
		g := lwNewGate(t)
		above, below, rec := lwBothSides(t, g, 512<<10)
		p := bytes.Repeat([]byte{byte(size)}, size)
		p[0] = 'x'
		// one batch above: queued while held there, then flushed
		if !above.hold() {
			t.Fatal("the idle wrapper above refused to hold")
		}
		if _, err := above.Write(p); err != nil {
			t.Fatal(err)
		}
		go above.release()
		harness.Recv(t, rec.done, "the batch's records")
		records := rec.records()
		wantHeld := size <= holdMax
		for i, held := range records {
			if held != wantHeld {
				t.Fatalf("%d bytes: record %d of %d written while the wrapper below held = %v, want %v", size, i, len(records), held, wantHeld)
			}
		}
		if wantHeld {
			// the gate is closed: the first socket write waits, and the
			// batch it belongs to has everything
			harness.WaitUntil(t, "the held records to be taken as one batch", func() bool { return lwQueued(below) == 0 })
		}
		g.openGate()
		if err := above.Close(); err != nil {
			t.Fatal(err)
		}
		if _, all := g.written(); !bytes.Equal(all, p) {
			t.Fatalf("%d bytes: the socket got %d bytes, not what was written", size, len(all))
		}
	}
}

// Holding never makes a Write wait for a flusher that is not coming:
// records beyond max_pending below start the flusher.
func TestCoalesceHeldWriteWithoutRoom(t *testing.T) {
	lwNoLeaks(t)
	g := lwNewGate(t)
	g.openGate()
	_, below, rec := lwBothSides(t, g, 16<<10)
	if !below.hold() {
		t.Fatal("an idle connection refused to hold")
	}
	p := bytes.Repeat([]byte("0123456789abcdef"), (40<<10)/16)
	if r := harness.Recv(t, lwAsyncWrite(rec, p), "Write of 40 KiB held with 16 KiB of room"); r.err != nil || r.n != len(p) {
		t.Fatalf("Write = %d, %v", r.n, r.err)
	}
	if records := rec.records(); len(records) != 3 || !records[0] || records[2] {
		t.Fatalf("records held = %v, want the first held and the last not", records)
	}
	below.release()
	if err := below.Close(); err != nil {
		t.Fatal(err)
	}
	if _, all := g.written(); !bytes.Equal(all, p) {
		t.Fatalf("the socket got %d bytes, not the %d written", len(all), len(p))
	}
}

// What a held connection queued is sent by Close and by the calls that
// drain first.
func TestCoalesceHeldBytesSentOnClose(t *testing.T) {
	lwNoLeaks(t)
	for _, how := range []string{"Close", "CloseWrite"} {
		g := lwNewGate(t)
		g.openGate()
		c := lwWrap(g, 64<<10, 64<<20, 5*time.Second)
		if !c.hold() {
			t.Fatal("an idle connection refused to hold")
		}
		if _, err := c.Write([]byte("held")); err != nil {
			t.Fatal(err)
		}
		if c.hold() {
			t.Fatal("a connection with queued bytes agreed to hold again")
		}
		var err error
		if how == "Close" {
			err = c.Close()
		} else {
			err = c.CloseWrite()
		}
		if err != nil {
			t.Fatalf("%s: %v", how, err)
		}
		if _, all := g.written(); string(all) != "held" {
			t.Fatalf("%s: the socket got %q, want %q", how, all, "held")
		}
		c.Close()
	}
}

// On a server without TLS, `tls` leaves the connection alone, so the
// wrapper on both sides of it sees its own connection: it wraps it once.
func TestCoalesceBothSidesWithoutTLS(t *testing.T) {
	lwNoLeaks(t)
	ln, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		t.Fatal(err)
	}
	limits := NewLimits(DefaultMaxPending, DefaultMaxTotal, DefaultCloseTimeout)
	stacked := NewListener(NewListener(ln, limits), limits)
	defer stacked.Close()
	client, err := net.Dial("tcp", ln.Addr().String())
	if err != nil {
		t.Fatal(err)
	}
	defer client.Close()
	conn, err := stacked.Accept()
	if err != nil {
		t.Fatal(err)
	}
	c, ok := conn.(*Conn)
	if !ok {
		t.Fatalf("accepted a %T, want a *Conn", conn)
	}
	if _, ok := c.Conn.(*net.TCPConn); !ok {
		t.Fatalf("the Conn wraps a %T, want the *net.TCPConn itself", c.Conn)
	}
	if _, err := c.Write([]byte("once")); err != nil {
		t.Fatal(err)
	}
	buf := make([]byte, 4)
	if _, err := io.ReadFull(client, buf); err != nil || string(buf) != "once" {
		t.Fatalf("read %q, %v", buf, err)
	}
	if err := c.Close(); err != nil {
		t.Fatal(err)
	}
}

// Over real TLS, the wrapper above finds the one below through the
// *tls.Conn, and every size of write, held below or not, arrives whole
// and in order.
func TestCoalesceBothSidesOverTLS(t *testing.T) {
	lwNoLeaks(t)
	limits := NewLimits(64<<10, 64<<20, 5*time.Second)
	server, client := harness.TCPPair(t)
	below := NewConn(server, limits)
	tc := harness.NewCert(t)
	srv := tls.Server(below, &tls.Config{Certificates: []tls.Certificate{tc.TLS}})
	above := lwWrapShared(srv, limits)
	if above.below != below {
		t.Fatalf("the wrapper above TLS found %v below it, want the wrapper's connection", above.below)
	}
	cli := tls.Client(client, &tls.Config{RootCAs: tc.Pool, ServerName: "localhost"})
	var writes [][]byte
	for i, size := range []int{1, 16 << 10, 40 << 10, 200 << 10, 3} {
		writes = append(writes, bytes.Repeat([]byte{byte('a' + i)}, size))
	}
	want := bytes.Join(writes, nil)
	got := make(chan []byte, 1)
	go func() {
		b := make([]byte, len(want))
		io.ReadFull(cli, b)
		got <- b
	}()
	for _, p := range writes {
		if _, err := above.Write(p); err != nil {
			t.Fatal(err)
		}
	}
	if b := harness.Recv(t, got, "the client's read"); !bytes.Equal(b, want) {
		t.Fatal("the client read other bytes than were written")
	}
	if err := above.Close(); err != nil {
		t.Fatal(err)
	}
}

// A first write small enough to be held makes crypto/tls run the server's
// handshake inside that batch: the wrapper below must not hold the
// handshake's records, or the handshake waits for the client's Finished,
// which needs those very records, and never ends.
func TestCoalesceNoHoldDuringHandshake(t *testing.T) {
	lwNoLeaks(t)
	limits := NewLimits(64<<10, 64<<20, 5*time.Second)
	server, client := harness.TCPPair(t)
	tc := harness.NewCert(t)
	above := lwWrapShared(tls.Server(NewConn(server, limits), &tls.Config{Certificates: []tls.Certificate{tc.TLS}}), limits)
	cli := tls.Client(client, &tls.Config{RootCAs: tc.Pool, ServerName: "localhost"})
	cli.SetDeadline(time.Now().Add(10 * time.Second))
	got := make(chan error, 1)
	go func() {
		b := make([]byte, 1)
		_, err := io.ReadFull(cli, b)
		if err == nil && b[0] != 'x' {
			err = fmt.Errorf("read %q, want %q", b, "x")
		}
		got <- err
	}()
	if _, err := above.Write([]byte("x")); err != nil {
		t.Fatal(err)
	}
	if err := harness.Recv(t, got, "the client's read of the first byte"); err != nil {
		t.Fatalf("the first byte after the handshake: %v", err)
	}
	if err := above.Close(); err != nil {
		t.Fatal(err)
	}
}
