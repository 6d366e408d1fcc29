// Package coalescetest checks, for tests outside package coalesce, that
// coalescing connections give back what they took.
package coalescetest

import (
	"fmt"
	"testing"
	"time"

	"github.com/h2file/caddy-h2file/internal/coalesce"
	"github.com/h2file/caddy-h2file/internal/harness"
)

// NoLeaks fails the test unless, within 10 s of its end, no coalescing
// connection's flusher runs and every buffer taken since it began is given
// back.
func NoLeaks(t *testing.T) {
	t.Helper()
	chunks := coalesce.ReadStats().ChunksOut
	t.Cleanup(func() {
		t.Helper()
		if err := harness.Poll(10*time.Second, func() error {
			if s := coalesce.ReadStats(); s.Flushers != 0 || s.ChunksOut != chunks {
				return fmt.Errorf("leak: %d flushers running, %d chunks out (want 0, %d)", s.Flushers, s.ChunksOut, chunks)
			}
			return nil
		}); err != nil {
			t.Error(err)
		}
	})
}
