package h2

import (
	"context"
	"net"
	"net/http"
	"testing"
	"time"

	"golang.org/x/net/http2"
)

// TestSettingsBeforeGoAway: a Shutdown that reaches a connection after
// the server tracks it but before its serve loop starts must still have
// the server's SETTINGS first on the wire (RFC 9113 §3.4): Go's client
// fails a connection whose first frame is a GOAWAY ("received GOAWAY
// before a SETTINGS frame"). The old engine batched SETTINGS in serve,
// after the GOAWAY.
func TestSettingsBeforeGoAway(t *testing.T) {
	s := NewServer(http.NotFoundHandler(), Config{})
	srv, cli := net.Pipe()
	defer cli.Close()
	cli.SetDeadline(time.Now().Add(10 * time.Second))
	// the client reads from the start: net.Pipe has no buffer, and a
	// server that wrote on the caller's goroutine would wait for it
	frames := make(chan string, 16)
	go func() {
		defer close(frames)
		fr := http2.NewFramer(nil, cli)
		for {
			f, err := fr.ReadFrame()
			if err != nil {
				return
			}
			frames <- f.Header().Type.String()
			if _, ok := f.(*http2.GoAwayFrame); ok {
				return
			}
		}
	}()
	c := newConn(s, context.Background(), srv)
	if !s.track(c) {
		t.Fatal("a new server refused a connection")
	}
	c.startGracefulShutdown() // Shutdown's step, for every tracked connection
	served := make(chan struct{})
	go func() {
		defer close(served)
		defer s.untrack(c)
		c.serve()
	}()
	go cli.Write([]byte(http2.ClientPreface)) // the server's reads wait for it
	var got []string
	for f := range frames {
		got = append(got, f)
	}
	if len(got) == 0 || got[0] != "SETTINGS" || got[len(got)-1] != "GOAWAY" {
		t.Fatalf("the server's frames: %v, want SETTINGS first, then GOAWAY", got)
	}
	cli.Close()
	<-served
}
