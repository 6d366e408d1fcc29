package h2

import (
	"math/rand/v2"
	"strings"
	"testing"
)

// checkGenerated calls check on 200,000 strings that generate writes, and
// fails t unless at least 5,000 of them took the fast path (check's
// result): a generator that seldom reaches it proves little.
func checkGenerated(t *testing.T, rng *rand.Rand, check func(string) bool, generate func(*rand.Rand, *strings.Builder)) {
	t.Helper()
	common := 0
	for range 200_000 {
		var b strings.Builder
		generate(rng, &b)
		if check(b.String()) {
			common++
		}
	}
	if common < 5_000 {
		t.Errorf("only %d of 200000 generated strings took the fast path", common)
	}
}
