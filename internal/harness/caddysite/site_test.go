package caddysite

import (
	"bufio"
	"io"
	"net"
	"net/http"
	"testing"
	"time"
)

// TestAdminAPIResendsResetRequest: a request to the admin API whose
// connection is reset before it is answered, as one queued on the
// listener of the admin server a config change replaces is, or closed
// once its request is read, as one that server accepted just before is
// (see Server.API), is sent again; both failed TestAdminReconfigure.
func TestAdminAPIResendsResetRequest(t *testing.T) {
	ln, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		t.Fatal(err)
	}
	srv := &http.Server{Handler: http.HandlerFunc(func(w http.ResponseWriter, _ *http.Request) { io.WriteString(w, "answered") })}
	go srv.Serve(&admDropFirst{Listener: ln}) //nolint:errcheck // ends with Close
	t.Cleanup(func() { srv.Close() })
	s := &Server{t: t, Admin: "http://" + ln.Addr().String(), adminHTTP: &http.Client{Transport: &http.Transport{DisableKeepAlives: true}, Timeout: 10 * time.Second}}
	if code, body, err := s.API(http.MethodPatch, "/config/x", []byte(`1`)); err != nil || code != http.StatusOK || body != "answered" {
		t.Fatalf("after a reset and a close: status %d, %q, %v; want the request sent again and answered", code, body, err)
	}
}

// admDropFirst resets its first connection and closes its second, each
// once its request is in, and hands the others on.
type admDropFirst struct {
	net.Listener
	dropped int
}

func (l *admDropFirst) Accept() (net.Conn, error) {
	for ; l.dropped < 2; l.dropped++ {
		c, err := l.Listener.Accept()
		if err != nil {
			return nil, err
		}
		if l.dropped == 0 {
			c.Read(make([]byte, 1))       //nolint:errcheck // the request has arrived
			c.(*net.TCPConn).SetLinger(0) //nolint:errcheck // close with a reset
		} else if req, err := http.ReadRequest(bufio.NewReader(c)); err == nil {
			io.Copy(io.Discard, req.Body) //nolint:errcheck // all read: close sends FIN, not a reset
		}
		c.Close()
	}
	return l.Listener.Accept()
}
