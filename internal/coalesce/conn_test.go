package coalesce

// The coalesce wrapper's write-behind conn (conn.go): a Write
// reaches the peer at once, bytes written meanwhile are batched, in order,
// within max_pending, with backpressure; ReadFrom. The fake connections
// are in fakes_test.go.

import (
	"bufio"
	"bytes"
	"crypto/rand"
	"encoding/binary"
	"fmt"
	"io"
	mrand "math/rand/v2"
	"net"
	"os"
	"path/filepath"
	"sync"
	"testing"
	"time"

	"github.com/h2file/caddy-h2file/internal/harness"
)

// A small Write reaches the peer by itself: no further Write, Flush or
// Close is needed, and nothing waits for more bytes.
func TestCoalesceSmallWriteReachesPeerAtOnce(t *testing.T) {
	lwNoLeaks(t)
	server, client := harness.TCPPair(t)
	c := lwWrap(server, 64<<10, 64<<20, 5*time.Second)
	defer c.Close()
	buf := make([]byte, 5)
	for i := range 3 {
		msg := []byte(fmt.Sprintf("ping%d", i))
		if _, err := c.Write(msg); err != nil {
			t.Fatal(err)
		}
		client.SetReadDeadline(time.Now().Add(10 * time.Second))
		if _, err := io.ReadFull(client, buf); err != nil {
			t.Fatalf("write %d did not reach the peer: %v", i, err)
		}
		if !bytes.Equal(buf, msg) {
			t.Fatalf("got %q, want %q", buf, msg)
		}
	}
}

// Request/response ping-pong: every Write is sent alone and at once (one
// socket write per Write), and 200 round trips take about as long as on
// a plain connection.
func TestCoalescePingPong(t *testing.T) {
	lwNoLeaks(t)
	const rounds = 200
	run := func(wrap bool) (time.Duration, int64) {
		server, client := harness.TCPPair(t)
		counted := &lwCountConn{Conn: server}
		var conn net.Conn = counted
		if wrap {
			conn = lwWrap(counted, 64<<10, 64<<20, 5*time.Second)
		}
		defer conn.Close()
		done := harness.Async(func() error {
			buf := make([]byte, 64)
			for range rounds {
				if _, err := io.ReadFull(client, buf); err != nil {
					return err
				}
				if _, err := client.Write(buf[:1]); err != nil {
					return err
				}
			}
			return nil
		})
		msg := bytes.Repeat([]byte{'x'}, 64)
		one := make([]byte, 1)
		start := time.Now()
		for range rounds {
			if _, err := conn.Write(msg); err != nil {
				t.Fatal(err)
			}
			if _, err := io.ReadFull(conn, one); err != nil {
				t.Fatal(err)
			}
		}
		elapsed := time.Since(start)
		if err := harness.Recv(t, done, "peer"); err != nil {
			t.Fatal(err)
		}
		return elapsed, counted.writes.Load()
	}
	plain, _ := run(false)
	wrapped, socketWrites := run(true)
	t.Logf("%d round trips: plain %v, coalescing %v", rounds, plain, wrapped)
	if socketWrites != rounds {
		t.Errorf("socket writes = %d, want %d: a Write was held back or split", socketWrites, rounds)
	}
	// a very generous bound, that only a wrapper waiting for more bytes
	// before it writes would exceed
	if wrapped > 20*plain+500*time.Millisecond {
		t.Errorf("%d round trips took %v, on a plain connection %v", rounds, wrapped, plain)
	}
}

