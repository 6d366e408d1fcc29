package h2file

import (
	"fmt"
	"net"
	"strings"
	"sync"
	"time"

	"github.com/caddyserver/caddy/v2"
	"github.com/caddyserver/caddy/v2/caddyconfig/caddyfile"
	"github.com/caddyserver/caddy/v2/modules/caddyhttp"
	"github.com/dustin/go-humanize"
	"go.uber.org/zap"

	"github.com/h2file/caddy-h2file/internal/coalesce"
)

func init() {
	caddy.RegisterModule(CoalesceWrapper{})
}

// Defaults of CoalesceWrapper.
const (
	defaultCoalesceMaxPending   = coalesce.DefaultMaxPending
	defaultCoalesceMaxTotal     = coalesce.DefaultMaxTotal
	defaultCoalesceCloseTimeout = coalesce.DefaultCloseTimeout
)

// CoalesceWrapper is a listener wrapper that batches the bytes written to
// each connection into few, large socket writes. A write is copied into a
// pooled buffer and returns; a goroutine of the connection sends what has
// accumulated with one write to the wrapped connection. Nothing is held
// back to wait for more: bytes go out at once when the connection is
// idle, and only bytes written while a socket write is in progress are
// batched, so it adds no latency.
//
// It can be placed before the `tls` listener wrapper, where it batches TLS
// records into large socket writes, and after it (the default position),
// where it batches HTTP/2 frames into full 16 KiB TLS records and moves
// their encryption off HTTP/2's serve loop; or in both places. After TLS,
// the connection is no longer a `*tls.Conn`, so Caddy serves HTTP/2
// through its h2c path; the wrapper keeps the TLS connection state
// available, so request TLS information, the `protocol` matcher and client
// authentication work as without it, and it enforces HTTP/2's TLS
// requirements (RFC 9113 §9.2) as the HTTP/2 server would. With
// `h2_engine` after `tls` (the recommended configuration), it goes before
// `tls`.
//
// Write errors of the wrapped connection arrive late: they are returned by
// the next write or close, and the connection is then unusable.
type CoalesceWrapper struct {
	// The most bytes one connection queues while a socket write is in
	// progress; they are sent together by the next socket write. A
	// writer that finds the queue full waits until the flusher takes it.
	// With the batch being written, a connection has at most twice this
	// many bytes written but not yet sent. Larger values make fewer
	// socket writes but let urgent data wait longer behind queued data.
	// Default: 64 KiB, and up to 512 KiB while less than half of
	// max_total is in use (a connection sending as fast as it can then
	// needs fewer trips between its writer and its flusher); set
	// explicitly, it is a hard limit.
	MaxPending int64 `json:"max_pending,omitempty"`

	// The most memory, in bytes, that the buffers of all connections
	// accepted through this wrapper may hold together. Buffers are taken
	// in 16 KiB units from a shared pool when a connection has bytes to
	// send and returned as soon as they are sent. A writer that needs a
	// buffer when the limit is reached waits. Must be at least
	// max_pending. Default: 64 MiB (enough for 512 connections each
	// sending as fast as it can).
	MaxTotal int64 `json:"max_total,omitempty"`

	// How long closing a connection may wait for its pending bytes (for
	// example HTTP/2's GOAWAY and TLS's close_notify) to be sent before
	// the connection is closed anyway. Default: 5s.
	CloseTimeout caddy.Duration `json:"close_timeout,omitempty"`

	limits   *coalesce.Limits
	where    *wrapperServer
	position string // below TLS or above TLS
	logger   *zap.Logger
}

// CaddyModule returns the Caddy module information.
func (CoalesceWrapper) CaddyModule() caddy.ModuleInfo {
	return caddy.ModuleInfo{
		ID:  "caddy.listeners.coalesce",
		New: func() caddy.Module { return new(CoalesceWrapper) },
	}
}

// Provision sets the defaults, finds the wrapper's place among its
// server's listener wrappers and registers the metrics.
func (w *CoalesceWrapper) Provision(ctx caddy.Context) error {
	w.logger = ctx.Logger()
	w.where = serverOf(ctx)
	spare := w.MaxPending == 0
	if spare {
		w.MaxPending = defaultCoalesceMaxPending
	}
	if w.MaxTotal == 0 {
		w.MaxTotal = max(defaultCoalesceMaxTotal, w.MaxPending)
	}
	if w.CloseTimeout == 0 {
		w.CloseTimeout = caddy.Duration(defaultCoalesceCloseTimeout)
	}
	if err := w.validate(); err != nil {
		return w.where.wrap("coalesce", err)
	}
	if err := coalesceRepeated(w.where.wrappers); err != nil {
		return w.where.wrap("coalesce", err)
	}
	w.position = coalescePosition(w.where)
	w.limits = coalesce.NewLimits(int(w.MaxPending), w.MaxTotal, time.Duration(w.CloseTimeout))
	if spare {
		w.limits.SetSparePending(coalesce.DefaultSparePending)
	}
	w.limits.SetLogger(w.logger)
	if err := registerCollectors(ctx.GetMetricsRegistry(), "coalesce", coalesce.Metrics.Collectors()...); err != nil {
		return w.where.wrap("coalesce", err)
	}
	return nil
}

