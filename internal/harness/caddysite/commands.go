package caddysite

import (
	"encoding/json"
	"testing"

	caddycmd "github.com/caddyserver/caddy/v2/cmd"
	"github.com/spf13/cobra"
)

// CommandFor makes the cobra command of a registered Caddy command, as
// `caddy <name>` would.
func CommandFor(t testing.TB, name string) *cobra.Command {
	t.Helper()
	c, ok := caddycmd.Commands()[name]
	if !ok {
		t.Fatalf("command %q is not registered", name)
	}
	cmd := &cobra.Command{Use: c.Name, Short: c.Short}
	c.CobraFunc(cmd)
	return cmd
}

// MustJSON marshals v, failing the test if it cannot.
func MustJSON(t testing.TB, v any) []byte {
	t.Helper()
	raw, err := json.Marshal(v)
	if err != nil {
		t.Fatal(err)
	}
	return raw
}
