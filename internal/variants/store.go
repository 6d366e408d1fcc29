// Package variants keeps compressed variants of files in memory: one per
// version of a file and content coding, made once however many requests
// miss it at the same time (Begin lets one of them make it), within a
// memory budget that the least recently used variants leave first. A version is whatever comparable
// value the owner gives (the open-file cache's entry: a new one for every
// version of a file), and Forget drops every variant of one when its file
// changes. The package knows nothing of HTTP, Caddy or the cache.
package variants

import (
	"container/list"
	"slices"
	"sync"
	"sync/atomic"
)

// Limits are a store's bounds.
type Limits struct {
	MaxBytes   int64 // the variants held, in all (compressed bytes)
	MaxVariant int64 // one variant; a larger one is not kept, nor made again for its version
}

// Store holds compressed variants within its Limits.
type Store struct {
	limits  Limits
	metrics *Metrics

	mu       sync.Mutex
	used     int64
	lru      list.List // of *variant, most recently used first
	held     map[key]*variant
	versions map[any][]*variant // every variant of a version, to forget it
	flights  map[key]*flight
	// oversized are the variants made once and found over the limits:
	// none is made again until its version is forgotten, so that a file
	// whose variant cannot be kept is not compressed for every request
	oversized map[key]struct{}
	closed    bool // see Close

	// Counts, for metrics and tests.
	hits, misses, made, dropped atomic.Int64
	saved                       atomic.Int64 // source bytes minus variant bytes, of the variants held
}

// key is one variant: a version of a file, in one coding.
type key struct {
	version any
	coding  string
}

type variant struct {
	key    key
	data   []byte
	source int64 // the size of what was compressed
	elem   *list.Element
}

// flight is a variant being made: the token of one Begin.
type flight struct{ _ byte }

// New returns an empty store with limits, updating metrics (nil: fresh
// ones).
func New(limits Limits, metrics *Metrics) *Store {
	if metrics == nil {
		metrics = NewMetrics()
	}
	return &Store{
		limits:    limits,
		metrics:   metrics,
		held:      make(map[key]*variant),
		versions:  make(map[any][]*variant),
		flights:   make(map[key]*flight),
		oversized: make(map[key]struct{}),
	}
}

// Held returns the variant of version in coding if it is held, and
// counts a hit or a miss. The bytes must not be modified.
func (s *Store) Held(version any, coding string) ([]byte, bool) {
	k := key{version, coding}
	s.mu.Lock()
	v := s.held[k]
	if v != nil {
		s.lru.MoveToFront(v.elem)
	}
	s.mu.Unlock()
	if v == nil {
		s.misses.Add(1)
		s.metrics.Misses.Inc()
		return nil, false
	}
	s.hits.Add(1)
	s.metrics.Hits.Inc()
	return v.data, true
}

// Making is the claim of one caller to make one variant; see Begin.
type Making struct {
	s      *Store
	k      key
	flight *flight
}

// Begin claims the making of the variant of version in coding, so that
// the requests that miss it at the same time make it once: it returns
// false if the variant is held, another caller is making it, or it was
// made and found over the limits. The caller makes it (in the
// background, say) and calls Done.
func (s *Store) Begin(version any, coding string) (*Making, bool) {
	k := key{version, coding}
	s.mu.Lock()
	defer s.mu.Unlock()
	if s.held[k] != nil || s.flights[k] != nil {
		return nil, false
	}
	if _, over := s.oversized[k]; over {
		return nil, false
	}
	f := new(flight)
	s.flights[k] = f
	return &Making{s: s, k: k, flight: f}, true
}

// Done ends the claim: data, the variant of source bytes of the file, is
// kept if err is nil, it fits the limits, and its version was not
// forgotten since Begin. produce must have made the variant of exactly
// that version: the store cannot tell a file that changed while it was
// read.
func (m *Making) Done(data []byte, source int64, err error) {
	s := m.s
	s.mu.Lock()
	defer s.mu.Unlock()
	if s.flights[m.k] != m.flight || s.closed { // forgotten meanwhile
		return
	}
	delete(s.flights, m.k)
	if err != nil {
		return
	}
	s.made.Add(1)
	s.metrics.Compressions.Inc()
	s.keepLocked(m.k, data, source)
}

// keepLocked holds data as k's variant, making room by dropping the least
// recently used variants, unless it is over the limits (then k is noted
// as oversized).
func (s *Store) keepLocked(k key, data []byte, source int64) {
	n := int64(len(data))
	if n > s.limits.MaxVariant || n > s.limits.MaxBytes {
		s.oversized[k] = struct{}{}
		return
	}
	for s.used+n > s.limits.MaxBytes {
		s.dropLocked(s.lru.Back().Value.(*variant))
	}
	v := &variant{key: k, data: data, source: source}
	v.elem = s.lru.PushFront(v)
	s.held[k] = v
	s.versions[k.version] = append(s.versions[k.version], v)
	s.used += n
	s.saved.Add(source - n)
	s.metrics.MemoryBytes.Add(float64(n))
	s.metrics.SavedBytes.Add(float64(source - n))
}

// dropLocked lets go of v.
func (s *Store) dropLocked(v *variant) {
	s.lru.Remove(v.elem)
	delete(s.held, v.key)
	vs := slices.DeleteFunc(s.versions[v.key.version], func(other *variant) bool { return other == v })
	if len(vs) == 0 {
		delete(s.versions, v.key.version)
	} else {
		s.versions[v.key.version] = vs
	}
	n := int64(len(v.data))
	s.used -= n
	s.saved.Add(-(v.source - n))
	s.dropped.Add(1)
	s.metrics.Evictions.Inc()
	s.metrics.MemoryBytes.Sub(float64(n))
	s.metrics.SavedBytes.Sub(float64(v.source - n))
}

// Forget drops every variant of version, and keeps none of those being
// made: the file has changed, or is no longer cached.
func (s *Store) Forget(version any) {
	s.mu.Lock()
	defer s.mu.Unlock()
	for _, v := range slices.Clone(s.versions[version]) {
		s.dropLocked(v)
	}
	for k := range s.flights {
		if k.version == version {
			delete(s.flights, k)
		}
	}
	for k := range s.oversized {
		if k.version == version {
			delete(s.oversized, k)
		}
	}
}

// Close drops every variant and keeps none made afterwards: the store's
// owner is gone (its metrics, shared by every store, no longer count
// them).
func (s *Store) Close() {
	s.mu.Lock()
	defer s.mu.Unlock()
	s.closed = true
	for s.lru.Len() > 0 {
		s.dropLocked(s.lru.Back().Value.(*variant))
	}
	clear(s.flights)
	clear(s.oversized)
}

// Stats are a store's counts.
type Stats struct {
	Hits, Misses int64 // calls to Held that found the variant, and that did not
	Made         int64 // variants made
	Dropped      int64 // variants let go (to make room, or forgotten)
	Held         int   // variants held now
	Bytes        int64 // their bytes
	Saved        int64 // what they save: source bytes minus variant bytes
}

// Stats returns the store's counts now.
func (s *Store) Stats() Stats {
	s.mu.Lock()
	held, used := len(s.held), s.used
	s.mu.Unlock()
	return Stats{Hits: s.hits.Load(), Misses: s.misses.Load(), Made: s.made.Load(), Dropped: s.dropped.Load(),
		Held: held, Bytes: used, Saved: s.saved.Load()}
}
