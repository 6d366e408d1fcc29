package osfile

import (
	"os"
	"path/filepath"
	"testing"
)

// TestSizeNowFollowsTheFile: the size of an open file as it changes.
func TestSizeNowFollowsTheFile(t *testing.T) {
	name := filepath.Join(t.TempDir(), "f")
	if err := os.WriteFile(name, make([]byte, 10000), 0o644); err != nil {
		t.Fatal(err)
	}
	f, err := os.Open(name)
	if err != nil {
		t.Fatal(err)
	}
	defer f.Close()
	if n, ok := SizeNow(f); !ok || n != 10000 {
		t.Fatalf("size %d, %v; want 10000", n, ok)
	}
	if err := os.Truncate(name, 4097); err != nil {
		t.Fatal(err)
	}
	if n, ok := SizeNow(f); !ok || n != 4097 {
		t.Fatalf("after a truncate: size %d, %v; want 4097", n, ok)
	}
}
