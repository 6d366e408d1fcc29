package h2file

import (
	"encoding/json"
	"fmt"
	"io"
	"os"
	"strconv"
	"time"

	"github.com/caddyserver/caddy/v2"
	"github.com/caddyserver/caddy/v2/caddyconfig"
	caddycmd "github.com/caddyserver/caddy/v2/cmd"
	"github.com/caddyserver/caddy/v2/modules/caddyhttp"
	"github.com/caddyserver/caddy/v2/modules/caddyhttp/encode"
	"github.com/caddyserver/caddy/v2/modules/caddyhttp/fileserver"
	caddytpl "github.com/caddyserver/caddy/v2/modules/caddyhttp/templates"
	"github.com/caddyserver/certmagic"
	"github.com/spf13/cobra"
	"go.uber.org/zap"
)

// defaultFileLimit is file-server's default for --file-limit (its
// defaultDirEntryLimit, which it does not export).
const defaultFileLimit = 10000

func init() {
	caddycmd.RegisterCommand(caddycmd.Command{
		Name:  "h2-file-server",
		Usage: "[--domain <example.com>] [--root <path>] [--listen <addr>] [--browse] [--reveal-symlinks] [--access-log] [--precompressed] [--no-cache] [--no-coalesce] [--no-engine] [--http-port <port>]",
		Short: "Spins up a production-ready file server with h2_file_server",
		Long: `
The file-server command with h2file: the same flags with the same meaning,
the same config, but files are served by h2_file_server (with its open-file
cache), HTTP/2 over TLS by h2file's own HTTP/2 engine (the h2_engine
listener wrapper), and the server's connections go through the coalesce
listener wrapper below TLS.

The listener's socket address can be customized with the --listen flag.

If a domain name is specified with --domain, the default listener address
will be changed to the HTTPS port and the server will use HTTPS, with
HTTP->HTTPS redirects on the HTTP port (80, or --http-port). If using a
public domain, ensure A/AAAA records are properly configured before using
this option. Without --domain, a plain --listen address serves HTTP/1.1
and h2c.

By default, Zstandard and Gzip compression are enabled. Use --no-compress
to disable compression.

If --browse is enabled, requests for folders without an index file will
respond with a file listing.

--no-cache turns h2_file_server's open-file cache off, so every request
opens its file as file_server does: edits show at once instead of within
the cache's one-second revalidation. --no-coalesce leaves the coalesce
listener wrapper out, for comparing or when a client is better served
without it. --no-engine serves HTTP/2 with Go's server, as Caddy does,
with coalesce on both sides of TLS (the configuration before the engine).
--http-port sets Caddy's http_port, so --domain works without port 80
(for example without root, or beside another server).`,
		CobraFunc: func(cmd *cobra.Command) {
			// file-server's flags: same names, shorthands, defaults and help
			cmd.Flags().StringP("domain", "d", "", "Domain name at which to serve the files")
			cmd.Flags().StringP("root", "r", "", "The path to the root of the site")
			cmd.Flags().StringP("listen", "l", "", "The address to which to bind the listener")
			cmd.Flags().BoolP("browse", "b", false, "Enable directory browsing")
			cmd.Flags().BoolP("reveal-symlinks", "", false, "Show symlink paths when browse is enabled.")
			cmd.Flags().BoolP("templates", "t", false, "Enable template rendering")
			cmd.Flags().BoolP("access-log", "a", false, "Enable the access log")
			cmd.Flags().BoolP("debug", "v", false, "Enable verbose debug logs")
			cmd.Flags().IntP("file-limit", "f", defaultFileLimit, "Max directories to read")
			cmd.Flags().BoolP("no-compress", "", false, "Disable Zstandard and Gzip compression")
			cmd.Flags().StringSliceP("precompressed", "p", []string{}, "Specify precompression file extensions. Compression preference implied from flag order.")
			// h2file's own
			cmd.Flags().Bool("no-cache", false, "Turn h2_file_server's open-file cache off (every request opens its file)")
			cmd.Flags().Bool("no-coalesce", false, "Serve without the coalesce listener wrapper")
			cmd.Flags().Bool("no-engine", false, "Serve HTTP/2 with Go's server instead of h2file's engine")
			cmd.Flags().Int("http-port", 0, "Port for plain HTTP: HTTP->HTTPS redirects with --domain, the default listener without (default 80)")
			cmd.RunE = caddycmd.WrapCommandFuncForCobra(cmdH2FileServer)
			cmd.AddCommand(&cobra.Command{
				Use:     "export-template",
				Short:   "Exports the default file browser template",
				Example: "caddy h2-file-server export-template > browse.html",
				RunE: func(cmd *cobra.Command, args []string) error {
					_, err := io.WriteString(os.Stdout, fileserver.BrowseTemplate)
					return err
				},
			})
		},
	})
}

