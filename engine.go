package h2file

import (
	"context"
	"crypto/tls"
	"errors"
	"fmt"
	"net"
	"net/http"
	"sync"
	"time"

	"github.com/caddyserver/caddy/v2"
	"github.com/caddyserver/caddy/v2/caddyconfig/caddyfile"
	"github.com/caddyserver/caddy/v2/modules/caddyhttp"
	"go.uber.org/zap"

	"github.com/h2file/caddy-h2file/internal/h2"
)

func init() {
	caddy.RegisterModule(EngineWrapper{})
}

// EngineWrapper is a listener wrapper that serves HTTP/2 with h2file's
// own engine instead of Go's HTTP/2 server. It is the recommended
// configuration (`coalesce`, `tls`, `h2_engine`, as in Caddyfile.example
// and `caddy h2-file-server`); without it, Go's server serves HTTP/2. It
// goes right after `tls`, as the last wrapper: it finishes each TLS
// handshake itself (with net/http's handshake timeout), serves the
// connections that negotiated h2 with the server's routes, and hands every
// other connection (HTTP/1.1, ACME's TLS-ALPN challenge, failed
// handshakes) to net/http as it was. HTTP/3 is not affected. On a config
// reload or stop, its connections are sent GOAWAY and drained within the
// server's grace period.
type EngineWrapper struct {
	// SendTimeout closes a connection when one socket write to it (a
	// batch of frames, about 256 KiB at most) has not completed after this
	// long: a client that stops reading cannot hold the connection, its
	// goroutines and its buffers for ever (Go's HTTP/2 server has no such
	// limit under Caddy, whose write timeouts are per stream). Default 1m,
	// as nginx's send_timeout; a negative value turns it off.
	SendTimeout caddy.Duration `json:"send_timeout,omitempty"`

	server *caddyhttp.Server
	app    *caddyhttp.App
	where  *wrapperServer
	logger *zap.Logger

	mu     *sync.Mutex // guards engine, made at the first WrapListener
	engine *h2.Server
}

// CaddyModule returns the Caddy module information.
func (EngineWrapper) CaddyModule() caddy.ModuleInfo {
	return caddy.ModuleInfo{
		ID:  "caddy.listeners.h2_engine",
		New: func() caddy.Module { return new(EngineWrapper) },
	}
}

// Provision finds the HTTP server the wrapper belongs to, checks its
// place among the server's listener wrappers and registers the engine's
// metrics.
func (w *EngineWrapper) Provision(ctx caddy.Context) error {
	w.logger = ctx.Logger()
	w.where = serverOf(ctx)
	srv := w.where.srv
	if srv == nil {
		return errors.New("h2_engine: not inside an HTTP server (it is a listener wrapper of apps.http.servers)")
	}
	w.server, w.app = srv, w.where.app
	w.mu = new(sync.Mutex)
	if err := checkEnginePlace(w.where.wrappers); err != nil {
		return w.where.wrap("h2_engine", err)
	}
	if err := registerCollectors(ctx.GetMetricsRegistry(), "HTTP/2 engine", h2.Metrics.Collectors()...); err != nil {
		return w.where.wrap("h2_engine", err)
	}
	// registered now: the server hands its shutdown hooks to net/http
	// before it wraps its listeners
	srv.RegisterOnShutdown(w.drain)
	srv.RegisterOnStop(func(ctx context.Context) error {
		if engine := w.engineIfStarted(); engine != nil && caddy.Exiting() {
			return engine.Wait(ctx)
		}
		return nil
	})
	return nil
}

// drain sends GOAWAY on every engine connection when the server shuts
// down; their streams finish, as net/http lets its own connections'
// streams finish past the grace period (its Shutdown stops waiting then,
// and Caddy never closes them).
func (w *EngineWrapper) drain() {
	engine := w.engineIfStarted()
	if engine == nil {
		return
	}
	ctx, cancel := context.Background(), context.CancelFunc(func() {})
	if w.app != nil && w.app.GracePeriod > 0 {
		ctx, cancel = context.WithTimeout(ctx, time.Duration(w.app.GracePeriod))
	}
	defer cancel()
	if err := engine.Shutdown(ctx); err != nil {
		w.logger.Info("HTTP/2 connections still finishing their streams at the end of the grace period", zap.Error(err))
	}
}

// engineIfStarted is the engine, or nil before the first WrapListener.
func (w *EngineWrapper) engineIfStarted() *h2.Server {
	w.mu.Lock()
	defer w.mu.Unlock()
	return w.engine
}

// checkEnginePlace requires h2_engine to be the last listener wrapper and
// to follow tls directly (or be first, tls then coming implicitly before
// it): a wrapper after it would never see HTTP/2 connections, and one
// between tls and it would hide the TLS handshake from it.
func checkEnginePlace(names []string) error {
	for i, name := range names {
		if name != "h2_engine" {
			continue
		}
		if i != len(names)-1 {
			return fmt.Errorf("must be the last listener wrapper, but %q follows it (list it last, right after tls: "+
				"tls, h2_engine or coalesce, tls, h2_engine)", names[i+1])
		}
		if i > 0 && names[i-1] != "tls" {
			return fmt.Errorf("must come right after tls, but follows %q (as in coalesce, tls, h2_engine: coalesce after tls "+
				"is replaced by the engine's own batching; coalesce before tls still applies)", names[i-1])
		}
	}
	return nil
}