// Bytes written while a socket write is in progress go out together in
// the next one; the Writes do not wait.
func TestCoalesceBatchesWhileWriteInFlight(t *testing.T) {
	lwNoLeaks(t)
	g := lwNewGate(t)
	c := lwWrap(g, 64<<10, 64<<20, 5*time.Second)
	for i, s := range []string{"a", "b", "c", "d"} {
		r := harness.Recv(t, lwAsyncWrite(c, []byte(s)), "Write "+s)
		if r.err != nil || r.n != 1 {
			t.Fatalf("Write(%q) = %d, %v", s, r.n, r.err)
		}
		if i == 0 {
			harness.WaitUntil(t, "the flusher to take the first Write", func() bool { return lwQueued(c) == 0 })
		}
	}
	g.openGate()
	if err := c.Close(); err != nil {
		t.Fatal(err)
	}
	writes, _ := g.written()
	if len(writes) != 2 || string(writes[0]) != "a" || string(writes[1]) != "bcd" {
		t.Fatalf("socket writes = %q, want [a bcd]", writes)
	}
}

// While a batch is written, at most max_pending bytes are queued for the
// next one.
func TestCoalesceQueueLimit(t *testing.T) {
	lwNoLeaks(t)
	g := lwNewGate(t)
	c := lwWrap(g, 2*ChunkSize, 64<<20, time.Second)
	lwFlushing(t, c, make([]byte, 2*ChunkSize))
	blocked := lwAsyncWrite(c, make([]byte, 3*ChunkSize))
	lwNotYet(t, blocked, "Write beyond max_pending")
	c.mu.Lock()
	queued, pending := c.queuedBytes, c.pending
	c.mu.Unlock()
	if queued != 2*ChunkSize || pending != 4*ChunkSize {
		t.Errorf("queued %d, pending %d; want %d, %d", queued, pending, 2*ChunkSize, 4*ChunkSize)
	}
	g.openGate()
	if r := harness.Recv(t, blocked, "Write"); r.err != nil {
		t.Fatal(r.err)
	}
	if err := c.Close(); err != nil {
		t.Fatal(err)
	}
	if _, all := g.written(); len(all) != 5*ChunkSize {
		t.Fatalf("sent %d bytes", len(all))
	}
}

// Concurrent writers: each Write's bytes arrive contiguous and each
// writer's Writes in order, with writes of every size, many larger than
// max_pending.
func TestCoalesceOrderConcurrentWriters(t *testing.T) {
	lwNoLeaks(t)
	server, client := harness.TCPPair(t)
	c := lwWrap(server, 20000, 64<<20, 5*time.Second)
	const writers, msgs = 8, 150
	fill := func(p []byte, w, seq int) {
		for i := range p {
			p[i] = byte(w*31 + seq*7 + i)
		}
	}
	var wg sync.WaitGroup
	for w := range writers {
		wg.Go(func() {
			rng := mrand.New(mrand.NewPCG(uint64(w), 1))
			for seq := range msgs {
				var size int
				switch rng.IntN(4) {
				case 0:
					size = rng.IntN(16)
				case 1:
					size = rng.IntN(2 * ChunkSize)
				default:
					size = rng.IntN(70000)
				}
				msg := make([]byte, 9+size)
				msg[0] = byte(w)
				binary.BigEndian.PutUint32(msg[1:], uint32(seq))
				binary.BigEndian.PutUint32(msg[5:], uint32(size))
				fill(msg[9:], w, seq)
				if _, err := c.Write(msg); err != nil {
					t.Error(err)
					return
				}
			}
		})
	}
	done := harness.Async(func() error {
		r := bufio.NewReader(client)
		next := make([]int, writers)
		hdr := make([]byte, 9)
		for range writers * msgs {
			if _, err := io.ReadFull(r, hdr); err != nil {
				return err
			}
			w, seq, size := int(hdr[0]), int(binary.BigEndian.Uint32(hdr[1:])), int(binary.BigEndian.Uint32(hdr[5:]))
			if w >= writers || seq != next[w] {
				return fmt.Errorf("got writer %d message %d, want message %d", w, seq, next[min(w, writers-1)])
			}
			next[w]++
			body := make([]byte, size)
			if _, err := io.ReadFull(r, body); err != nil {
				return err
			}
			want := make([]byte, size)
			fill(want, w, seq)
			if !bytes.Equal(body, want) {
				return fmt.Errorf("writer %d message %d: payload differs", w, seq)
			}
		}
		return nil
	})
	wg.Wait()
	if err := c.Close(); err != nil {
		t.Fatal(err)
	}
	if err := harness.Recv(t, done, "reader"); err != nil {
		t.Fatal(err)
	}
}

