package h2file

import (
	"bytes"
	"crypto/tls"
	"fmt"
	"io"
	"strings"
	"testing"
	"time"

	"golang.org/x/net/http2"
	"golang.org/x/net/http2/hpack"
)

// h2StreamEnd is how a raw HTTP/2 response stream ended.
type h2StreamEnd struct {
	status    string
	bodyBytes int64
	endStream bool          // a clean END_STREAM was received
	rst       http2.ErrCode // the RST_STREAM code, if reset
	reset     bool
}

// rawH2Get sends one GET over a fresh HTTP/2 connection, frame by frame,
// and reports how the stream ended. afterBytes is called once, when at least
// trigger bytes of body have arrived (nil: never).
func rawH2Get(t *testing.T, addr, path string, trigger int64, afterBytes func()) h2StreamEnd {
	t.Helper()
	conn, err := tls.Dial("tcp", addr, &tls.Config{InsecureSkipVerify: true, NextProtos: []string{"h2"}}) //nolint:gosec // test
	if err != nil {
		t.Fatal(err)
	}
	defer conn.Close()
	if p := conn.ConnectionState().NegotiatedProtocol; p != "h2" {
		t.Fatalf("ALPN negotiated %q, want h2", p)
	}
	conn.SetDeadline(time.Now().Add(30 * time.Second))
	if _, err := io.WriteString(conn, http2.ClientPreface); err != nil {
		t.Fatal(err)
	}
	fr := http2.NewFramer(conn, conn)
	if err := fr.WriteSettings(); err != nil {
		t.Fatal(err)
	}
	var hb bytes.Buffer
	enc := hpack.NewEncoder(&hb)
	for _, f := range [][2]string{{":method", "GET"}, {":scheme", "https"}, {":authority", addr}, {":path", path}} {
		enc.WriteField(hpack.HeaderField{Name: f[0], Value: f[1]})
	}
	if err := fr.WriteHeaders(http2.HeadersFrameParam{StreamID: 1, BlockFragment: hb.Bytes(), EndStream: true, EndHeaders: true}); err != nil {
		t.Fatal(err)
	}
	var end h2StreamEnd
	dec := hpack.NewDecoder(4096, func(f hpack.HeaderField) {
		if f.Name == ":status" {
			end.status = f.Value
		}
	})
	triggered := afterBytes == nil
	for {
		frame, err := fr.ReadFrame()
		if err != nil {
			t.Fatalf("reading frames after %d body bytes: %v", end.bodyBytes, err)
		}
		switch f := frame.(type) {
		case *http2.SettingsFrame:
			if !f.IsAck() {
				fr.WriteSettingsAck()
			}
		case *http2.HeadersFrame:
			if _, err := dec.Write(f.HeaderBlockFragment()); err != nil {
				t.Fatal(err)
			}
			if f.StreamEnded() {
				end.endStream = true
				return end
			}
		case *http2.DataFrame:
			n := len(f.Data())
			end.bodyBytes += int64(n)
			if n > 0 {
				// give the credit back, like a client that reads everything
				fr.WriteWindowUpdate(0, uint32(n))
				fr.WriteWindowUpdate(1, uint32(n))
			}
			if !triggered && end.bodyBytes >= trigger {
				triggered = true
				afterBytes()
			}
			if f.StreamEnded() {
				end.endStream = true
				return end
			}
		case *http2.RSTStreamFrame:
			end.reset, end.rst = true, f.ErrCode
			return end
		case *http2.GoAwayFrame:
			t.Fatalf("GOAWAY %v after %d bytes", f.ErrCode, end.bodyBytes)
		}
	}
}

// String describes the end of the stream for failure messages.
func (e h2StreamEnd) String() string {
	var b strings.Builder
	fmt.Fprintf(&b, "status %s, %d body bytes, ", e.status, e.bodyBytes)
	if e.reset {
		fmt.Fprintf(&b, "RST_STREAM %v", e.rst)
	} else if e.endStream {
		b.WriteString("clean END_STREAM")
	}
	return b.String()
}
