// Package coalescetest checks, for tests outside package coalesce, that
// coalescing connections give back what they took.
package coalescetest

import (
	"testing"

	"github.com/h2file/caddy-h2file/internal/coalesce"
	"github.com/h2file/caddy-h2file/internal/harness"
)

// NoLeaks fails the test unless, within 10 s of its end, no coalescing
// connection's flusher runs and every buffer taken since it began is given
// back.
func NoLeaks(t *testing.T) {
	t.Helper()
	harness.NoLeaks(t, func() (int64, int64) {
		s := coalesce.ReadStats()
		return s.Flushers, s.ChunksOut
	})
}
