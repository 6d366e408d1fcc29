package h2

import (
	"errors"
	"fmt"
	"io"
	"strings"

	"golang.org/x/net/http/httpguts"
	"golang.org/x/net/http2"
	"golang.org/x/net/http2/hpack"
)

// headerBlockReader turns a HEADERS frame and the CONTINUATION frames after
// it into a MetaHeadersFrame, as x/net's Framer does with ReadMetaHeaders
// set (readMetaFrame, x/net v0.60), check for check and error for error,
// with its state kept for the connection's life: x/net's allocates the
// frames, a closure and its captured variables, and grows the field slice
// from nothing, about nine objects per request. The MetaHeadersFrame it
// returns, its HeadersFrame and its Fields, are valid until the next frame
// is read: the serve goroutine handles each frame before it reads the
// next, and what it keeps of the fields (the request's header) is copied
// out of the slice.
type headerBlockReader struct {
	fr      *http2.Framer // read with ReadMetaHeaders nil
	src     io.Reader     // what fr reads: HEADERS payloads are read here
	hdec    *hpack.Decoder
	mh      http2.MetaHeadersFrame
	hf      http2.HeadersFrame // the last HEADERS frame (headersframe.go)
	payload []byte             // its payload

	// the block being decoded, read by emit
	headersRemain, trailersRemain uint32
	sawRegular                    bool
	invalid                       error // pseudo-header field errors
}

// init makes r read fr's frames; src is the reader fr was made with.
func (r *headerBlockReader) init(fr *http2.Framer, src io.Reader) {
	r.fr, r.src = fr, src
	r.hdec = hpack.NewDecoder(4096, nil)
	r.hdec.SetEmitFunc(r.emit) // once: a method value allocates
}

// readFrame reads the next frame, a HEADERS frame with its CONTINUATION
// frames as a *http2.MetaHeadersFrame. A header block that fails comes
// with its frame when its stream ID is known, so that the serve loop
// notes the stream as opened (RFC 9113 §5.1: a HEADERS frame opens its
// stream, whatever it holds).
func (r *headerBlockReader) readFrame() (http2.Frame, error) {
	fh, err := r.fr.ReadFrameHeader()
	if err != nil {
		return nil, err
	}
	if fh.Type != http2.FrameHeaders {
		return r.fr.ReadFrameForHeader(fh)
	}
	hf, frag, err := r.readHeadersFrame(fh)
	if err != nil {
		if hf != nil {
			return hf, err
		}
		return nil, err
	}
	return r.readMeta(hf, frag)
}

func (r *headerBlockReader) maxHeaderListSize() uint32 {
	if r.fr.MaxHeaderListSize == 0 {
		return 16 << 20 // x/net's default
	}
	return r.fr.MaxHeaderListSize
}

// emit is x/net's emit function of readMetaFrame.
func (r *headerBlockReader) emit(hf hpack.HeaderField) {
	if !httpguts.ValidHeaderFieldValue(hf.Value) {
		// not the value: it may be sensitive
		r.invalid = headerFieldValueError(hf.Name)
	}
	if strings.HasPrefix(hf.Name, ":") {
		if r.sawRegular {
			r.invalid = errPseudoAfterRegular
		}
	} else {
		r.sawRegular = true
		if !validWireHeaderFieldName(hf.Name) {
			r.invalid = headerFieldNameError(hf.Name)
		}
	}
	if r.invalid != nil {
		r.hdec.SetEmitEnabled(false)
		return
	}
	remain, size := &r.headersRemain, hf.Size()
	if hf.Name == "trailer" {
		// x/net's arithmetic: each comma-separated name counted as a
		// field of its own
		fieldCount := strings.Count(hf.Value, ",") + 1
		remain = &r.trailersRemain
		size = uint32(len(hf.Value)-fieldCount+1) + uint32(fieldCount)*hpack.HeaderField{}.Size()
	}
	if size > *remain {
		r.hdec.SetEmitEnabled(false)
		r.mh.Truncated = true
		r.headersRemain, r.trailersRemain = 0, 0
		return
	}
	*remain -= size
	r.mh.Fields = append(r.mh.Fields, hf)
}

