package h2

import (
	"bytes"
	"fmt"
	"math/rand/v2"
	"reflect"
	"strings"
	"testing"

	"golang.org/x/net/http2"
	"golang.org/x/net/http2/hpack"
)

// TestHeaderBlockReaderMatchesXNet reads random streams of header blocks
// with x/net's Framer (ReadMetaHeaders set) and with headerBlockReader,
// which replaces it: every frame must come out the same, fields,
// truncation, error and error cause (a stream error comes with its frame
// from ours, without from x/net's). The blocks share an HPACK dynamic
// table across a connection, are cut into CONTINUATION frames, and carry
// invalid names and values, pseudo-headers out of order or repeated,
// lists past the size limit, and now and then bytes that are not HPACK,
// other frames inside and between blocks, and a connection cut short.
func TestHeaderBlockReaderMatchesXNet(t *testing.T) {
	seeds := uint64(3000)
	if testing.Short() {
		seeds = 300
	}
	blocks := 0
	for seed := range seeds {
		rng := rand.New(rand.NewPCG(seed, 7))
		wire, n := randomHeaderBlocks(rng)
		blocks += n
		maxList := uint32(256 + rng.IntN(4096))

		xfr := http2.NewFramer(nil, bytes.NewReader(wire))
		xfr.ReadMetaHeaders = hpack.NewDecoder(4096, nil)
		xfr.MaxHeaderListSize = maxList
		src := bytes.NewReader(wire)
		ofr := http2.NewFramer(nil, src)
		ofr.MaxHeaderListSize = maxList
		var ours headerBlockReader
		ours.init(ofr, src)
		for i := 0; ; i++ {
			xf, xerr := xfr.ReadFrame()
			of, oerr := ours.readFrame()
			if se, ok := xerr.(http2.StreamError); ok && xf == nil {
				// ours comes with its frame, whose stream the serve loop
				// notes as opened (readFrame); x/net's without
				if of == nil || of.Header().StreamID != se.StreamID {
					t.Fatalf("seed %d, frame %d: stream error %v came with frame %v; want stream %d's", seed, i, oerr, of, se.StreamID)
				}
				of = nil
			}
			if x, o := describeMetaRead(xf, xerr), describeMetaRead(of, oerr); x != o {
				t.Fatalf("seed %d, frame %d:\nx/net: %s\nours:  %s", seed, i, x, o)
			}
			if xerr != nil {
				if _, ok := xerr.(http2.StreamError); ok {
					continue
				}
				break
			}
		}
	}
	t.Logf("%d seeds, %d header blocks", seeds, blocks)
}

// describeMetaRead says what a read gave: the error with its cause, and
// the frame's stream, fields and truncation.
func describeMetaRead(f http2.Frame, err error) string {
	var b strings.Builder
	fmt.Fprintf(&b, "err %v", err)
	if se, ok := err.(http2.StreamError); ok && se.Cause != nil {
		// the cause's type by its name: x/net's are unexported
		fmt.Fprintf(&b, " (cause %s %v)", reflect.TypeOf(se.Cause).Name(), se.Cause)
	}
	switch f := f.(type) {
	case nil:
		b.WriteString(", no frame")
	case *http2.MetaHeadersFrame:
		fmt.Fprintf(&b, ", stream %d, end stream %v, priority %v %+v, truncated %v, fields %q", f.StreamID, f.StreamEnded(), f.HasPriority(), f.Priority, f.Truncated, f.Fields)
	default:
		fmt.Fprintf(&b, ", %v", reflect.TypeOf(f))
	}
	return b.String()
}