// cmdH2FileServer runs Caddy with the config h2FileServerConfig builds,
// until a signal stops it.
func cmdH2FileServer(fs caddycmd.Flags) (int, error) {
	caddy.TrapSignals()
	cfg, listen, err := h2FileServerConfig(fs)
	if err != nil {
		return caddy.ExitCodeFailedStartup, err
	}
	if err := caddy.Run(cfg); err != nil {
		return caddy.ExitCodeFailedStartup, fmt.Errorf("starting h2-file-server: %w", err)
	}
	logStarted(caddy.Log(), fs, listen)
	select {}
}

// logStarted logs that the command serves, where, and with which HTTP/2
// server: a user comparing it with file-server looks for that line.
func logStarted(logger *zap.Logger, fs caddycmd.Flags, listen string) {
	logger.Info("Caddy serving static files with h2_file_server",
		zap.String("listen", listen),
		zap.String("http2", http2Server(fs)))
}

// http2Server says which server serves HTTP/2 for the command's flags.
func http2Server(fs caddycmd.Flags) string {
	switch {
	case fs.String("domain") == "":
		return "Go's HTTP/2 server, h2c only (no TLS without --domain; h2_engine serves HTTP/2 over TLS)"
	case fs.Bool("no-engine"):
		return "Go's HTTP/2 server (--no-engine)"
	}
	return "h2file's engine (h2_engine)"
}

// h2FileServerConfig builds the config file-server builds for the same
// flags (modules/caddyhttp/fileserver/command.go, Caddy v2.11.9), with
// h2_file_server in place of file_server and h2file's additions: the
// listener wrappers of listenerWrappers, the cache setting and
// http_port. It returns the listener address too.
func h2FileServerConfig(fs caddycmd.Flags) (*caddy.Config, string, error) {
	domain := fs.String("domain")
	root := fs.String("root")
	listen := fs.String("listen")
	browse := fs.Bool("browse")
	templates := fs.Bool("templates")
	accessLog := fs.Bool("access-log")
	fileLimit := fs.Int("file-limit")
	debug := fs.Bool("debug")
	revealSymlinks := fs.Bool("reveal-symlinks")
	compress := !fs.Bool("no-compress")
	noCache := fs.Bool("no-cache")
	noCoalesce := fs.Bool("no-coalesce")
	noEngine := fs.Bool("no-engine")
	httpPort := fs.Int("http-port")
	precompressed, err := fs.GetStringSlice("precompressed")
	if err != nil {
		return nil, "", fmt.Errorf("invalid precompressed flag: %w", err)
	}
	if httpPort < 0 || httpPort > 65535 {
		return nil, "", fmt.Errorf("invalid http-port flag: %d is not a port", httpPort)
	}

	var handlers []json.RawMessage
	if compress {
		enc, err := compressHandler()
		if err != nil {
			return nil, "", err
		}
		handlers = append(handlers, enc)
	}
	if templates {
		handlers = append(handlers, caddyconfig.JSONModuleObject(caddytpl.Templates{FileRoot: root}, "handler", "templates", nil))
	}

	handler := Handler{Root: root}
	if len(precompressed) != 0 {
		// as file-server (and the precompressed subdirective) does
		handler.PrecompressedRaw = make(caddy.ModuleMap)
		for _, compression := range precompressed {
			modID := "http.precompressed." + compression
			mod, err := caddy.GetModule(modID)
			if err != nil {
				return nil, "", fmt.Errorf("getting module named '%s': %w", modID, err)
			}
			inst := mod.New()
			precompress, ok := inst.(encode.Precompressed)
			if !ok {
				return nil, "", fmt.Errorf("module %s is not a precompressor; is %T", modID, inst)
			}
			handler.PrecompressedRaw[compression] = caddyconfig.JSON(precompress, nil)
			handler.PrecompressedOrder = append(handler.PrecompressedOrder, compression)
		}
	}
	if browse {
		handler.Browse = &fileserver.Browse{RevealSymlinks: revealSymlinks, FileLimit: fileLimit}
	}
	if noCache {
		handler.Cache = &CacheConfig{Disabled: true}
	}
	handlers = append(handlers, caddyconfig.JSONModuleObject(handler, "handler", "h2_file_server", nil))

	route := caddyhttp.Route{HandlersRaw: handlers}
	if domain != "" {
		route.MatcherSetsRaw = []caddy.ModuleMap{
			{"host": caddyconfig.JSON(caddyhttp.MatchHost{domain}, nil)},
		}
	}

	server := &caddyhttp.Server{
		ReadHeaderTimeout: caddy.Duration(10 * time.Second),
		IdleTimeout:       caddy.Duration(30 * time.Second),
		MaxHeaderBytes:    1024 * 10,
		Routes:            caddyhttp.RouteList{route},
	}
	server.ListenerWrappersRaw = listenerWrappers(!noCoalesce, !noEngine)
	if listen == "" {
		switch {
		case domain != "":
			listen = ":" + strconv.Itoa(certmagic.HTTPSPort)
		case httpPort != 0:
			listen = ":" + strconv.Itoa(httpPort)
		default:
			listen = ":80"
		}
	}
	server.Listen = []string{listen}
	if accessLog {
		server.Logs = &caddyhttp.ServerLogConfig{}
	}

	httpApp := caddyhttp.App{
		HTTPPort: httpPort,
		Servers:  map[string]*caddyhttp.Server{"static": server},
	}

	persist := false
	cfg := &caddy.Config{
		Admin: &caddy.AdminConfig{
			Disabled: true,
			Config:   &caddy.ConfigSettings{Persist: &persist},
		},
		AppsRaw: caddy.ModuleMap{
			"http": caddyconfig.JSON(httpApp, nil),
		},
	}
	if debug {
		cfg.Logging = &caddy.Logging{
			Logs: map[string]*caddy.CustomLog{
				"default": {BaseLog: caddy.BaseLog{Level: zap.DebugLevel.CapitalString()}},
			},
		}
	}
	return cfg, listen, nil
}

