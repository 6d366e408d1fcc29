package h2

import (
	"bytes"
	"math/rand/v2"
	"testing"
)

// TestBodyBuffer writes and reads a bodyBuffer in random sizes, against a
// bytes.Buffer holding the same stream: every byte comes out in order,
// Len agrees, and Reset drops exactly what is held.
func TestBodyBuffer(t *testing.T) {
	for seed := range uint64(200) {
		rng := rand.New(rand.NewPCG(seed, 1))
		var got bodyBuffer
		var want bytes.Buffer
		next := byte(0)
		for op := range 400 {
			switch rng.IntN(9) {
			case 0, 1, 2, 3:
				p := make([]byte, rng.IntN(20<<10)+1)
				for i := range p {
					p[i] = next
					next++
				}
				got.Write(p)
				want.Write(p)
			case 4, 5, 6, 7:
				p := make([]byte, rng.IntN(24<<10)+1)
				q := make([]byte, len(p))
				n := got.Read(p)
				m, _ := want.Read(q)
				if n != m || !bytes.Equal(p[:n], q[:m]) {
					t.Fatalf("seed %d, op %d: read %d bytes, want %d (same bytes: %v)", seed, op, n, m, bytes.Equal(p[:min(n, m)], q[:min(n, m)]))
				}
			default:
				if n := got.Reset(); n != want.Len() {
					t.Fatalf("seed %d, op %d: Reset dropped %d bytes, %d were held", seed, op, n, want.Len())
				}
				want.Reset()
			}
			if got.Len() != want.Len() {
				t.Fatalf("seed %d, op %d: Len %d, want %d", seed, op, got.Len(), want.Len())
			}
		}
	}
}

// TestBodyBufferChunks: a 16 KiB frame takes one chunk of the largest
// class, a small one a chunk of the smallest, the next write fills the
// last chunk before taking another, and a chunk read to its end leaves
// the buffer (back to its pool).
func TestBodyBufferChunks(t *testing.T) {
	var b bodyBuffer
	b.Write(make([]byte, 100))
	if len(b.chunks) != 1 || cap(*b.chunks[0]) != 1<<10 {
		t.Fatalf("100 bytes: %d chunks, the first of %d bytes; want one of 1 KiB", len(b.chunks), cap(*b.chunks[0]))
	}
	b.Write(make([]byte, 924))
	if len(b.chunks) != 1 || len(*b.chunks[0]) != 1<<10 {
		t.Fatalf("1 KiB in two writes: %d chunks; want one, full", len(b.chunks))
	}
	b.Write(make([]byte, 16<<10))
	if len(b.chunks) != 2 || cap(*b.chunks[1]) != 16<<10 {
		t.Fatalf("then 16 KiB: %d chunks; want a second of 16 KiB", len(b.chunks))
	}
	b.Read(make([]byte, 1<<10))
	if b.head != 1 || b.chunks[0] != nil || b.Len() != 16<<10 {
		t.Fatalf("after reading the first chunk: head %d, first chunk kept %v, Len %d", b.head, b.chunks[0] != nil, b.Len())
	}
	b.Read(make([]byte, 16<<10))
	if len(b.chunks) != 0 || b.head != 0 || b.Len() != 0 {
		t.Fatalf("after reading all: %d chunks, head %d, Len %d", len(b.chunks), b.head, b.Len())
	}
	frame, into := make([]byte, 16<<10), make([]byte, 16<<10)
	if allocs := testing.AllocsPerRun(100, func() {
		b.Write(frame)
		b.Read(into)
	}); allocs != 0 {
		t.Errorf("a 16 KiB write and read: %.1f allocations, want 0 (pooled chunks)", allocs)
	}
}

// TestBodyBufferNeverDrained: a body read more slowly than it arrives,
// so that the buffer never empties (an upload proxied to a slower
// upstream), keeps a list of chunks the size of what it holds, not of
// everything it was ever given: the chunks read stayed in the list until
// it was read empty. 3 GB through a window of 1 MiB, in frames of 16 KiB
// and of 1 KiB.
func TestBodyBufferNeverDrained(t *testing.T) {
	for _, frameSize := range []int{16 << 10, 1 << 10} {
		var b bodyBuffer
		frame := make([]byte, frameSize)
		p := make([]byte, 2*frameSize)
		const window = 1 << 20
		for range window / frameSize {
			b.Write(frame)
		}
		largest := 0
		const total int64 = 3 << 30 // an int64: 3 GiB overflows a 32-bit int
		for range total / int64(2*frameSize) {
			b.Read(p) // what the window gives back, the client sends again
			b.Write(frame)
			b.Write(frame)
			largest = max(largest, cap(b.chunks))
		}
		if held := window / frameSize; b.Len() != window || largest > 4*held {
			t.Errorf("frames of %d bytes: %d bytes held in %d chunks, and the chunk list grew to %d entries; want %d bytes, at most %d entries",
				frameSize, b.Len(), len(b.chunks)-b.head, largest, window, 4*held)
		}
	}
}
