package h2

import (
	"context"
	"crypto/tls"
	"io"
	"net/http"
	"runtime"
	"strconv"
	"sync"
	"sync/atomic"
	"testing"
	"time"

	"github.com/h2file/caddy-h2file/internal/harness"
)

// BenchmarkEngineBesideTimers serves 10 KB responses through the engine,
// 64 requests at a time over TLS on loopback, alone and beside 100,000
// timers that wait for an hour, armed from many goroutines, as a process
// holds after other sites' loads (Caddy's write idle timer is armed once
// more per request and lives a minute). Compare the two: issue 29 saw the
// engine's CPU per request grow with other sites' load, and
// runtime.(*timers).adjust take half the CPU, while the engine reset
// timers per request. On 2 cores Go's client takes much of the time per
// operation here; the bench's CPU per request of the server is the
// figure that counts.
func BenchmarkEngineBesideTimers(b *testing.B) {
	body := make([]byte, 10_000)
	h := http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		w.Header().Set("Content-Length", strconv.Itoa(len(body)))
		w.Write(body)
	})
	cert := harness.NewCert(b)
	engine := NewServer(h, Config{})
	b.Cleanup(func() { engine.Close() })
	url := "https://" + serveTLS(b, cert, func(tc *tls.Conn) { engine.ServeConn(context.Background(), tc) }) + "/"
	client := harness.NewClient(b, "h2", cert.ClientTLS())
	for _, n := range []int{0, 100_000} {
		b.Run("timers="+strconv.Itoa(n), func(b *testing.B) {
			// armed from many goroutines, so that every P's heap holds
			// some, as other sites' requests leave them
			timers := make([]*time.Timer, n)
			var wg sync.WaitGroup
			for g := range 64 {
				wg.Go(func() {
					for i := g; i < n; i += 64 {
						timers[i] = time.AfterFunc(time.Hour+time.Duration(i)*time.Millisecond, func() {})
						if i%256 == g {
							runtime.Gosched()
						}
					}
				})
			}
			wg.Wait()
			defer func() {
				for _, t := range timers {
					t.Stop()
				}
			}()
			var failed atomic.Int64
			b.SetParallelism(32) // 64 on 2 cores
			b.ResetTimer()
			b.RunParallel(func(pb *testing.PB) {
				for pb.Next() {
					resp, err := client.Get(url)
					if err != nil {
						failed.Add(1)
						continue
					}
					if n, _ := io.Copy(io.Discard, resp.Body); n != int64(len(body)) {
						failed.Add(1)
					}
					resp.Body.Close()
				}
			})
			if f := failed.Load(); f > 0 {
				b.Fatalf("%d requests failed", f)
			}
		})
	}
}
