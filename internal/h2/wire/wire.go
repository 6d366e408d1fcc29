// Package wire is the HTTP/2 wire format (RFC 9113) that h2file's
// connection code shares: the client preface, frame headers, the frames it
// writes itself (GOAWAY), the opening frames it reads (SETTINGS,
// WINDOW_UPDATE), and the TLS requirements of §9.2. It knows no connection
// and no HTTP semantics; HPACK is golang.org/x/net/http2/hpack's.
package wire

import "encoding/binary"

// Preface is the HTTP/2 client connection preface (RFC 9113 §3.4).
const Preface = "PRI * HTTP/2.0\r\n\r\nSM\r\n\r\n"

// FrameHeaderLen is the size of a frame header (RFC 9113 §4.1).
const FrameHeaderLen = 9

// DefaultWindow is the initial flow-control window of a stream and of the
// connection (RFC 9113 §6.9.2).
const DefaultWindow = 65535

// FrameType is a frame's type (RFC 9113 §6).
type FrameType uint8

// The frame types of RFC 9113.
const (
	FrameData         FrameType = 0x0
	FrameHeaders      FrameType = 0x1
	FramePriority     FrameType = 0x2
	FrameRSTStream    FrameType = 0x3
	FrameSettings     FrameType = 0x4
	FramePushPromise  FrameType = 0x5
	FramePing         FrameType = 0x6
	FrameGoAway       FrameType = 0x7
	FrameWindowUpdate FrameType = 0x8
	FrameContinuation FrameType = 0x9
)

// Flags are a frame's flags; their meaning depends on its type.
type Flags uint8

// The flags of RFC 9113.
const (
	FlagAck        Flags = 0x1 // SETTINGS, PING
	FlagEndStream  Flags = 0x1 // DATA, HEADERS
	FlagEndHeaders Flags = 0x4 // HEADERS, PUSH_PROMISE, CONTINUATION
	FlagPadded     Flags = 0x8 // DATA, HEADERS, PUSH_PROMISE
	FlagPriority   Flags = 0x20
)

// ErrCode is an error code of RST_STREAM and GOAWAY (RFC 9113 §7).
type ErrCode uint32

// The error codes of RFC 9113.
const (
	ErrCodeNo                 ErrCode = 0x0
	ErrCodeProtocol           ErrCode = 0x1
	ErrCodeInternal           ErrCode = 0x2
	ErrCodeFlowControl        ErrCode = 0x3
	ErrCodeSettingsTimeout    ErrCode = 0x4
	ErrCodeStreamClosed       ErrCode = 0x5
	ErrCodeFrameSize          ErrCode = 0x6
	ErrCodeRefusedStream      ErrCode = 0x7
	ErrCodeCancel             ErrCode = 0x8
	ErrCodeCompression        ErrCode = 0x9
	ErrCodeConnect            ErrCode = 0xa
	ErrCodeEnhanceYourCalm    ErrCode = 0xb
	ErrCodeInadequateSecurity ErrCode = 0xc
	ErrCodeHTTP11Required     ErrCode = 0xd
)

// SettingID identifies a SETTINGS parameter (RFC 9113 §6.5.2).
type SettingID uint16

// The SETTINGS parameters of RFC 9113.
const (
	SettingHeaderTableSize      SettingID = 0x1
	SettingEnablePush           SettingID = 0x2
	SettingMaxConcurrentStreams SettingID = 0x3
	SettingInitialWindowSize    SettingID = 0x4
	SettingMaxFrameSize         SettingID = 0x5
	SettingMaxHeaderListSize    SettingID = 0x6
)

// FrameHeader is the fixed 9-byte header of every frame.
type FrameHeader struct {
	Length   uint32 // of the payload, 24 bits
	Type     FrameType
	Flags    Flags
	StreamID uint32 // 31 bits; the reserved bit is dropped when read
}

// ParseFrameHeader reads the frame header at the start of b, which must
// hold FrameHeaderLen bytes.
func ParseFrameHeader(b []byte) FrameHeader {
	_ = b[FrameHeaderLen-1]
	return FrameHeader{
		Length:   uint32(b[0])<<16 | uint32(b[1])<<8 | uint32(b[2]),
		Type:     FrameType(b[3]),
		Flags:    Flags(b[4]),
		StreamID: binary.BigEndian.Uint32(b[5:9]) & 0x7fffffff,
	}
}

// AppendFrameHeader appends h's encoding to dst.
func AppendFrameHeader(dst []byte, h FrameHeader) []byte {
	return append(dst,
		byte(h.Length>>16), byte(h.Length>>8), byte(h.Length),
		byte(h.Type), byte(h.Flags),
		byte(h.StreamID>>24)&0x7f, byte(h.StreamID>>16), byte(h.StreamID>>8), byte(h.StreamID))
}

// AppendGoAway appends a GOAWAY frame (RFC 9113 §6.8) to dst.
func AppendGoAway(dst []byte, lastStreamID uint32, code ErrCode, debug string) []byte {
	dst = AppendFrameHeader(dst, FrameHeader{Length: uint32(8 + len(debug)), Type: FrameGoAway})
	dst = binary.BigEndian.AppendUint32(dst, lastStreamID&0x7fffffff)
	dst = binary.BigEndian.AppendUint32(dst, uint32(code))
	return append(dst, debug...)
}

// Setting returns the last value of the parameter id in a SETTINGS
// payload, and false if the payload does not set it (or is malformed: its
// length is not a multiple of 6).
func Setting(payload []byte, id SettingID) (uint32, bool) {
	if len(payload)%6 != 0 {
		return 0, false
	}
	var val uint32
	found := false
	for i := 0; i < len(payload); i += 6 {
		if SettingID(binary.BigEndian.Uint16(payload[i:])) == id {
			val, found = binary.BigEndian.Uint32(payload[i+2:]), true
		}
	}
	return val, found
}

// WindowIncrement returns the increment of a WINDOW_UPDATE payload (the
// reserved bit dropped), and false if the payload is not 4 bytes.
func WindowIncrement(payload []byte) (uint32, bool) {
	if len(payload) != 4 {
		return 0, false
	}
	return binary.BigEndian.Uint32(payload) & 0x7fffffff, true
}