// Writes of every size, from empty to many times max_pending, arrive
// byte for byte.
func TestCoalesceWriteSizes(t *testing.T) {
	lwNoLeaks(t)
	server, client := harness.TCPPair(t)
	c := lwWrap(server, 64<<10, 64<<20, 5*time.Second)
	var want []byte
	done := harness.Async(func() []byte { b, _ := io.ReadAll(client); return b })
	for i, size := range []int{0, 1, ChunkSize - 1, ChunkSize, ChunkSize + 1, 3*ChunkSize + 7, 1<<20 + 3, 2} {
		p := make([]byte, size)
		for j := range p {
			p[j] = byte(i + j*13)
		}
		n, err := c.Write(p)
		if n != size || err != nil {
			t.Fatalf("Write(%d bytes) = %d, %v", size, n, err)
		}
		want = append(want, p...)
	}
	if err := c.Close(); err != nil {
		t.Fatal(err)
	}
	if got := harness.Recv(t, done, "reader"); !bytes.Equal(got, want) {
		t.Fatalf("got %d bytes, want %d (or different content)", len(got), len(want))
	}
}

// A full connection makes Write wait until the flusher has sent bytes.
func TestCoalesceBackpressure(t *testing.T) {
	lwNoLeaks(t)
	g := lwNewGate(t)
	c := lwWrap(g, 4096, 64<<20, 5*time.Second)
	lwFlushing(t, c, []byte{1}) // in flight, blocked in the gate
	if r := harness.Recv(t, lwAsyncWrite(c, make([]byte, 4096)), "Write"); r.err != nil {
		t.Fatal(r.err)
	}
	blocked := lwAsyncWrite(c, bytes.Repeat([]byte{2}, 10))
	lwNotYet(t, blocked, "Write beyond max_pending")
	g.openGate()
	if r := harness.Recv(t, blocked, "Write"); r.n != 10 || r.err != nil {
		t.Fatalf("Write = %d, %v", r.n, r.err)
	}
	if err := c.Close(); err != nil {
		t.Fatal(err)
	}
	if _, all := g.written(); len(all) != 1+4096+10 {
		t.Fatalf("sent %d bytes", len(all))
	}
}

// ReadFrom sends the pending bytes first, then copies straight into the
// socket (sendfile), in order.
func TestCoalesceReadFrom(t *testing.T) {
	lwNoLeaks(t)
	server, client := harness.TCPPair(t)
	c := lwWrap(server, 64<<10, 64<<20, 5*time.Second)
	body := make([]byte, 1<<20+5)
	rand.Read(body)
	name := filepath.Join(t.TempDir(), "body")
	if err := os.WriteFile(name, body, 0o600); err != nil {
		t.Fatal(err)
	}
	f, err := os.Open(name)
	if err != nil {
		t.Fatal(err)
	}
	defer f.Close()
	done := harness.Async(func() []byte { b, _ := io.ReadAll(client); return b })
	head := bytes.Repeat([]byte("h"), 100<<10)
	if _, err := c.Write(head); err != nil {
		t.Fatal(err)
	}
	// net/http's response.ReadFrom calls the connection's ReadFrom with
	// the *os.File, which lets the kernel copy
	if n, err := c.ReadFrom(f); n != int64(len(body)) || err != nil {
		t.Fatalf("ReadFrom = %d, %v", n, err)
	}
	if _, err := c.Write([]byte("tail")); err != nil {
		t.Fatal(err)
	}
	c.Close()
	want := append(append(head, body...), "tail"...)
	if got := harness.Recv(t, done, "reader"); !bytes.Equal(got, want) {
		t.Fatalf("got %d bytes, want %d", len(got), len(want))
	}
}