// Cleanup forgets the count of the server's coalesce wrappers that
// coalescePosition keeps.
func (w *CoalesceWrapper) Cleanup() error {
	if w.where != nil {
		forgetCoalesce(w.where)
	}
	return nil
}

// coalesceSeen counts the coalesce wrappers of each HTTP server
// provisioned so far. Caddy provisions a server's listener wrappers one
// after the other, in their order, so the n-th provisioned is the n-th
// coalesce in the server's list.
var coalesceSeen = struct {
	sync.Mutex
	n map[*caddyhttp.Server]int
}{n: make(map[*caddyhttp.Server]int)}

// coalescePosition is the place, below or above TLS, of the coalesce
// wrapper being provisioned for s's server.
func coalescePosition(s *wrapperServer) string {
	if s.srv == nil {
		return "unknown (not in an HTTP server)"
	}
	coalesceSeen.Lock()
	nth := coalesceSeen.n[s.srv]
	coalesceSeen.n[s.srv] = nth + 1
	coalesceSeen.Unlock()
	for i, name := range s.wrappers {
		if name != "coalesce" {
			continue
		}
		if nth == 0 {
			return s.tlsPosition(i)
		}
		nth--
	}
	return "unknown"
}

// forgetCoalesce drops the count of s's server's coalesce wrappers, once
// its config is stopped.
func forgetCoalesce(s *wrapperServer) {
	coalesceSeen.Lock()
	delete(coalesceSeen.n, s.srv)
	coalesceSeen.Unlock()
}

// coalesceRepeated rejects a server's listener wrappers that list the
// coalesce wrapper twice in a row (`coalesce` on two lines with nothing
// between): the outer one would only copy every batch into the inner
// one, doubling the memory and the goroutine hops for nothing.
func coalesceRepeated(names []string) error {
	for i := 1; i < len(names); i++ {
		if names[i] == "coalesce" && names[i-1] == "coalesce" {
			return fmt.Errorf("the server lists the coalesce listener wrapper twice in a row (listener_wrappers %d and %d); "+
				"list it once for each position: before tls, after it (the default), or both (coalesce, tls, coalesce)", i-1, i)
		}
	}
	return nil
}

// maxCoalescePending bounds max_pending, so that it fits an int anywhere;
// maxCoalesceTotal bounds max_total.
const (
	maxCoalescePending = 1 << 30
	maxCoalesceTotal   = 1 << 40
)

// Validate checks the configuration.
func (w *CoalesceWrapper) Validate() error {
	if err := w.validate(); err != nil {
		return fmt.Errorf("coalesce: %w", err)
	}
	return nil
}

// validate is Validate, its errors naming the option and what it accepts
// but not the wrapper.
func (w *CoalesceWrapper) validate() error {
	switch {
	case w.MaxPending < 0 || w.MaxPending > maxCoalescePending:
		return fmt.Errorf("max_pending must be from 1 to %d bytes (1 GiB), or 0 for the default "+
			"(64 KiB, up to 512 KiB while less than half of max_total is used): %d", maxCoalescePending, w.MaxPending)
	case w.MaxTotal < 0 || w.MaxTotal > maxCoalesceTotal:
		return fmt.Errorf("max_total must be from 1 to %d bytes (1 TiB), or 0 for the default (64 MiB): %d",
			int64(maxCoalesceTotal), w.MaxTotal)
	case w.MaxTotal != 0 && w.MaxTotal < w.MaxPending:
		return fmt.Errorf("max_total (%d) must be at least max_pending (%d)", w.MaxTotal, w.MaxPending)
	case w.CloseTimeout < 0:
		return fmt.Errorf("close_timeout must be a duration longer than 0, such as 5s, or 0 for the default (5s): %v",
			time.Duration(w.CloseTimeout))
	}
	return nil
}

