package fdcache

import (
	"bytes"
	"io/fs"
	"os"
	"path/filepath"
	"testing"
	"time"

	"go.uber.org/zap"

	"github.com/h2file/caddy-h2file/internal/harness"
)

// BenchmarkCacheLookupHit measures a lookup of a hot path, with file
// system events (each lookup reads the kernel's event queue, which is
// empty) and without: a file held in memory then costs no system call and
// no allocation; a file held open costs one fstat (and the FileInfo it
// allocates).
func BenchmarkCacheLookupHit(b *testing.B) {
	for _, tc := range []struct {
		desc         string
		smallFileMax int64
		watched      bool
	}{{"memory", 64 << 10, false}, {"descriptor", 1 << 10, false}, {"memory-watched", 64 << 10, true}, {"descriptor-watched", 1 << 10, true}} {
		b.Run(tc.desc, func(b *testing.B) {
			dir := b.TempDir()
			if tc.watched && !harness.FileEventsAvailable(dir) {
				b.Skip("no file system events here")
			}
			name := filepath.Join(dir, "hot.txt")
			if err := os.WriteFile(name, bytes.Repeat([]byte("x"), 10_000), 0o644); err != nil {
				b.Fatal(err)
			}
			// settled, so that a small file is held in memory
			past := time.Now().Add(-time.Hour)
			if err := os.Chtimes(name, past, past); err != nil {
				b.Fatal(err)
			}
			limits := testLimits()
			limits.SmallFileMax = tc.smallFileMax
			clock := &testClock{now: time.Unix(1_700_000_000, 0)}
			c := New(limits, Options[testMeta]{Logger: zap.NewNop(), Metrics: NewMetrics(), Now: clock.Now})
			c.isLocal = func(fs.FS) bool { return tc.watched }
			b.Cleanup(c.Close)
			e, err := c.Lookup(harness.OSFS{}, "", name)
			if err != nil {
				b.Fatal(err)
			}
			if (e.sub.Watched()) != tc.watched || (e.data != nil) != (tc.smallFileMax > 10_000) {
				b.Fatalf("watched = %v, in memory = %v: not the case to measure", e.sub.Watched(), e.data != nil)
			}
			b.ReportAllocs()
			b.RunParallel(func(pb *testing.PB) {
				for pb.Next() {
					if _, err := c.Lookup(harness.OSFS{}, "", name); err != nil {
						b.Fatal(err)
					}
				}
			})
		})
	}
}
