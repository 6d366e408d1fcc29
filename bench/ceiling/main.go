// Command ceiling is Caddy with its standard modules, the h2file plugin and
// one more handler, bench_ceiling, for the bench's memory variant Z
// (bench/run.sh, see bench/README.md): it answers a GET
// or HEAD of a file under its root with the file's bytes from memory, read
// once at provisioning, in a single Write and with no header but
// Content-Type and Content-Length. No handler inside Caddy can do less for
// a file, so its throughput is the ceiling of Caddy, its HTTP/2 server
// (x/net, or net/http's copy on Go 1.27) and crypto/tls, with the listener
// wrappers it runs behind; the difference between it and h2_file_server is
// what the handler costs.
//
//	go build -o bench/out/caddy-ceiling ./bench/ceiling
//
// For the text workload, a file with a .gz sidecar under the root is
// answered with the sidecar's bytes (Content-Encoding gzip, Vary
// Accept-Encoding) when the request accepts gzip: the ceiling of serving
// a compressed variant from memory.
//
// Caddyfile: `bench_ceiling { root <dir> }` (the directive is ordered
// before file_server).
package main

import (
	"errors"
	"fmt"
	"io/fs"
	"mime"
	"net/http"
	"os"
	"path"
	"path/filepath"
	"strconv"
	"strings"

	"github.com/caddyserver/caddy/v2"
	"github.com/caddyserver/caddy/v2/caddyconfig/caddyfile"
	"github.com/caddyserver/caddy/v2/caddyconfig/httpcaddyfile"
	caddycmd "github.com/caddyserver/caddy/v2/cmd"
	"github.com/caddyserver/caddy/v2/modules/caddyhttp"

	_ "github.com/caddyserver/caddy/v2/modules/standard"
	_ "github.com/h2file/caddy-h2file"
)

func init() {
	caddy.RegisterModule(Ceiling{})
	httpcaddyfile.RegisterHandlerDirective("bench_ceiling", parseCaddyfile)
	httpcaddyfile.RegisterDirectiveOrder("bench_ceiling", httpcaddyfile.Before, "file_server")
}

func main() {
	caddycmd.Main()
}

// maxCeilingBytes bounds what Provision reads into memory (the bench's
// files are about 400 MiB).
const maxCeilingBytes int64 = 1 << 30

// Ceiling serves the regular files under Root from memory.
type Ceiling struct {
	// Root is the directory whose files are served; a request path names
	// a file relative to it.
	Root string `json:"root,omitempty"`

	files map[string][]byte
}

// CaddyModule returns the Caddy module information.
func (Ceiling) CaddyModule() caddy.ModuleInfo {
	return caddy.ModuleInfo{
		ID:  "http.handlers.bench_ceiling",
		New: func() caddy.Module { return new(Ceiling) },
	}
}

// Provision reads every regular file under Root into memory.
func (c *Ceiling) Provision(caddy.Context) error {
	if c.Root == "" {
		return errors.New("bench_ceiling: no root")
	}
	c.files = map[string][]byte{}
	var total int64
	return filepath.WalkDir(c.Root, func(p string, d fs.DirEntry, err error) error {
		if err != nil || !d.Type().IsRegular() {
			return err
		}
		data, err := os.ReadFile(p)
		if err != nil {
			return fmt.Errorf("bench_ceiling: %w", err)
		}
		if total += int64(len(data)); total > maxCeilingBytes {
			return fmt.Errorf("bench_ceiling: the files under %s are more than %d bytes", c.Root, maxCeilingBytes)
		}
		rel, err := filepath.Rel(c.Root, p)
		if err != nil {
			return fmt.Errorf("bench_ceiling: %w", err)
		}
		c.files["/"+filepath.ToSlash(rel)] = data
		return nil
	})
}

// ServeHTTP answers a GET or HEAD of a file it holds (its .gz sidecar
// when there is one and the request accepts gzip); anything else is
// passed on.
func (c *Ceiling) ServeHTTP(w http.ResponseWriter, r *http.Request, next caddyhttp.Handler) error {
	data, ok := c.files[path.Clean(r.URL.Path)]
	if !ok || (r.Method != http.MethodGet && r.Method != http.MethodHead) {
		return next.ServeHTTP(w, r)
	}
	h := w.Header()
	h["Content-Type"] = []string{"application/octet-stream"}
	if gz, ok := c.files[path.Clean(r.URL.Path)+".gz"]; ok {
		if ct := mime.TypeByExtension(path.Ext(r.URL.Path)); ct != "" {
			h["Content-Type"] = []string{ct}
		}
		h["Vary"] = []string{"Accept-Encoding"}
		if strings.Contains(r.Header.Get("Accept-Encoding"), "gzip") {
			h["Content-Encoding"] = []string{"gzip"}
			data = gz
		}
	}
	h["Content-Length"] = []string{strconv.Itoa(len(data))}
	w.WriteHeader(http.StatusOK)
	if r.Method == http.MethodHead {
		return nil
	}
	_, err := w.Write(data)
	return err
}

// UnmarshalCaddyfile reads
//
//	bench_ceiling {
//		root <dir>
//	}
//
// (a block, since an argument that starts with / would be read as a path
// matcher).
func (c *Ceiling) UnmarshalCaddyfile(d *caddyfile.Dispenser) error {
	d.Next() // the directive
	if d.NextArg() {
		return d.ArgErr()
	}
	for d.NextBlock(0) {
		if d.Val() != "root" {
			return d.Errf("unknown subdirective %q", d.Val())
		}
		if !d.AllArgs(&c.Root) {
			return d.ArgErr()
		}
	}
	return nil
}

func parseCaddyfile(h httpcaddyfile.Helper) (caddyhttp.MiddlewareHandler, error) {
	c := new(Ceiling)
	return c, c.UnmarshalCaddyfile(h.Dispenser)
}

// Interface guards
var (
	_ caddy.Provisioner           = (*Ceiling)(nil)
	_ caddyhttp.MiddlewareHandler = (*Ceiling)(nil)
	_ caddyfile.Unmarshaler       = (*Ceiling)(nil)
)
