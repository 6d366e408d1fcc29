package wire

import (
	"bytes"
	"crypto/tls"
	"testing"

	"golang.org/x/net/http2"
)

// TestFrameHeadersAsXNetWritesThem parses the headers of frames written by
// x/net's Framer, and writes headers that x/net reads back the same.
func TestFrameHeadersAsXNetWritesThem(t *testing.T) {
	var buf bytes.Buffer
	fr := http2.NewFramer(&buf, nil)
	writes := []func() error{
		func() error { return fr.WriteData(1, true, []byte("hello")) },
		func() error { return fr.WriteData(0x7fffffff, false, make([]byte, 16384)) },
		func() error {
			return fr.WriteHeaders(http2.HeadersFrameParam{StreamID: 3, BlockFragment: []byte{0x82}, EndStream: true, EndHeaders: true})
		},
		func() error { return fr.WriteSettings(http2.Setting{ID: http2.SettingInitialWindowSize, Val: 1 << 20}) },
		func() error { return fr.WriteSettingsAck() },
		func() error { return fr.WriteWindowUpdate(0, 1<<24) },
		func() error { return fr.WriteRSTStream(5, http2.ErrCodeCancel) },
		func() error { return fr.WritePing(true, [8]byte{1, 2, 3}) },
	}
	for i, write := range writes {
		buf.Reset()
		if err := write(); err != nil {
			t.Fatal(err)
		}
		raw := buf.Bytes()
		want, err := http2.ReadFrameHeader(bytes.NewReader(raw))
		if err != nil {
			t.Fatal(err)
		}
		got := ParseFrameHeader(raw)
		if got.Length != want.Length || got.Type != FrameType(want.Type) || got.Flags != Flags(want.Flags) || got.StreamID != want.StreamID {
			t.Errorf("frame %d: parsed %+v, x/net %+v", i, got, want)
		}
		if again := AppendFrameHeader(nil, got); !bytes.Equal(again, raw[:FrameHeaderLen]) {
			t.Errorf("frame %d: header written as %x, x/net wrote %x", i, again, raw[:FrameHeaderLen])
		}
	}
}

// TestReservedBitDropped: the stream ID's reserved bit is ignored when read
// (RFC 9113 §4.1) and never written.
func TestReservedBitDropped(t *testing.T) {
	h := ParseFrameHeader([]byte{0, 0, 0, byte(FrameData), 0, 0x80, 0, 0, 7})
	if h.StreamID != 7 {
		t.Fatalf("stream %d, want 7", h.StreamID)
	}
	if b := AppendFrameHeader(nil, FrameHeader{StreamID: 0x80000007}); b[5] != 0 {
		t.Fatalf("reserved bit written: %x", b)
	}
}

// TestGoAwayReadByXNet writes GOAWAY frames that x/net's Framer reads back.
func TestGoAwayReadByXNet(t *testing.T) {
	for _, tc := range []struct {
		last  uint32
		code  ErrCode
		debug string
	}{
		{0, ErrCodeInadequateSecurity, "Prohibited TLS 1.2 Cipher Suite"},
		{0x7fffffff, ErrCodeNo, ""},
		{41, ErrCodeEnhanceYourCalm, "too many resets"},
	} {
		raw := AppendGoAway([]byte("prefix"), tc.last, tc.code, tc.debug)
		if string(raw[:6]) != "prefix" {
			t.Fatal("AppendGoAway overwrote what dst held")
		}
		f, err := http2.NewFramer(nil, bytes.NewReader(raw[6:])).ReadFrame()
		if err != nil {
			t.Fatal(err)
		}
		ga, ok := f.(*http2.GoAwayFrame)
		if !ok || ga.StreamID != 0 || ga.LastStreamID != tc.last || ga.ErrCode != http2.ErrCode(tc.code) || string(ga.DebugData()) != tc.debug {
			t.Errorf("%+v: x/net read %#v", tc, f)
		}
	}
}

// TestSettingAndWindowIncrement reads the payloads of SETTINGS and
// WINDOW_UPDATE frames written by x/net.
func TestSettingAndWindowIncrement(t *testing.T) {
	var buf bytes.Buffer
	fr := http2.NewFramer(&buf, nil)
	if err := fr.WriteSettings(
		http2.Setting{ID: http2.SettingInitialWindowSize, Val: 100},
		http2.Setting{ID: http2.SettingMaxFrameSize, Val: 1 << 20},
		http2.Setting{ID: http2.SettingInitialWindowSize, Val: 4 << 20},
	); err != nil {
		t.Fatal(err)
	}
	payload := buf.Bytes()[FrameHeaderLen:]
	if v, ok := Setting(payload, SettingInitialWindowSize); !ok || v != 4<<20 {
		t.Errorf("initial window %d, %v; want the last value, %d", v, ok, 4<<20)
	}
	if _, ok := Setting(payload, SettingMaxConcurrentStreams); ok {
		t.Error("a parameter the frame does not set was found")
	}
	if _, ok := Setting(payload[:5], SettingInitialWindowSize); ok {
		t.Error("a malformed payload was read")
	}
	buf.Reset()
	if err := fr.WriteWindowUpdate(0, 0x7fffffff); err != nil {
		t.Fatal(err)
	}
	if inc, ok := WindowIncrement(buf.Bytes()[FrameHeaderLen:]); !ok || inc != 0x7fffffff {
		t.Errorf("increment %d, %v", inc, ok)
	}
	if _, ok := WindowIncrement([]byte{0, 0, 1}); ok {
		t.Error("a 3-byte WINDOW_UPDATE payload was read")
	}
}

// TestTLSProblem holds the §9.2 decisions that need no handshake; the
// coalesce package checks the others against x/net's server.
func TestTLSProblem(t *testing.T) {
	for _, tc := range []struct {
		st      tls.ConnectionState
		problem bool
	}{
		{tls.ConnectionState{Version: tls.VersionTLS13, CipherSuite: tls.TLS_AES_128_GCM_SHA256, NegotiatedProtocol: "h2"}, false},
		{tls.ConnectionState{Version: tls.VersionTLS12, CipherSuite: tls.TLS_ECDHE_RSA_WITH_AES_128_GCM_SHA256, NegotiatedProtocol: "h2"}, false},
		{tls.ConnectionState{Version: tls.VersionTLS12, CipherSuite: tls.TLS_RSA_WITH_AES_128_GCM_SHA256, NegotiatedProtocol: "h2"}, true},
		{tls.ConnectionState{Version: tls.VersionTLS12, CipherSuite: tls.TLS_ECDHE_RSA_WITH_AES_128_CBC_SHA, NegotiatedProtocol: "h2"}, true},
		{tls.ConnectionState{Version: tls.VersionTLS11, NegotiatedProtocol: "h2"}, true},
		{tls.ConnectionState{Version: tls.VersionTLS11, NegotiatedProtocol: "http/1.1"}, false},
	} {
		if got := TLSProblem(tc.st) != ""; got != tc.problem {
			t.Errorf("%s over %s with %s: problem %v, want %v", tc.st.NegotiatedProtocol, tls.VersionName(tc.st.Version), tls.CipherSuiteName(tc.st.CipherSuite), got, tc.problem)
		}
	}
}