// WrapListener wraps every connection ln accepts.
func (w *CoalesceWrapper) WrapListener(ln net.Listener) net.Listener {
	limits := w.limits
	if limits == nil { // not provisioned (used as a library)
		limits = coalesce.NewLimits(coalesce.DefaultMaxPending, coalesce.DefaultMaxTotal, coalesce.DefaultCloseTimeout)
	}
	if w.logger != nil {
		w.logger.Info("socket writes coalesced",
			zap.String("address", ln.Addr().String()),
			zap.String("position", w.position),
			zap.Bool("tls", w.where.hasTLS(ln.Addr())),
			zap.String("listener_wrappers", w.where.wrapperList()),
			zap.Int("max_pending", limits.MaxPending()),
			zap.Int("spare_pending", limits.SparePending()),
			zap.Int64("max_total", limits.MaxTotal()),
			zap.String("close_timeout", limits.CloseTimeout().String()))
	}
	return coalesce.NewListener(ln, limits)
}

// UnmarshalCaddyfile sets up the listener wrapper from Caddyfile tokens.
// It goes in the `listener_wrappers` of the `servers` global option:
// alone for after `tls` (Caddy puts `tls` first by default and rejects it
// written first), followed by `tls` for below it, or `coalesce`, `tls`,
// `coalesce` for both. Syntax:
//
//	coalesce {
//		max_pending   <size>
//		max_total     <size>
//		close_timeout <duration>
//	}
//
// Sizes are like 64KiB or 1MB: max_pending from 1 byte to 1GiB, max_total
// from 1 byte to 1TiB (and at least max_pending).
func (w *CoalesceWrapper) UnmarshalCaddyfile(d *caddyfile.Dispenser) error {
	d.Next() // consume wrapper name
	if d.NextArg() {
		return d.Errf("wrong argument count: coalesce takes no arguments, got '%s' (options go in a block; "+
			"for both positions, list coalesce, tls and coalesce on lines of their own)", d.Val())
	}
	for nesting := d.Nesting(); d.NextBlock(nesting); {
		switch name := d.Val(); name {
		case "max_pending", "max_total":
			field := &w.MaxPending
			if name == "max_total" {
				field = &w.MaxTotal
			}
			if *field != 0 {
				return d.Errf("%s already specified", name)
			}
			size, err := coalesceSizeArg(d)
			if err != nil {
				return err
			}
			*field = size
		case "close_timeout":
			if w.CloseTimeout != 0 {
				return d.Err("close_timeout already specified")
			}
			if !d.NextArg() {
				return d.ArgErr()
			}
			dur, err := caddy.ParseDuration(d.Val())
			if err != nil || dur <= 0 {
				return d.Errf("bad close_timeout '%s': must be a duration longer than 0, such as 500ms, 5s or 1m "+
					"(leave it out for the default, 5s)", d.Val())
			}
			if d.NextArg() {
				return d.ArgErr()
			}
			w.CloseTimeout = caddy.Duration(dur)
		default:
			return d.Errf("unrecognized subdirective '%s' (accepted: max_pending, max_total, close_timeout)", name)
		}
	}
	return nil
}

// coalesceSizeArg parses the one argument of a size subdirective.
func coalesceSizeArg(d *caddyfile.Dispenser) (int64, error) {
	name := d.Val()
	if !d.NextArg() {
		return 0, d.ArgErr()
	}
	limit, limitText, def := uint64(maxCoalescePending), "1GiB", "64 KiB, up to 512 KiB while less than half of max_total is used"
	if name == "max_total" {
		limit, limitText, def = maxCoalesceTotal, "1TiB", "64 MiB"
	}
	size, err := humanize.ParseBytes(d.Val())
	if err != nil || strings.HasPrefix(d.Val(), "-") {
		return 0, d.Errf("bad %s '%s': not a byte size such as 4096, 64KiB or 1MB, from 1 byte to %s "+
			"(leave it out for the default, %s)", name, d.Val(), limitText, def)
	}
	if size == 0 || size > limit {
		return 0, d.Errf("%s out of range: %s (must be between 1 byte and %s), leave it out for the default (%s)",
			name, d.Val(), limitText, def)
	}
	if d.NextArg() {
		return 0, d.ArgErr()
	}
	return int64(size), nil
}

// Interface guards
var (
	_ caddy.Module          = (*CoalesceWrapper)(nil)
	_ caddy.Provisioner     = (*CoalesceWrapper)(nil)
	_ caddy.CleanerUpper    = (*CoalesceWrapper)(nil)
	_ caddy.Validator       = (*CoalesceWrapper)(nil)
	_ caddy.ListenerWrapper = (*CoalesceWrapper)(nil)
	_ caddyfile.Unmarshaler = (*CoalesceWrapper)(nil)
)
