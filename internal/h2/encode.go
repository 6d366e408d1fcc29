package h2

import (
	"net/http"
	"slices"
	"strconv"
	"strings"

	"golang.org/x/net/http/httpguts"
	"golang.org/x/net/http2"
	"golang.org/x/net/http2/hpack"

	"github.com/h2file/caddy-h2file/internal/h2/wire"
)

// responseHead is what a HEADERS block of a response carries, as x/net's
// writeResHeaders: the status (0 for trailers), the handler's header
// (a final response's snapshot; or only the keys in trailers when
// non-nil), and the values the server adds.
type responseHead struct {
	status        int
	snap          *headerSnapshot
	h             http.Header
	trailers      []string
	endStream     bool
	contentType   string
	contentLength string
	date          string
}

// writeHeaders puts the HEADERS (and CONTINUATION) frames of head for st
// into the batch; with flush it is written at once, else the caller's
// next frames go with it.
func (c *conn) writeHeaders(st *stream, head *responseHead, flush bool) error {
	c.mu.Lock()
	defer c.mu.Unlock()
	if err := st.writeErrLocked(); err != nil {
		return err
	}
	// room only (no window): not in the line of writers waiting for the
	// connection's window, which could be waiting for it for long; room
	// comes back with every socket write
	c.waitRoomLocked(st)
	if err := st.writeErrLocked(); err != nil {
		return err
	}
	c.encodeHeadLocked(head)
	c.appendHeaderBlockLocked(st.id, c.hbuf.Bytes(), head.endStream)
	st.sentHeaders = true
	if head.status >= 200 {
		c.flood.earn(floodResponseCredit) // a response
	}
	if head.endStream {
		c.endLocalLocked(st)
	}
	if flush || head.endStream {
		c.flushLocked()
	}
	return nil
}

// write100ContinueLocked sends the 100 Continue a request asked for,
// unless the handler has sent response headers (a final response, or
// another 1xx) by then: after a final response it would be a HEADERS that
// does not end the stream, which makes the response malformed (RFC 9113
// §8.1). x/net drops it the same way (golang.org/issue/14030).
func (c *conn) write100ContinueLocked(st *stream) {
	if st.closed || st.sentHeaders || c.closed || (c.goingAway && c.goAwayCode != http2.ErrCodeNo) {
		return
	}
	c.hbuf.Reset()
	c.henc.WriteField(hpack.HeaderField{Name: ":status", Value: "100"})
	c.appendHeaderBlockLocked(st.id, c.hbuf.Bytes(), false)
	c.flushLocked()
}

// encodeHeadLocked encodes head into c.hbuf with the connection's HPACK
// encoder, in x/net's order: :status, the header's keys sorted (lower
// case, invalid names and values left out, Transfer-Encoding only as
// "trailers"), then Content-Type, Content-Length and Date.
func (c *conn) encodeHeadLocked(head *responseHead) {
	c.hbuf.Reset()
	if head.status != 0 {
		c.henc.WriteField(hpack.HeaderField{Name: ":status", Value: statusString(head.status)})
	}
	if head.snap != nil {
		for _, f := range head.snap.fields {
			if !f.deleted {
				c.encodeFieldLocked(f.key, f.values)
			}
		}
	} else {
		keys := head.trailers
		if keys == nil {
			keys = c.keys[:0]
			for k := range head.h {
				keys = append(keys, k)
			}
			slices.Sort(keys)
			c.keys = keys[:0]
		}
		for _, k := range keys {
			c.encodeFieldLocked(k, head.h[k])
		}
	}
	if head.contentType != "" {
		c.henc.WriteField(hpack.HeaderField{Name: "content-type", Value: head.contentType})
	}
	if head.contentLength != "" {
		c.henc.WriteField(hpack.HeaderField{Name: "content-length", Value: head.contentLength})
	}
	if head.date != "" {
		c.henc.WriteField(hpack.HeaderField{Name: "date", Value: head.date})
	}
}

// encodeFieldLocked encodes the values of the handler's header key k,
// lower-cased; invalid names and values are left out, Transfer-Encoding
// is kept only as "trailers".
func (c *conn) encodeFieldLocked(k string, vv []string) {
	name, ok := lowerHeader(k)
	if !ok || !validWireHeaderFieldName(name) {
		return
	}
	isTE := name == "transfer-encoding"
	for _, v := range vv {
		if !httpguts.ValidHeaderFieldValue(v) {
			continue
		}
		if isTE && v != "trailers" {
			continue
		}
		c.henc.WriteField(hpack.HeaderField{Name: name, Value: v})
	}
}

// appendHeaderBlockLocked appends block as a HEADERS frame and as many
// CONTINUATION frames as 16 KiB fragments need (x/net's split).
func (c *conn) appendHeaderBlockLocked(id uint32, block []byte, endStream bool) {
	const maxFrag = 16384
	c.batch.ensure()
	before := len(c.batch.buf)
	first := true
	for first || len(block) > 0 {
		frag := block
		if len(frag) > maxFrag {
			frag = frag[:maxFrag]
		}
		block = block[len(frag):]
		var flags wire.Flags
		t := wire.FrameContinuation
		if first {
			t = wire.FrameHeaders
			if endStream {
				flags |= wire.FlagEndStream
			}
		}
		if len(block) == 0 {
			flags |= wire.FlagEndHeaders
		}
		c.batch.appendFrameHeader(len(frag), t, flags, id)
		c.batch.buf = append(c.batch.buf, frag...)
		first = false
	}
	if after := len(c.batch.buf); after > maxBatch {
		// the handler's, not the reader's backlog (backlogLocked)
		c.batch.blockExcess += after - max(before, maxBatch)
	}
}

// statusString is the :status value of code.
func statusString(code int) string {
	switch code {
	case 200:
		return "200"
	case 204:
		return "204"
	case 206:
		return "206"
	case 304:
		return "304"
	case 404:
		return "404"
	}
	return strconv.Itoa(code)
}

// commonLower maps the canonical form of common response header names
// to their lower case, so that encoding them allocates nothing.
var commonLower = func() map[string]string {
	m := make(map[string]string)
	for _, k := range []string{
		"Accept-Ranges", "Age", "Alt-Svc", "Cache-Control", "Content-Disposition",
		"Content-Encoding", "Content-Language", "Content-Length", "Content-Location",
		"Content-Range", "Content-Security-Policy", "Content-Type", "Date", "Etag",
		"Expires", "Last-Modified", "Link", "Location", "Server", "Set-Cookie",
		"Strict-Transport-Security", "Trailer", "Transfer-Encoding", "Vary",
		"Via", "Www-Authenticate", "X-Content-Type-Options", "X-Frame-Options",
		"Access-Control-Allow-Origin", "Retry-After", "Referrer-Policy",
	} {
		m[k] = strings.ToLower(k)
	}
	return m
}()

// lowerHeader is k in lower case, and whether it is ASCII (x/net's
// httpcommon.LowerHeader).
func lowerHeader(k string) (string, bool) {
	if v, ok := commonLower[k]; ok {
		return v, true
	}
	for i := 0; i < len(k); i++ {
		if k[i] >= 0x80 {
			return "", false
		}
	}
	return strings.ToLower(k), true
}

// validWireHeaderFieldName is x/net's: a valid field name with no upper
// case letter.
func validWireHeaderFieldName(v string) bool {
	if len(v) == 0 {
		return false
	}
	for _, r := range v {
		if !httpguts.IsTokenRune(r) {
			return false
		}
		if 'A' <= r && r <= 'Z' {
			return false
		}
	}
	return true
}
