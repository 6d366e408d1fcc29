package h2

import "slices"

// maxRecentResets is how many of the streams it reset a connection
// remembers, so as to ignore the frames the client sent on them before
// it read the RST_STREAM: as many as may be open at once by default
// (MAX_CONCURRENT_STREAMS 250), and more.
const maxRecentResets = 256

// recentResets are the last streams a connection reset, each with the
// window the client still had on it. RFC 9113 §5.1 has an endpoint that
// sent RST_STREAM ignore the frames it then receives on the stream (DATA,
// trailers, WINDOW_UPDATE already in flight): they are not answered, and
// not counted as a flood for as long as they are what a client may have
// had in flight. DATA within the window is free (its connection window
// goes back at once); DATA past it was never given room, and each such
// frame counts, or a reset stream would take DATA frames, each answered
// with a WINDOW_UPDATE, without end. A WINDOW_UPDATE counts as on any
// closed stream (noteClosedWindowUpdate: free while it gives back what was
// sent). A ring, allocated at the first reset.
type recentResets struct {
	ids     []uint32
	windows []int32 // what the client may still send on ids[i]
	next    int
}

// add notes id as reset, with window the DATA the client may still send
// on it.
func (r *recentResets) add(id uint32, window int32) {
	if r.ids == nil {
		r.ids = make([]uint32, 0, maxRecentResets)
		r.windows = make([]int32, 0, maxRecentResets)
	}
	if len(r.ids) < maxRecentResets {
		r.ids = append(r.ids, id)
		r.windows = append(r.windows, max(window, 0))
		return
	}
	r.ids[r.next], r.windows[r.next] = id, max(window, 0)
	r.next = (r.next + 1) % maxRecentResets
}

// forget takes id out of the streams reset last (0 marks the slot
// free: it is never a stream's ID).
func (r *recentResets) forget(id uint32) {
	if i := r.index(id); i >= 0 {
		r.ids[i] = 0
	}
}

// has reports whether id is among the streams reset last.
func (r *recentResets) has(id uint32) bool { return r.index(id) >= 0 }

// takeData notes n bytes of DATA (a frame's length, padding included)
// received on id: known reports whether id is among the streams reset
// last, within whether the bytes fit in the window the client had left
// on it.
func (r *recentResets) takeData(id uint32, n uint32) (known, within bool) {
	i := r.index(id)
	if i < 0 {
		return false, false
	}
	if int64(n) > int64(r.windows[i]) {
		r.windows[i] = 0
		return true, false
	}
	r.windows[i] -= int32(n)
	return true, true
}

func (r *recentResets) index(id uint32) int {
	if id == 0 {
		return -1
	}
	return slices.Index(r.ids, id)
}
