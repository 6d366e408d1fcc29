package h2

import (
	"bytes"
	"context"
	"io"
	"net"
	"net/http"
	"testing"
	"time"

	"golang.org/x/net/http2"
	"golang.org/x/net/http2/hpack"

	"github.com/h2file/caddy-h2file/internal/h2/wire"
)

// FuzzServeConn feeds arbitrary bytes, after the client preface, to a
// connection served by the engine: whatever they are, the engine must
// not panic, must not hang once the client has gone (ServeConn returns),
// and must leave no handler running.
func FuzzServeConn(f *testing.F) {
	for _, seed := range fuzzSeeds() {
		f.Add(seed)
	}
	s := NewServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		b, _ := io.ReadAll(io.LimitReader(r.Body, 1<<20))
		w.Header().Set("Trailer", "X-T")
		w.Write(bytes.Repeat([]byte("r"), 20000))
		w.Write(b)
		w.Header().Set("X-T", "t")
	}), Config{MaxConcurrentStreams: 8, StreamWindow: 1 << 16, ConnWindow: 1 << 16})
	f.Fuzz(func(t *testing.T, data []byte) {
		client, server := net.Pipe()
		done := make(chan struct{})
		go func() {
			defer close(done)
			s.ServeConn(context.Background(), server)
		}()
		go io.Copy(io.Discard, client) // the server's frames
		client.SetWriteDeadline(time.Now().Add(2 * time.Second))
		client.Write([]byte(wire.Preface))
		client.Write(data)
		time.Sleep(time.Millisecond)
		client.Close()
		select {
		case <-done:
		case <-time.After(5 * time.Second):
			t.Fatalf("ServeConn still running 5 s after the client went away, on %x", data)
		}
	})
}

// fuzzSeeds are client frame sequences that reach the engine's paths:
// requests with and without bodies, trailers, resets, window updates,
// pings, settings, and a few broken ones.
func fuzzSeeds() [][]byte {
	var seeds [][]byte
	build := func(fn func(fr *http2.Framer, hdr func(id uint32, end bool, fields ...string))) {
		var buf bytes.Buffer
		fr := http2.NewFramer(&buf, nil)
		fr.AllowIllegalWrites = true
		var hb bytes.Buffer
		enc := hpack.NewEncoder(&hb)
		hdr := func(id uint32, end bool, fields ...string) {
			hb.Reset()
			for i := 0; i+1 < len(fields); i += 2 {
				enc.WriteField(hpack.HeaderField{Name: fields[i], Value: fields[i+1]})
			}
			fr.WriteHeaders(http2.HeadersFrameParam{StreamID: id, BlockFragment: hb.Bytes(), EndStream: end, EndHeaders: true})
		}
		fr.WriteSettings()
		fn(fr, hdr)
		seeds = append(seeds, buf.Bytes())
	}
	get := []string{":method", "GET", ":scheme", "https", ":path", "/", ":authority", "x"}
	post := []string{":method", "POST", ":scheme", "https", ":path", "/p", ":authority", "x", "content-length", "5", "trailer", "x-t"}
	build(func(fr *http2.Framer, hdr func(uint32, bool, ...string)) { hdr(1, true, get...) })
	build(func(fr *http2.Framer, hdr func(uint32, bool, ...string)) {
		hdr(1, false, post...)
		fr.WriteData(1, false, []byte("hello"))
		hdr(1, true, "x-t", "v")
	})
	build(func(fr *http2.Framer, hdr func(uint32, bool, ...string)) {
		hdr(1, true, get...)
		fr.WriteRSTStream(1, http2.ErrCodeCancel)
		hdr(3, true, get...)
		fr.WriteWindowUpdate(0, 1<<20)
		fr.WriteWindowUpdate(3, 1<<20)
		fr.WritePing(false, [8]byte{1})
		fr.WriteSettings(http2.Setting{ID: http2.SettingInitialWindowSize, Val: 0})
		fr.WriteSettingsAck()
	})
	build(func(fr *http2.Framer, hdr func(uint32, bool, ...string)) {
		hdr(1, false, post...)
		fr.WriteData(1, true, []byte("too long body"))
		fr.WriteGoAway(0, http2.ErrCodeNo, nil)
		hdr(2, true, get...)
	})
	build(func(fr *http2.Framer, hdr func(uint32, bool, ...string)) {
		for id := uint32(1); id < 40; id += 2 {
			hdr(id, true, get...)
			fr.WriteRSTStream(id, http2.ErrCodeCancel)
		}
	})
	return append(seeds, []byte{0, 0, 0, 4, 0, 0, 0, 0, 0}, []byte("GET / HTTP/1.1\r\n\r\n"))
}
