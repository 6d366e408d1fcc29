package h2

import (
	"net/http"
	"slices"
	"testing"
)

// TestHeaderSnapshot holds headerSnapshot to http.Header.Clone, which it
// replaces: what the handler does to its header after the snapshot does
// not show, nil and empty values count as present, del hides a key, and
// the fields come out sorted (the order they are encoded in).
func TestHeaderSnapshot(t *testing.T) {
	h := http.Header{
		"Content-Type":   {"text/plain"},
		"X-Many":         {"a", "b", "c"},
		"X-Nil":          nil,
		"X-Empty":        {},
		"Content-Length": {"5"},
		"lower-case":     {"kept as is"},
	}
	var s headerSnapshot
	s.take(h)
	clone := h.Clone()
	h["X-Many"][0] = "changed"
	h.Set("Content-Type", "changed")
	h.Del("Content-Length")
	h.Set("X-Added", "after")
	for _, k := range []string{"Content-Type", "X-Many", "X-Nil", "X-Empty", "Content-Length", "lower-case", "X-Added", "Absent"} {
		_, want := clone[k]
		if got := s.has(k); got != want {
			t.Errorf("has(%q) = %v, want %v", k, got, want)
		}
		if got, want := s.get(k), clone.Get(k); k != "lower-case" && got != want {
			t.Errorf("get(%q) = %q, want %q", k, got, want)
		}
		if got, want := s.all(k), clone[k]; !slices.Equal(got, want) {
			t.Errorf("all(%q) = %q, want %q", k, got, want)
		}
	}
	s.del("Content-Length")
	if s.has("Content-Length") || s.get("Content-Length") != "" {
		t.Error("Content-Length still there after del")
	}
	var keys []string
	for _, f := range s.fields {
		if !f.deleted {
			keys = append(keys, f.key)
		}
	}
	if want := []string{"Content-Type", "X-Empty", "X-Many", "X-Nil", "lower-case"}; !slices.Equal(keys, want) {
		t.Errorf("fields %q, want %q", keys, want)
	}
	// taken again, the storage is reused: nothing allocated
	if allocs := testing.AllocsPerRun(100, func() { s.take(clone) }); allocs != 0 {
		t.Errorf("take allocated %.1f times with its storage warm, want 0", allocs)
	}
}
