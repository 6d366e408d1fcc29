package integration

import (
	"bufio"
	"bytes"
	"fmt"
	"io"
	"net"
	"net/http"
	"os"
	"path/filepath"
	"strings"
	"syscall"
	"testing"
	"time"
	"unsafe"

	"github.com/h2file/caddy-h2file/internal/harness/caddysite"
)

// TestSendfileTruncatedAfterHandoff serves a file that has just been
// written over cleartext HTTP/1.1, lets the whole response reach the
// client's socket before the client reads any of it, truncates the file to
// a length inside the body, and only then reads the body. The server sent
// a complete version, so the client must get exactly its bytes.
//
// With sendfile the kernel does not copy the file: the socket holds the
// page cache pages, and the client copies them when it reads. Truncating
// zeroes the tail of the page (the folio) where the file now ends, in
// place, so a client reading later got a complete-looking body with a run
// of zeros that no version of the file ever had. A file this recently
// modified is copied instead (see enableSendfile).
func TestSendfileTruncatedAfterHandoff(t *testing.T) {
	root := t.TempDir()
	srv := caddysite.StartPlainCaddy(t, caddysite.H2FileServer(root, nil))
	addr := strings.TrimPrefix(srv.URL, "http://")

	// above small_file_max (held open, not in memory); the cuts fall in
	// the first 64 KiB, which is the part sendfile sends
	const size = 96<<10 + 777
	for i, cut := range []int64{512 + 9, 4096 + 100, 40000 + 123, 60000, 65535} {
		t.Run(fmt.Sprintf("cut %d", cut), func(t *testing.T) {
			content := bytes.Repeat([]byte{'a' + byte(i)}, size)
			copy(content, fmt.Sprintf("version %d\n", i))
			name := filepath.Join(root, fmt.Sprintf("f%d.bin", i))
			if err := os.WriteFile(name, content, 0o644); err != nil {
				t.Fatal(err)
			}

			conn := dialBigReceiveBuffer(t, addr)
			defer conn.Close()
			if err := conn.SetDeadline(time.Now().Add(20 * time.Second)); err != nil {
				t.Fatal(err)
			}
			if _, err := fmt.Fprintf(conn, "GET /f%d.bin HTTP/1.1\r\nHost: %s\r\n\r\n", i, addr); err != nil {
				t.Fatal(err)
			}
			br := bufio.NewReader(conn)
			resp, err := http.ReadResponse(br, nil)
			if err != nil {
				t.Fatal(err)
			}
			defer resp.Body.Close()
			if resp.StatusCode != http.StatusOK || resp.ContentLength != size {
				t.Fatalf("status %d, Content-Length %d; want 200 and %d", resp.StatusCode, resp.ContentLength, size)
			}
			waitReceived(t, conn, br, size)

			if err := os.Truncate(name, cut); err != nil {
				t.Fatal(err)
			}
			got, err := io.ReadAll(resp.Body)
			if err != nil {
				t.Fatalf("reading the body: %v", err)
			}
			if !bytes.Equal(got, content) {
				at := 0
				for at < len(got) && at < len(content) && got[at] == content[at] {
					at++
				}
				zeros := at
				for zeros < len(got) && got[zeros] == 0 {
					zeros++
				}
				t.Fatalf("%d body bytes differ from the version sent from offset %d (zeros up to %d); the file was truncated to %d after the response was sent",
					len(got), at, zeros, cut)
			}
		})
	}
}

// dialBigReceiveBuffer connects to addr with a receive buffer that holds a
// whole test body, so the server can send it all before the client reads.
func dialBigReceiveBuffer(t *testing.T, addr string) *net.TCPConn {
	t.Helper()
	d := net.Dialer{Control: func(_, _ string, c syscall.RawConn) error {
		var serr error
		err := c.Control(func(fd uintptr) {
			serr = syscall.SetsockoptInt(int(fd), syscall.SOL_SOCKET, syscall.SO_RCVBUF, 1<<20)
		})
		if err != nil {
			return err
		}
		return serr
	}}
	conn, err := d.Dial("tcp", addr)
	if err != nil {
		t.Fatal(err)
	}
	return conn.(*net.TCPConn)
}

// waitReceived waits until the client holds n body bytes: those br has
// read ahead, plus those queued in the socket (FIONREAD).
func waitReceived(t *testing.T, conn *net.TCPConn, br *bufio.Reader, n int) {
	t.Helper()
	rc, err := conn.SyscallConn()
	if err != nil {
		t.Fatal(err)
	}
	deadline := time.Now().Add(10 * time.Second)
	for {
		var queued int
		var ierr error
		if err := rc.Control(func(fd uintptr) {
			queued, ierr = ioctlInt(fd, syscall.TIOCINQ)
		}); err != nil {
			t.Fatal(err)
		}
		if ierr != nil {
			t.Fatalf("FIONREAD: %v", ierr)
		}
		have := br.Buffered() + queued
		if have >= n {
			return
		}
		if time.Now().After(deadline) {
			t.Fatalf("the client holds %d of the %d body bytes after 10s", have, n)
		}
		time.Sleep(time.Millisecond)
	}
}

// ioctlInt runs an ioctl that returns an int.
func ioctlInt(fd uintptr, req uintptr) (int, error) {
	var v int32
	_, _, errno := syscall.Syscall(syscall.SYS_IOCTL, fd, req, uintptr(unsafe.Pointer(&v)))
	if errno != 0 {
		return 0, errno
	}
	return int(v), nil
}