// randomHeaderBlocks returns the frames of a few header blocks, encoded
// with one HPACK encoder, and how many blocks there are.
func randomHeaderBlocks(rng *rand.Rand) ([]byte, int) {
	var out, block bytes.Buffer
	fr := http2.NewFramer(&out, nil)
	fr.AllowIllegalWrites = true
	enc := hpack.NewEncoder(&block)
	names := []string{":method", ":path", ":scheme", ":authority", ":protocol", ":status", ":bogus",
		"user-agent", "accept", "cookie", "trailer", "x-custom", "Upper-Case", "bad name", "", "te"}
	values := []string{"GET", "/", "https", "example.com", "a, b, c", "", "bad\x00value", "tab\tok",
		strings.Repeat("v", 300), strings.Repeat("w", 2000), "trailers"}
	n := 1 + rng.IntN(6)
	for i := range n {
		block.Reset()
		fields := rng.IntN(12)
		for j := range fields {
			hf := hpack.HeaderField{Name: names[rng.IntN(len(names))], Value: values[rng.IntN(len(values))]}
			if j < 4 && rng.IntN(3) > 0 {
				hf.Name = names[j] // mostly well-ordered pseudo-headers first
			}
			hf.Sensitive = rng.IntN(8) == 0
			enc.WriteField(hf)
		}
		p := block.Bytes()
		if rng.IntN(20) == 0 {
			p = append(p[:len(p):len(p)], byte(rng.IntN(256)), byte(rng.IntN(256))) // not HPACK
		}
		id := uint32(2*i + 1)
		first := p
		if len(p) > 0 && rng.IntN(3) == 0 {
			first = p[:rng.IntN(len(p))]
		}
		rest := p[len(first):]
		if rng.IntN(12) == 0 {
			writeMalformedHeaders(fr, rng, id)
		}
		param := http2.HeadersFrameParam{StreamID: id, BlockFragment: first, EndStream: rng.IntN(2) == 0, EndHeaders: len(rest) == 0}
		if rng.IntN(4) == 0 {
			param.PadLength = uint8(rng.IntN(256))
		}
		if rng.IntN(4) == 0 {
			param.Priority = http2.PriorityParam{StreamDep: rng.Uint32() & 0x7fffffff, Exclusive: rng.IntN(2) == 0, Weight: uint8(rng.IntN(256))}
		}
		fr.WriteHeaders(param)
		for len(rest) > 0 {
			if rng.IntN(15) == 0 {
				fr.WritePing(false, [8]byte{}) // inside a block: a connection error
			}
			k := min(len(rest), 1+rng.IntN(len(rest)))
			fr.WriteContinuation(id, k == len(rest), rest[:k])
			rest = rest[k:]
		}
		if rng.IntN(4) == 0 {
			fr.WritePing(false, [8]byte{1}) // between blocks
		}
	}
	if rng.IntN(10) == 0 {
		return out.Bytes()[:rng.IntN(out.Len())], n // the connection cut short
	}
	return out.Bytes(), n
}

// writeMalformedHeaders writes a HEADERS frame that parseHeadersFrame
// refuses: on stream 0, padded or with a priority but too short for it,
// or with more padding than payload.
func writeMalformedHeaders(fr *http2.Framer, rng *rand.Rand, id uint32) {
	switch rng.IntN(4) {
	case 0:
		fr.WriteRawFrame(http2.FrameHeaders, http2.FlagHeadersEndHeaders, 0, []byte{0x82})
	case 1:
		fr.WriteRawFrame(http2.FrameHeaders, http2.FlagHeadersEndHeaders|http2.FlagHeadersPadded, id, nil)
	case 2:
		fr.WriteRawFrame(http2.FrameHeaders, http2.FlagHeadersEndHeaders|http2.FlagHeadersPriority, id, []byte{0, 0, 0, 1}[:rng.IntN(5)])
	case 3:
		fr.WriteRawFrame(http2.FrameHeaders, http2.FlagHeadersEndHeaders|http2.FlagHeadersPadded, id, []byte{9, 0x82, 0})
	}
}

// TestHeaderBlockReaderKeepsNoLargeBuffers: after a large header block
// (a 64 KiB HEADERS frame of 2,000 fields), the connection's reader
// keeps neither its payload buffer nor its slice of fields for the next
// block; a small block's are kept.
func TestHeaderBlockReaderKeepsNoLargeBuffers(t *testing.T) {
	var wire, block bytes.Buffer
	enc := hpack.NewEncoder(&block)
	fw := http2.NewFramer(&wire, nil)
	writeBlock := func(id uint32, fields int, value string) {
		block.Reset()
		for _, f := range reqFields("GET", "/") {
			enc.WriteField(f)
		}
		for i := range fields {
			enc.WriteField(hpack.HeaderField{Name: fmt.Sprintf("x-f%d", i), Value: value})
		}
		fw.WriteHeaders(http2.HeadersFrameParam{StreamID: id, BlockFragment: block.Bytes(), EndStream: true, EndHeaders: true})
	}
	writeBlock(1, 2000, strings.Repeat("v", 20))
	writeBlock(3, 4, "small")
	writeBlock(5, 4, "small")
	src := bytes.NewReader(wire.Bytes())
	fr := http2.NewFramer(nil, src)
	fr.MaxHeaderListSize = 1 << 20
	var r headerBlockReader
	r.init(fr, src)
	for i, want := range []int{2004, 8, 8} {
		f, err := r.readFrame()
		if err != nil {
			t.Fatalf("block %d: %v", i, err)
		}
		if n := len(f.(*http2.MetaHeadersFrame).Fields); n != want {
			t.Fatalf("block %d: %d fields, want %d", i, n, want)
		}
		if i == 0 {
			if cap(r.payload) > maxKeptPayload {
				t.Errorf("after a large block the reader keeps a payload buffer of %d bytes", cap(r.payload))
			}
			continue
		}
		if cap(r.mh.Fields) > maxKeptFields {
			t.Errorf("block %d: the reader keeps a slice of %d fields from the large block", i, cap(r.mh.Fields))
		}
	}
	if cap(r.payload) == 0 || cap(r.mh.Fields) == 0 {
		t.Error("a small block's buffers are not kept")
	}
}
