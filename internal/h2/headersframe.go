package h2

import (
	"encoding/binary"
	"io"

	"golang.org/x/net/http2"
)

// maxKeptPayload is the largest HEADERS payload buffer a connection
// keeps for its next ones, and maxKeptFields the most decoded fields
// whose slice it keeps (metaframe.go): browsers' header blocks are a few
// hundred bytes of a few dozen fields, and a rare large one is not kept
// for the connection's life (x/net keeps neither).
const (
	maxKeptPayload = 16 << 10
	maxKeptFields  = 256
)

// readHeadersFrame reads the payload of the HEADERS frame whose header the
// Framer read (fh, valid and with its order checked) into r.hf, as x/net's
// ReadFrameForHeader and parseHeadersFrame would, error for error (v0.60),
// and returns it with its header block fragment: the Framer allocates a
// HeadersFrame per frame, this one is the connection's and is valid until
// the next frame is read.
func (r *headerBlockReader) readHeadersFrame(fh http2.FrameHeader) (*http2.HeadersFrame, []byte, error) {
	p := r.payload
	if int(fh.Length) > maxKeptPayload {
		// at most the Framer's max read size (1 MiB by default), for
		// this frame only: kept, it would stay with the connection
		p = make([]byte, fh.Length)
	} else if int(fh.Length) > cap(r.payload) {
		r.payload = make([]byte, fh.Length)
		p = r.payload
	}
	p = p[:fh.Length]
	if _, err := io.ReadFull(r.src, p); err != nil {
		return nil, nil, err
	}
	if fh.StreamID == 0 {
		return nil, nil, http2.ConnectionError(http2.ErrCodeProtocol)
	}
	var padLength int
	if fh.Flags.Has(http2.FlagHeadersPadded) {
		if len(p) == 0 {
			return nil, nil, io.ErrUnexpectedEOF
		}
		padLength, p = int(p[0]), p[1:]
	}
	r.hf = http2.HeadersFrame{FrameHeader: fh}
	if fh.Flags.Has(http2.FlagHeadersPriority) {
		if len(p) < 5 {
			return nil, nil, io.ErrUnexpectedEOF
		}
		dep := binary.BigEndian.Uint32(p)
		r.hf.Priority = http2.PriorityParam{StreamDep: dep & 0x7fffffff, Exclusive: dep&0x80000000 != 0, Weight: p[4]}
		p = p[5:]
	}
	if len(p) < padLength {
		// with the frame: it opened its stream
		return &r.hf, nil, http2.StreamError{StreamID: fh.StreamID, Code: http2.ErrCodeProtocol}
	}
	return &r.hf, p[:len(p)-padLength], nil
}
