package h2

import (
	"strings"
	"testing"

	"golang.org/x/net/http2/hpack"
)

func TestParsePriority(t *testing.T) {
	for _, c := range []struct {
		in    string
		aware bool
		want  priority
		ok    bool
	}{
		{"", false, priority{3, true}, true},
		{"", true, priority{3, false}, true},
		{"u=0", true, priority{0, false}, true},
		{"u=7, i", true, priority{7, true}, true},
		{"i, u=5", false, priority{5, true}, true},
		{"u=1, i=?0", false, priority{1, false}, true},
		{"u=8", true, priority{3, false}, true},               // out of range: ignored
		{"u=-1", true, priority{3, false}, true},              // out of range: ignored
		{"u=1.5", true, priority{3, false}, true},             // a decimal: ignored
		{`u="1"`, true, priority{3, false}, true},             // a string: ignored
		{"i=1", false, priority{3, true}, true},               // not a boolean: ignored
		{"u=(1 2)", true, priority{3, false}, true},           // an inner list: ignored
		{"u=2, x=y;a=1, u=4", true, priority{4, false}, true}, // the last u counts
		{"u=1,", true, priority{3, false}, false},             // a trailing comma
		{"u=(", true, priority{3, false}, false},
		{"U=1", true, priority{3, false}, false}, // keys are lower case
	} {
		got, ok := parsePriority(c.in, c.aware)
		if got != c.want || ok != c.ok {
			t.Errorf("parsePriority(%q, %v) = %+v, %v; want %+v, %v", c.in, c.aware, got, ok, c.want, c.ok)
		}
	}
}

// TestRequestPriority follows one connection's requests: the priority
// field makes the client known to be aware of RFC 9218 (the default
// becomes non-incremental), a request through a proxy makes every later
// one default, and a PRIORITY_UPDATE that came first is applied.
func TestRequestPriority(t *testing.T) {
	c := &conn{}
	fields := func(kv ...string) []hpack.HeaderField {
		var f []hpack.HeaderField
		for i := 0; i < len(kv); i += 2 {
			f = append(f, hpack.HeaderField{Name: kv[i], Value: kv[i+1]})
		}
		return f
	}
	steps := []struct {
		id     uint32
		fields []hpack.HeaderField
		early  string // a PRIORITY_UPDATE for id before its HEADERS
		want   priority
	}{
		{1, fields("accept", "*/*"), "", priority{3, true}},
		{3, fields("priority", "u=1"), "", priority{1, false}},
		{5, nil, "", priority{3, false}},
		{7, fields("priority", "u=6, i"), "", priority{6, true}},
		{9, nil, "u=0", priority{0, false}},
		{11, fields("x-forwarded-for", "192.0.2.1", "priority", "u=0"), "", priority{0, true}},
		{13, fields("priority", "u=0"), "", priority{3, true}},
		{15, nil, "u=2", priority{2, false}},
	}
	for _, s := range steps {
		if s.early != "" {
			p, _ := parsePriority(s.early, true)
			c.earlyPriority.id, c.earlyPriority.p = s.id, p
		}
		if got := c.requestPriorityLocked(s.id, s.fields); got != s.want {
			t.Errorf("stream %d %v: priority %+v, want %+v", s.id, s.fields, got, s.want)
		}
	}
}

// TestQueueOrder takes turns in a line of waiting streams and checks who
// goes first each time: urgency first; at one urgency, the
// non-incremental stream opened first until it leaves, in turns with the
// incremental ones, which go round.
func TestQueueOrder(t *testing.T) {
	c := &conn{}
	streams := map[string]*stream{}
	add := func(name string, id uint32, u uint8, inc bool) {
		st := &stream{c: c, id: id, prio: priority{u, inc}}
		st.cond.L = &c.mu
		streams[name] = st
		c.queueLocked(st)
	}
	// each turn: the first takes it and goes back in line, unless done
	turns := func(n int, done ...string) string {
		var order []string
		for range n {
			st := c.first
			name := ""
			for k, v := range streams {
				if v == st {
					name = k
				}
			}
			order = append(order, name)
			c.leaveQueueLocked(st)
			if !strings.Contains(strings.Join(done, " "), name) {
				c.queueLocked(st)
			}
		}
		return strings.Join(order, " ")
	}
	add("a", 1, 3, true)
	add("b", 3, 3, true)
	add("s5", 5, 3, false)
	add("s7", 7, 3, false)
	add("low", 9, 6, true)
	if got, want := turns(6), "s5 a s5 b s5 a"; got != want {
		t.Errorf("turns %q, want %q", got, want)
	}
	// s5 done: s7, the next non-incremental, takes its place
	c.leaveQueueLocked(streams["s5"])
	delete(streams, "s5")
	if got := turns(4); strings.Count(got, "s7") != 2 || strings.Contains(got, "low") {
		t.Errorf("after s5: turns %q, want s7 every other turn and low never", got)
	}
	// a more urgent stream goes first at once
	add("urgent", 11, 0, true)
	if got := turns(3); got != "urgent urgent urgent" {
		t.Errorf("with an urgent stream: turns %q", got)
	}
	// only the least urgent left
	for _, name := range []string{"urgent", "a", "b", "s7"} {
		c.leaveQueueLocked(streams[name])
		delete(streams, name)
	}
	if got := turns(2); got != "low low" {
		t.Errorf("alone: turns %q", got)
	}
	if len(c.waitq) != 1 {
		t.Errorf("%d in line, want low alone", len(c.waitq))
	}
}

// TestRequestPriorityAllocatesNothing: a request without a priority
// field (nearly every one) costs no parsing and no allocation.
func TestRequestPriorityAllocatesNothing(t *testing.T) {
	c := &conn{}
	fields := []hpack.HeaderField{{Name: ":method", Value: "GET"}, {Name: "accept", Value: "*/*"}}
	if allocs := testing.AllocsPerRun(100, func() { c.requestPriorityLocked(1, fields) }); allocs != 0 {
		t.Errorf("%v allocations per request", allocs)
	}
}
