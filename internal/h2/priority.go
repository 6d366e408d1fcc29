package h2

import (
	"slices"

	"golang.org/x/net/http2"
	"golang.org/x/net/http2/hpack"
)

// RFC 9218 priorities, taken as x/net's server takes them with its
// default write scheduler: from a request's priority header field and
// from PRIORITY_UPDATE frames (RFC 7540's PRIORITY frames are ignored, as
// SETTINGS_NO_RFC7540_PRIORITIES tells clients). They order the line of
// handlers waiting for the connection (queue.go): the most urgent first;
// within one urgency, non-incremental streams one at a time in the order
// they were opened, and incremental ones in turns, the two kinds taking
// turns with each other.

// priority is a stream's RFC 9218 priority.
type priority struct {
	urgency     uint8 // 0 (most urgent) to 7
	incremental bool
}

// defaultPriority is the priority of a stream that names none: RFC 9218's
// default (urgency 3, not incremental) once the client has shown it knows
// RFC 9218, else incremental, so that streams share the connection in
// turns as they did before RFC 9218 (x/net's choice).
func defaultPriority(aware bool) priority {
	return priority{urgency: 3, incremental: !aware}
}

// intermediaryFields are the request fields that show a proxy between
// the client and the server: its requests may be several users', so
// x/net stops trusting their priorities.
var intermediaryFields = []string{"via", "forwarded", "x-forwarded-for"}

// requestPriorityLocked is the priority of a new stream whose request
// has fields, as x/net decides it: the last priority field counts, and
// shows the client knows RFC 9218 from then on; once a request came
// through an intermediary, every later stream gets the default
// (incremental).
func (c *conn) requestPriorityLocked(id uint32, fields []hpack.HeaderField) priority {
	p := defaultPriority(c.priorityAware && !c.viaIntermediary)
	if !c.viaIntermediary {
		var value string
		aware, intermediary := c.priorityAware, false
		for _, f := range fields {
			if f.Name == "priority" {
				value, aware = f.Value, true
			}
			if slices.Contains(intermediaryFields, f.Name) {
				intermediary = true
			}
		}
		p, _ = parsePriority(value, aware && !intermediary)
		c.priorityAware = aware
		c.viaIntermediary = intermediary
	}
	if c.earlyPriority.id == id {
		// a PRIORITY_UPDATE that came before the stream's HEADERS
		p = c.earlyPriority.p
		c.earlyPriority.id = 0
	}
	return p
}

// processPriorityUpdate applies a PRIORITY_UPDATE frame: to its stream if
// open, else it is kept for the stream's HEADERS (the most recent one
// only, as x/net keeps it). A value that is not a dictionary is a stream
// error.
func (c *conn) processPriorityUpdate(f *http2.PriorityUpdateFrame) error {
	c.mu.Lock()
	defer c.mu.Unlock()
	c.priorityAware = true
	p, ok := parsePriority(f.Priority, true)
	if !ok {
		return http2.StreamError{StreamID: f.PrioritizedStreamID, Code: http2.ErrCodeProtocol}
	}
	st := c.streams[f.PrioritizedStreamID]
	if st == nil {
		c.earlyPriority.id, c.earlyPriority.p = f.PrioritizedStreamID, p
		return nil
	}
	st.prio = p
	if st.queued {
		// a new first is woken: the one before may have been woken for a
		// window that nobody else would then take
		c.pickFirstLocked()
		c.dispatchLocked()
	}
	return nil
}
