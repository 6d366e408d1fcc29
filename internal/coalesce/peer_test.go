package coalesce

import (
	"bytes"
	"crypto/tls"
	"io"
	"testing"
	"time"

	"golang.org/x/net/http2"
	"golang.org/x/net/http2/hpack"

	"github.com/h2file/caddy-h2file/internal/harness"
)

// h2Opening encodes client frames after the preface: build writes them
// with a framer, then a HEADERS frame for stream 1 with a header block of
// headerBlock bytes.
func h2Opening(t *testing.T, headerBlock int, build func(fr *http2.Framer)) []byte {
	t.Helper()
	var buf bytes.Buffer
	fr := http2.NewFramer(&buf, nil)
	if build != nil {
		build(fr)
	}
	var hb bytes.Buffer
	enc := hpack.NewEncoder(&hb)
	for _, f := range []hpack.HeaderField{{Name: ":method", Value: "GET"}, {Name: ":scheme", Value: "https"}, {Name: ":path", Value: "/"}, {Name: ":authority", Value: "localhost"}} {
		if err := enc.WriteField(f); err != nil {
			t.Fatal(err)
		}
	}
	for hb.Len() < headerBlock {
		if err := enc.WriteField(hpack.HeaderField{Name: "x-pad", Value: "0123456789abcdef0123456789abcdef", Sensitive: true}); err != nil {
			t.Fatal(err)
		}
	}
	if err := fr.WriteHeaders(http2.HeadersFrameParam{StreamID: 1, BlockFragment: hb.Bytes(), EndStream: true, EndHeaders: true}); err != nil {
		t.Fatal(err)
	}
	return buf.Bytes()
}

// peerWindowsCases are client openings and what a scan of them must find.
func peerWindowsCases(t *testing.T) []struct {
	desc          string
	opening       []byte
	known         bool
	stream, connW int64
} {
	settings := func(s ...http2.Setting) func(fr *http2.Framer) {
		return func(fr *http2.Framer) { _ = fr.WriteSettings(s...) }
	}
	type c = struct {
		desc          string
		opening       []byte
		known         bool
		stream, connW int64
	}
	return []c{
		{"a browser: large windows", h2Opening(t, 40, func(fr *http2.Framer) {
			_ = fr.WriteSettings(http2.Setting{ID: http2.SettingHeaderTableSize, Val: 65536}, http2.Setting{ID: http2.SettingEnablePush, Val: 0},
				http2.Setting{ID: http2.SettingInitialWindowSize, Val: 6291456}, http2.Setting{ID: http2.SettingMaxHeaderListSize, Val: 262144})
			_ = fr.WriteWindowUpdate(0, 15663105)
		}), true, 6291456, 65535 + 15663105},
		{"h2load -w 16 -W 16", h2Opening(t, 40, settings(http2.Setting{ID: http2.SettingMaxConcurrentStreams, Val: 100}, http2.Setting{ID: http2.SettingInitialWindowSize, Val: 65535})),
			true, 65535, 65535},
		{"no INITIAL_WINDOW_SIZE: the default", h2Opening(t, 40, func(fr *http2.Framer) {
			_ = fr.WriteSettings(http2.Setting{ID: http2.SettingMaxFrameSize, Val: 1 << 20})
			_ = fr.WriteWindowUpdate(0, 1<<30)
		}), true, 65535, 65535 + 1<<30},
		{"an empty SETTINGS, acks and PRIORITY frames in between, two WINDOW_UPDATEs, the last window setting wins", h2Opening(t, 40, func(fr *http2.Framer) {
			_ = fr.WriteSettings()
			_ = fr.WriteSettingsAck()
			_ = fr.WritePriority(3, http2.PriorityParam{Weight: 200})
			_ = fr.WriteWindowUpdate(0, 1000)
			_ = fr.WriteSettings(http2.Setting{ID: http2.SettingInitialWindowSize, Val: 1 << 20}, http2.Setting{ID: http2.SettingInitialWindowSize, Val: 1 << 18})
			_ = fr.WriteWindowUpdate(0, 2000)
		}), true, 1 << 18, 65535 + 3000},
		{"a WINDOW_UPDATE for a stream ends the opening", h2Opening(t, 40, func(fr *http2.Framer) {
			_ = fr.WriteSettings(http2.Setting{ID: http2.SettingInitialWindowSize, Val: 1 << 24})
			_ = fr.WriteWindowUpdate(1, 1<<24)
		}), true, 1 << 24, 65535},
		{"a large first request is not waited for", h2Opening(t, 4000, settings(http2.Setting{ID: http2.SettingInitialWindowSize, Val: 1 << 24})),
			true, 1 << 24, 65535},
		{"no SETTINGS before the request: unknown", h2Opening(t, 40, nil), false, 0, 0},
		{"an opening longer than the scan: unknown", h2Opening(t, 40, func(fr *http2.Framer) {
			var s []http2.Setting
			for range 100 {
				s = append(s, http2.Setting{ID: http2.SettingInitialWindowSize, Val: 1 << 24})
			}
			_ = fr.WriteSettings(s...)
		}), false, 0, 0},
	}
}

