package h2

import (
	"net/http"
	"time"

	"go.uber.org/zap"
)

// Config holds a Server's settings. The zero value of a field means its
// default, which is x/net's server's default as Caddy configures it
// (http2.ConfigureServer with a zero http2.Server).
type Config struct {
	// MaxConcurrentStreams is the SETTINGS_MAX_CONCURRENT_STREAMS
	// advertised to clients, and the number of handlers that run at once
	// on one connection. Default 250.
	MaxConcurrentStreams uint32

	// MaxReadFrameSize is the largest frame a client may send
	// (SETTINGS_MAX_FRAME_SIZE). Default 1 MiB.
	MaxReadFrameSize uint32

	// StreamWindow and ConnWindow are the receive windows for request
	// bodies, per stream and per connection. Default 1 MiB each.
	StreamWindow, ConnWindow int32

	// MaxHeaderBytes bounds a request's header list: the advertised
	// SETTINGS_MAX_HEADER_LIST_SIZE is MaxHeaderBytes + 320, as in x/net.
	// Default http.DefaultMaxHeaderBytes.
	MaxHeaderBytes int

	// IdleTimeout closes a connection (GOAWAY) that has had no open
	// stream for this long. Zero means none.
	IdleTimeout time.Duration

	// ReadTimeout and WriteTimeout are http.Server's: per stream, counted
	// from its HEADERS. Zero means none.
	ReadTimeout, WriteTimeout time.Duration

	// WriteProgressTimeout closes a connection when one socket write to
	// it (a batch of frames, about 256 KiB at most) has not completed
	// after this long: a client that stops reading. Zero means none.
	WriteProgressTimeout time.Duration

	// DisableGeneralOptionsHandler passes "OPTIONS *" requests to the
	// handler, as http.Server's field of that name; by default they are
	// answered 200 with no body, as net/http does.
	DisableGeneralOptionsHandler bool

	// Logger receives the server's errors (panics at Error, protocol
	// errors at Debug). Default: a no-op logger.
	Logger *zap.Logger
}

const (
	defaultMaxStreams   = 250
	defaultMaxReadFrame = 1 << 20
	defaultWindow       = 1 << 20
	// goAwayTimeout is how long a connection stays open after its last
	// stream has ended following a GOAWAY, so that the client reads it
	// (x/net's goAwayTimeout).
	goAwayTimeout = time.Second
	// prefaceTimeout bounds the wait for the client preface and its
	// first SETTINGS (x/net: 10 s for the preface).
	prefaceTimeout = 10 * time.Second
)

// withDefaults returns c with every zero field set to its default.
func (c Config) withDefaults() Config {
	if c.MaxConcurrentStreams == 0 {
		c.MaxConcurrentStreams = defaultMaxStreams
	}
	if c.MaxReadFrameSize == 0 {
		c.MaxReadFrameSize = defaultMaxReadFrame
	}
	if c.MaxReadFrameSize < 16384 {
		c.MaxReadFrameSize = 16384
	}
	if c.MaxReadFrameSize > 1<<24-1 {
		c.MaxReadFrameSize = 1<<24 - 1
	}
	if c.StreamWindow <= 0 {
		c.StreamWindow = defaultWindow
	}
	if c.ConnWindow <= 0 {
		c.ConnWindow = defaultWindow
	}
	if c.ConnWindow < 65535 {
		c.ConnWindow = 65535
	}
	if c.MaxHeaderBytes <= 0 {
		c.MaxHeaderBytes = http.DefaultMaxHeaderBytes
	}
	if c.Logger == nil {
		c.Logger = zap.NewNop()
	}
	return c
}

// maxHeaderListSize is the SETTINGS_MAX_HEADER_LIST_SIZE advertised, as
// x/net computes it.
func (c *Config) maxHeaderListSize() uint32 {
	n := int64(c.MaxHeaderBytes) + 32*10 // x/net: "+320 bytes of overhead"
	if n > 1<<32-1 {
		return 1<<32 - 1
	}
	return uint32(n)
}
