//go:build unix

package osfile

import (
	"os"
	"testing"
)

// TestSizeNowAllocatesNothing: one fstat, no FileInfo.
func TestSizeNowAllocatesNothing(t *testing.T) {
	f, err := os.Open(os.Args[0])
	if err != nil {
		t.Fatal(err)
	}
	defer f.Close()
	if allocs := testing.AllocsPerRun(100, func() { SizeNow(f) }); allocs != 0 {
		t.Errorf("%v allocations per call", allocs)
	}
}
