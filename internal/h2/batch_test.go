package h2

import (
	"bytes"
	"testing"
)

// TestBatchSealed: after seal (a GOAWAY with an error just added), the
// writer gets the frames up to it, then nothing, whatever is added to the
// batch meanwhile or later (RFC 9113 §6.8, x/net's rule): the DATA of a
// stream in line for room, a window given back, went out after it.
func TestBatchSealed(t *testing.T) {
	var b batch
	b.ensure()
	b.buf = append(b.buf, "before"...)
	b.seal()
	b.buf = append(b.buf, "after"...)
	if buf, _ := b.take(); !bytes.Equal(buf, []byte("before")) {
		t.Errorf("first write %q; want %q", buf, "before")
	}
	for i := range 2 {
		b.ensure()
		b.buf = append(b.buf, "later"...)
		if buf, _ := b.take(); len(buf) != 0 {
			t.Errorf("write %d after the seal %q; want nothing", i+2, buf)
		}
	}

	var unsealed batch
	unsealed.ensure()
	unsealed.buf = append(unsealed.buf, "frames"...)
	if buf, _ := unsealed.take(); !bytes.Equal(buf, []byte("frames")) {
		t.Errorf("unsealed write %q; want %q", buf, "frames")
	}
}
