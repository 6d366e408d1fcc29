package harness

import (
	"fmt"
	"net"
	"testing"
)

// FreePorts returns n distinct free TCP ports on 127.0.0.1 (all held open
// until all are found, so none is returned twice).
func FreePorts(t testing.TB, n int) []int {
	t.Helper()
	ports := make([]int, 0, n)
	for range n {
		ln, err := net.Listen("tcp", "127.0.0.1:0")
		if err != nil {
			t.Fatal(err)
		}
		defer ln.Close()
		ports = append(ports, ln.Addr().(*net.TCPAddr).Port)
	}
	return ports
}

// FreePort returns a free TCP port on 127.0.0.1.
func FreePort(t testing.TB) int {
	t.Helper()
	return FreePorts(t, 1)[0]
}

// Loopback is 127.0.0.1:port.
func Loopback(port int) string { return fmt.Sprintf("127.0.0.1:%d", port) }