// TestPeerWindowsScanner: the scan finds the client's windows however its
// opening is cut into reads, ends as soon as the header of the first frame
// that is not about windows (the first request's) is there, and never claims windows it did not see.
func TestPeerWindowsScanner(t *testing.T) {
	for _, tc := range peerWindowsCases(t) {
		// where the header of the first frame that is not SETTINGS,
		// PRIORITY or a connection WINDOW_UPDATE is complete
		decided := len(tc.opening)
		for off := 0; off+9 <= len(tc.opening); {
			length := int(tc.opening[off])<<16 | int(tc.opening[off+1])<<8 | int(tc.opening[off+2])
			typ, stream0 := tc.opening[off+3], string(tc.opening[off+5:off+9]) == "\x00\x00\x00\x00"
			if !(typ == 0x4 || typ == 0x2 || typ == 0x8 && stream0) {
				decided = off + 9
				break
			}
			off += 9 + length
		}
		if !tc.known && decided > peerScanMax {
			decided = peerScanMax
		}
		for _, step := range []int{1, 2, 5, 9, 64, len(tc.opening)} {
			var w Peer
			var s peerScanner
			over := -1
			for off := 0; off < len(tc.opening) && over < 0; off += step {
				if s.feed(&w, tc.opening[off:min(off+step, len(tc.opening))]) {
					over = min(off+step, len(tc.opening))
				}
			}
			if over < decided || over > decided+step-1 {
				t.Errorf("%s, reads of %d: the scan ended after %d bytes, want %d", tc.desc, step, over, decided)
			}
			window, known := w.SmallestWindow()
			if known != tc.known || known && (w.stream.Load() != tc.stream || w.conn.Load() != tc.connW || window != min(tc.stream, tc.connW)) {
				t.Errorf("%s, reads of %d: known %v, stream %d, connection %d; want %v, %d, %d", tc.desc, step, known, w.stream.Load(), w.conn.Load(), tc.known, tc.stream, tc.connW)
			}
		}
	}
	var nilWindows *Peer
	if _, known := nilWindows.SmallestWindow(); known {
		t.Error("no windows (below TLS) are known")
	}
}

// TestPeerWindowsThroughTLSCoalesceConn: above TLS, the wrapper learns the
// windows of an HTTP/2 client from its opening, hands every byte on
// unchanged, and reports the windows with its local address; over
// HTTP/1.1 it knows none.
func TestPeerWindowsThroughTLSCoalesceConn(t *testing.T) {
	lwNoLeaks(t)
	testCert := harness.NewCert(t)
	opening := h2Opening(t, 40, func(fr *http2.Framer) {
		_ = fr.WriteSettings(http2.Setting{ID: http2.SettingInitialWindowSize, Val: 1 << 20})
		_ = fr.WriteWindowUpdate(0, 1<<24)
	})
	for _, tc := range []struct {
		alpn   string
		sent   string
		known  bool
		window int64
	}{
		{"h2", http2.ClientPreface + string(opening), true, 1 << 20},
		{"http/1.1", "GET / HTTP/1.1\r\nHost: x\r\n\r\n", false, 0},
	} {
		server, client := harness.TCPPair(t)
		srv := tls.Server(server, &tls.Config{Certificates: []tls.Certificate{testCert.TLS}, NextProtos: []string{"h2", "http/1.1"}})
		ln := NewListener(&harness.OneConnListener{Conn: srv}, NewLimits(64<<10, 64<<20, time.Second))
		wrapped, err := ln.Accept()
		if err != nil {
			t.Fatal(err)
		}
		addr, ok := wrapped.LocalAddr().(Addr) // as net/http takes it, before the first Read
		if !ok {
			t.Fatalf("LocalAddr is %T", wrapped.LocalAddr())
		}
		cli := tls.Client(client, &tls.Config{RootCAs: testCert.Pool, ServerName: "localhost", NextProtos: []string{tc.alpn}})
		go func() {
			for i := 0; i < len(tc.sent); i += 7 { // short records: short reads
				if _, err := cli.Write([]byte(tc.sent[i:min(i+7, len(tc.sent))])); err != nil {
					return
				}
			}
			cli.CloseWrite()
		}()
		got, err := io.ReadAll(wrapped)
		if err != nil || string(got) != tc.sent {
			t.Errorf("ALPN %s: read %d bytes (%v), sent %d; equal %v", tc.alpn, len(got), err, len(tc.sent), string(got) == tc.sent)
		}
		window, known := addr.peer.SmallestWindow()
		if known != tc.known || window != tc.window {
			t.Errorf("ALPN %s: window %d, known %v; want %d, %v", tc.alpn, window, known, tc.window, tc.known)
		}
		wrapped.Close()
		cli.Close()
	}
}
