package h2

import (
	"net/http"
	"slices"
	"strings"
)

// headerSnapshot is a response header as it was when the handler called
// WriteHeader (x/net's rws.snapHeader, an http.Header.Clone): keys sorted
// as they are encoded, each with a copy of its values, in storage that
// lives in the pooled responseState, so that taking one allocates nothing
// once the pool is warm (a Clone costs three objects per response).
// Lookups are by exact key, as an http.Header's index is: the callers ask
// for canonical keys.
type headerSnapshot struct {
	fields []snapshotField // sorted by key
	values []string        // the fields' values, copied
}

type snapshotField struct {
	key     string
	values  []string // in headerSnapshot.values
	deleted bool
}

// take copies h.
func (s *headerSnapshot) take(h http.Header) {
	s.reset()
	n := 0
	for _, vv := range h {
		n += len(vv)
	}
	s.values = slices.Grow(s.values, n) // no append below moves it
	for k, vv := range h {
		start := len(s.values)
		s.values = append(s.values, vv...)
		s.fields = append(s.fields, snapshotField{key: k, values: s.values[start:len(s.values):len(s.values)]})
	}
	slices.SortFunc(s.fields, func(a, b snapshotField) int { return strings.Compare(a.key, b.key) })
}

// reset empties s, keeping its storage and dropping what it referred to.
func (s *headerSnapshot) reset() {
	clear(s.fields)
	clear(s.values)
	s.fields, s.values = s.fields[:0], s.values[:0]
}

func (s *headerSnapshot) find(key string) int {
	i, ok := slices.BinarySearchFunc(s.fields, key, func(f snapshotField, key string) int { return strings.Compare(f.key, key) })
	if !ok || s.fields[i].deleted {
		return -1
	}
	return i
}

// has reports whether key is present (http.Header's `_, ok := h[key]`).
func (s *headerSnapshot) has(key string) bool { return s.find(key) >= 0 }

// get returns key's first value, or "".
func (s *headerSnapshot) get(key string) string {
	if i := s.find(key); i >= 0 && len(s.fields[i].values) > 0 {
		return s.fields[i].values[0]
	}
	return ""
}

// all returns key's values.
func (s *headerSnapshot) all(key string) []string {
	if i := s.find(key); i >= 0 {
		return s.fields[i].values
	}
	return nil
}

// del removes key.
func (s *headerSnapshot) del(key string) {
	if i := s.find(key); i >= 0 {
		s.fields[i].deleted = true
	}
}
