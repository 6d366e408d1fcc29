package h2

import (
	"math/rand/v2"
	"strings"
	"testing"
)

// priorityMembers and priorityPieces are what the generated priority
// values are made of: members and separators of the shapes
// parsePriorityCommon reads, and pieces next to them that it must leave
// to httpsfv.
var priorityMembers = []string{"u=0", "u=3", "u=7", "u=8", "u=9", "i", "i=?1", "i=?0", ", ", ",", ",  "}

var priorityPieces = []string{
	"u=", "u", "i", "=", "?1", "?0", "?", "0", "1", "3", "7", "8", "9", "12", "-1", "1.5",
	",", ", ", " ", "  ", "\t", ";", ";a", "x", "x=y", `"1"`, "(1 2)", "U", "*", "i=1", "u=?1",
}

// TestParsePriorityCommonMatchesDictionary holds parsePriority, which
// takes the common shapes without httpsfv, to the same result as httpsfv
// alone on generated values and on the values browsers send.
func TestParsePriorityCommonMatchesDictionary(t *testing.T) {
	check := func(s string) (common bool) {
		t.Helper()
		checkPriorityAsDictionary(t, s)
		_, common = parsePriorityCommon(s, defaultPriority(true))
		return common
	}
	for _, s := range []string{"u=0", "u=1", "u=2", "u=3, i", "u=4, i", "u=5,i", "i", "i, u=1", "u=0, i=?0", "u=2, u=9", "i=?1, i=?0"} {
		if !check(s) {
			t.Errorf("%q is read by httpsfv: it is a value browsers send", s)
		}
	}
	checkGenerated(t, rand.New(rand.NewPCG(29, 9218)), check, func(rng *rand.Rand, b *strings.Builder) {
		for range 1 + rng.IntN(8) {
			if rng.IntN(8) == 0 {
				b.WriteString(priorityPieces[rng.IntN(len(priorityPieces))])
			} else {
				b.WriteString(priorityMembers[rng.IntN(len(priorityMembers))])
			}
		}
	})
}

// FuzzParsePriority is TestParsePriorityCommonMatchesDictionary's check
// on any string.
func FuzzParsePriority(f *testing.F) {
	for _, s := range []string{"u=1, i", "i=?0,u=7", "u=1,", "u=12", " u=1"} {
		f.Add(s)
	}
	f.Fuzz(checkPriorityAsDictionary)
}

// checkPriorityAsDictionary fails t unless parsePriority reads s as
// httpsfv alone does, for a client aware of RFC 9218 and not.
func checkPriorityAsDictionary(t *testing.T, s string) {
	t.Helper()
	for _, aware := range []bool{false, true} {
		got, gotOK := parsePriority(s, aware)
		want, wantOK := defaultPriority(aware), true
		if s != "" {
			want, wantOK = parsePriorityDictionary(s, want)
		}
		if got != want || gotOK != wantOK {
			t.Fatalf("parsePriority(%q, %v) = %+v, %v; httpsfv: %+v, %v", s, aware, got, gotOK, want, wantOK)
		}
	}
}

func TestParsePriorityCommonAllocatesNothing(t *testing.T) {
	if n := testing.AllocsPerRun(100, func() { parsePriority("u=3, i", true) }); n != 0 {
		t.Errorf("parsePriority(\"u=3, i\") allocates %v objects", n)
	}
}