// readMeta decodes the header block that hf, with fragment frag, begins,
// as readMetaFrame.
func (r *headerBlockReader) readMeta(hf *http2.HeadersFrame, frag []byte) (http2.Frame, error) {
	fields := r.mh.Fields
	if cap(fields) > maxKeptFields {
		fields = nil // a large block's, not kept (headersframe.go)
	}
	clear(fields) // drops the strings of the last block
	r.mh = http2.MetaHeadersFrame{HeadersFrame: hf, Fields: fields[:0]}
	mh := &r.mh
	r.headersRemain, r.trailersRemain = r.maxHeaderListSize(), r.maxHeaderListSize()
	r.sawRegular, r.invalid = false, nil
	r.hdec.SetEmitEnabled(true)
	r.hdec.SetMaxStringLength(r.maxHeaderStringLen())

	ended := hf.HeadersEnded()
	for {
		// a fragment more than twice what may still be accepted, or
		// any fragment once the list was cut, is not parsed: the
		// connection ends
		if int64(len(frag)) > 2*int64(r.headersRemain+r.trailersRemain) {
			return mh, http2.ConnectionError(http2.ErrCodeProtocol)
		}
		// so does a CONTINUATION after an invalid field, whose size is
		// no longer tracked
		if r.invalid != nil {
			return mh, http2.ConnectionError(http2.ErrCodeProtocol)
		}
		if _, err := r.hdec.Write(frag); err != nil {
			return mh, http2.ConnectionError(http2.ErrCodeCompression)
		}
		if ended {
			break
		}
		f, err := r.fr.ReadFrame()
		if err != nil {
			return nil, err
		}
		cf := f.(*http2.ContinuationFrame) // the Framer's checkFrameOrder
		frag, ended = cf.HeaderBlockFragment(), cf.HeadersEnded()
	}
	if err := r.hdec.Close(); err != nil {
		return mh, http2.ConnectionError(http2.ErrCodeCompression)
	}
	if r.invalid != nil {
		return mh, http2.StreamError{StreamID: mh.StreamID, Code: http2.ErrCodeProtocol, Cause: r.invalid}
	}
	if err := checkPseudos(mh.PseudoFields()); err != nil {
		return mh, http2.StreamError{StreamID: mh.StreamID, Code: http2.ErrCodeProtocol, Cause: err}
	}
	return mh, nil
}

func (r *headerBlockReader) maxHeaderStringLen() int {
	if v := int(r.maxHeaderListSize()); v >= 0 {
		return v
	}
	return 0 // no limit, where the size overflows an int
}

// checkPseudos is x/net's MetaHeadersFrame.checkPseudos.
func checkPseudos(pf []hpack.HeaderField) error {
	var isRequest, isResponse bool
	for i, hf := range pf {
		switch hf.Name {
		case ":method", ":path", ":scheme", ":authority", ":protocol":
			isRequest = true
		case ":status":
			isResponse = true
		default:
			return pseudoHeaderError(hf.Name)
		}
		for _, hf2 := range pf[:i] {
			if hf.Name == hf2.Name {
				return duplicatePseudoHeaderError(hf.Name)
			}
		}
	}
	if isRequest && isResponse {
		return errMixPseudoHeaderTypes
	}
	return nil
}

// x/net's errors of a header block, with its messages.
var (
	errMixPseudoHeaderTypes = errors.New("mix of request and response pseudo headers")
	errPseudoAfterRegular   = errors.New("pseudo header field after regular")
)

type (
	pseudoHeaderError          string
	duplicatePseudoHeaderError string
	headerFieldNameError       string
	headerFieldValueError      string
)

func (e pseudoHeaderError) Error() string { return fmt.Sprintf("invalid pseudo-header %q", string(e)) }
func (e duplicatePseudoHeaderError) Error() string {
	return fmt.Sprintf("duplicate pseudo-header %q", string(e))
}
func (e headerFieldNameError) Error() string {
	return fmt.Sprintf("invalid header field name %q", string(e))
}
func (e headerFieldValueError) Error() string {
	return fmt.Sprintf("invalid header field value for %q", string(e))
}