// compressHandler is file-server's encode handler: Zstandard, then Gzip.
func compressHandler() (json.RawMessage, error) {
	zstd, err := caddy.GetModule("http.encoders.zstd")
	if err != nil {
		return nil, fmt.Errorf("compression: %w", err)
	}
	gzip, err := caddy.GetModule("http.encoders.gzip")
	if err != nil {
		return nil, fmt.Errorf("compression: %w", err)
	}
	return caddyconfig.JSONModuleObject(encode.Encode{
		EncodingsRaw: caddy.ModuleMap{
			"zstd": caddyconfig.JSON(zstd.New(), nil),
			"gzip": caddyconfig.JSON(gzip.New(), nil),
		},
		Prefer: []string{"zstd", "gzip"},
	}, "handler", "encode", nil), nil
}

// listenerWrappers is the server's listener_wrappers list: README's
// recommendation, coalesce below Caddy's tls placeholder and h2file's
// HTTP/2 engine after it; without the engine, Go's HTTP/2 server with
// coalesce on both sides of tls (the fallback); without coalesce, the
// engine alone (Caddy puts tls before it), or nothing. This is the one
// place to change them. Without TLS (no --domain) the placeholder leaves
// the connection alone, coalesce batches the plain connection's writes,
// and the engine hands every connection to net/http (it serves only
// HTTP/2 negotiated over TLS).
func listenerWrappers(coalesce, engine bool) []json.RawMessage {
	c := caddyconfig.JSONModuleObject(CoalesceWrapper{}, "wrapper", "coalesce", nil)
	e := caddyconfig.JSONModuleObject(EngineWrapper{}, "wrapper", "h2_engine", nil)
	tls := json.RawMessage(`{"wrapper":"tls"}`)
	switch {
	case coalesce && engine:
		return []json.RawMessage{c, tls, e}
	case coalesce:
		return []json.RawMessage{c, tls, c}
	case engine:
		return []json.RawMessage{e}
	}
	return nil
}