// WrapListener serves the HTTP/2 connections that ln accepts and returns
// a listener of the others.
func (w *EngineWrapper) WrapListener(ln net.Listener) net.Listener {
	if w.server == nil {
		return ln // not provisioned: there is no server to serve
	}
	w.startEngine()
	w.logStart(ln.Addr())
	l := newEngineListener(ln, w)
	go l.acceptLoop()
	return l
}

// startEngine makes the engine, with the server's settings as they are once the
// HTTP app is provisioned, and ties its drain to the server's shutdown.
func (w *EngineWrapper) startEngine() {
	w.mu.Lock()
	defer w.mu.Unlock()
	if w.engine != nil {
		return
	}
	cfg := h2.Config{
		MaxHeaderBytes:       w.server.MaxHeaderBytes,
		IdleTimeout:          time.Duration(w.server.IdleTimeout),
		ReadTimeout:          time.Duration(w.server.ReadTimeout),
		WriteTimeout:         time.Duration(w.server.WriteTimeout),
		WriteProgressTimeout: w.sendTimeout(),
		Logger:               w.logger,
	}
	w.engine = h2.NewServer(w.server, cfg)
}

// logStart logs, once per listener and config, that the engine serves
// HTTP/2 on the listener at addr, or that it has nothing to serve there:
// the signal a user migrating from Go's HTTP/2 server looks for.
func (w *EngineWrapper) logStart(addr net.Addr) {
	tls := w.where.hasTLS(addr)
	msg := "HTTP/2 served by h2_engine"
	if !tls || !w.where.servesH2() {
		msg = "h2_engine idle: no HTTP/2 over TLS on this listener"
	}
	sendTimeout := "off"
	if d := w.sendTimeout(); d > 0 {
		sendTimeout = d.String()
	}
	w.logger.Info(msg,
		zap.String("address", addr.String()),
		zap.Bool("tls", tls),
		zap.String("listener_wrappers", w.where.wrapperList()),
		zap.String("send_timeout", sendTimeout))
}

// defaultSendTimeout is SendTimeout's default.
const defaultSendTimeout = time.Minute

// sendTimeout is SendTimeout with its default; 0 for none.
func (w *EngineWrapper) sendTimeout() time.Duration {
	switch {
	case w.SendTimeout < 0:
		return 0
	case w.SendTimeout == 0:
		return defaultSendTimeout
	}
	return time.Duration(w.SendTimeout)
}

// handshakeTimeout is net/http's: the smallest of the server's read
// header, read and write timeouts that is set, or none.
func (w *EngineWrapper) handshakeTimeout() time.Duration {
	var d time.Duration
	for _, v := range []caddy.Duration{w.server.ReadHeaderTimeout, w.server.ReadTimeout, w.server.WriteTimeout} {
		if v > 0 && (d == 0 || time.Duration(v) < d) {
			d = time.Duration(v)
		}
	}
	return d
}

// baseContext is what every request's context starts from on the
// engine's connections: net/http's keys (a stand-in *http.Server, as the
// real one is not reachable from a listener wrapper).
func (w *EngineWrapper) baseContext() context.Context {
	return context.WithValue(context.Background(), http.ServerContextKey, standInServer)
}

var standInServer = &http.Server{}

// UnmarshalCaddyfile sets up the wrapper from Caddyfile tokens. It goes
// in the `listener_wrappers` of the `servers` global option, right after
// `tls` and last:
//
//	listener_wrappers {
//		tls
//		h2_engine {
//			send_timeout <duration>
//		}
//	}
func (w *EngineWrapper) UnmarshalCaddyfile(d *caddyfile.Dispenser) error {
	d.Next() // the wrapper's name
	if d.NextArg() {
		return d.ArgErr()
	}
	for nesting := d.Nesting(); d.NextBlock(nesting); {
		switch d.Val() {
		case "send_timeout":
			if w.SendTimeout != 0 {
				return d.Err("send_timeout already specified")
			}
			if !d.NextArg() {
				return d.ArgErr()
			}
			dur, err := caddy.ParseDuration(d.Val())
			if err != nil || dur == 0 {
				// 0 is JSON's "the default": the Caddyfile takes no 0, as
				// for h2file's other options
				return d.Errf("bad send_timeout '%s': must be a duration such as 30s or 2m; a negative value, "+
					"e.g. -1s, turns it off (leave it out for the default, 1m)", d.Val())
			}
			w.SendTimeout = caddy.Duration(dur)
			if d.NextArg() {
				return d.ArgErr()
			}
		default:
			return d.Errf("unrecognized subdirective '%s' (accepted: send_timeout)", d.Val())
		}
	}
	return nil
}

// tlsHandshaker is a connection that still has to finish TLS.
type tlsHandshaker interface {
	HandshakeContext(context.Context) error
	ConnectionState() tls.ConnectionState
}

// Interface guards
var (
	_ caddy.Provisioner     = (*EngineWrapper)(nil)
	_ caddy.ListenerWrapper = (*EngineWrapper)(nil)
	_ caddyfile.Unmarshaler = (*EngineWrapper)(nil)
	_ tlsHandshaker         = (*tls.Conn)(nil)
)
