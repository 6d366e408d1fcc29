// Command caddy runs Caddy with its standard modules and the h2file plugin,
// so the example config can be run without xcaddy.
package main

import (
	caddycmd "github.com/caddyserver/caddy/v2/cmd"

	_ "github.com/caddyserver/caddy/v2/modules/standard"
	_ "github.com/h2file/caddy-h2file"
)

func main() {
	caddycmd.Main()
}
