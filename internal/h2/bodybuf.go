package h2

import "sync"

// bodyChunkSizes are the sizes of a bodyBuffer's chunks: the smallest that
// holds a write, up to the largest (a DATA frame of the default
// MAX_FRAME_SIZE). x/net's dataBuffer has the same classes.
var bodyChunkSizes = [...]int{1 << 10, 2 << 10, 4 << 10, 8 << 10, 16 << 10}

// bodyChunkPools hold the chunks of each size class, as pointers so that
// Put does not allocate.
var bodyChunkPools [len(bodyChunkSizes)]sync.Pool

func init() {
	for i, size := range bodyChunkSizes {
		bodyChunkPools[i].New = func() any { b := make([]byte, size); return &b }
	}
}

// bodyBuffer holds the DATA received for a request body and not read yet,
// in pooled chunks of at most 16 KiB: a stream's window (1 MiB by default)
// filled frame by frame grows no slice by doubling, and what was read goes
// back to the pools at once. A client that fills each window of stream
// after stream of a handler that reads nothing (CVE-2025-8671's "DATA past
// the window") then costs one connection window of chunks, which the next
// stream reuses, instead of a fresh slice of up to twice the window each.
type bodyBuffer struct {
	chunks []*[]byte // pooled chunks, each filled to its len; chunks[:head] are read and nil
	head   int       // the first chunk not read to its end
	r      int       // read offset in *chunks[head]
	size   int       // bytes held
}

// Len returns the number of bytes held.
func (b *bodyBuffer) Len() int { return b.size }

// Write appends p, filling the last chunk first.
func (b *bodyBuffer) Write(p []byte) {
	b.size += len(p)
	if n := len(b.chunks); n > b.head {
		p = fillBodyChunk(b.chunks[n-1], p)
	}
	for len(p) > 0 {
		c := getBodyChunk(len(p))
		p = fillBodyChunk(c, p)
		if len(b.chunks) == cap(b.chunks) && b.head > 0 && b.head >= len(b.chunks)/2 {
			b.compact()
		}
		b.chunks = append(b.chunks, c)
	}
}

// compact moves the chunks not read to the front of the list: a buffer
// read more slowly than it is written, and so never read empty, keeps a
// list about the size of what it holds (at most four times as long), not
// one of every chunk it was ever given (x/net's dataBuffer shifts its
// list at every chunk read). Called when the list is full and at least
// half of it read, it moves at most as many entries as were appended
// since the last move.
func (b *bodyBuffer) compact() {
	n := copy(b.chunks, b.chunks[b.head:])
	clear(b.chunks[n:])
	b.chunks = b.chunks[:n]
	b.head = 0
}

// Read copies up to len(p) held bytes into p, oldest first, and returns
// the chunks it empties to their pools.
func (b *bodyBuffer) Read(p []byte) int {
	n := 0
	for n < len(p) && b.head < len(b.chunks) {
		c := *b.chunks[b.head]
		k := copy(p[n:], c[b.r:])
		n += k
		b.r += k
		if b.r == len(c) {
			putBodyChunk(b.chunks[b.head])
			b.chunks[b.head] = nil
			b.head++
			b.r = 0
		}
	}
	b.size -= n
	if b.head == len(b.chunks) {
		// all read: the slice's array serves the next writes
		b.chunks = b.chunks[:0]
		b.head = 0
	}
	return n
}

// Reset drops what is held, returning every chunk to its pool, and
// returns how many bytes were dropped.
func (b *bodyBuffer) Reset() int {
	n := b.size
	for _, c := range b.chunks[b.head:] {
		putBodyChunk(c)
	}
	*b = bodyBuffer{}
	return n
}

// fillBodyChunk copies what fits of p after the bytes c holds and returns
// the rest of p.
func fillBodyChunk(c *[]byte, p []byte) []byte {
	held := len(*c)
	k := copy((*c)[held:cap(*c)], p)
	*c = (*c)[:held+k]
	return p[k:]
}

// getBodyChunk returns an empty chunk of the smallest class that holds n
// bytes, or of the largest.
func getBodyChunk(n int) *[]byte {
	i := 0
	for i < len(bodyChunkSizes)-1 && n > bodyChunkSizes[i] {
		i++
	}
	c := bodyChunkPools[i].Get().(*[]byte)
	*c = (*c)[:0]
	return c
}

// putBodyChunk returns c to the pool of its class.
func putBodyChunk(c *[]byte) {
	for i, size := range bodyChunkSizes {
		if cap(*c) == size {
			bodyChunkPools[i].Put(c)
			return
		}
	}
}
