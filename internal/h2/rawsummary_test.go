package h2

import (
	"crypto/sha256"
	"fmt"
	"hash"
	"slices"
	"strings"

	"golang.org/x/net/http2"
)

// rawSummary is what a server did on one connection, in the terms the
// two servers are compared in.
type rawSummary struct {
	settings   string              // the server's first SETTINGS, sorted by ID
	conn       []string            // connection events in order: SETTINGS ACK, PING ACK, GOAWAY, closed, the script's marks
	connWindow uint64              // WINDOW_UPDATE on stream 0, summed
	streams    map[uint32]*rawSide // by stream ID
	maxID      uint32              // the highest stream the client opened
}

// rawSide is what the server sent on one stream.
type rawSide struct {
	items  []string // HEADERS, TRAILERS, DATA (consecutive frames summed), END_STREAM, RST_STREAM, in order
	window uint64   // WINDOW_UPDATE, summed
	n      int      // DATA bytes
	head   []byte   // the first 200 bytes of DATA
	sha    hash.Hash
	info   bool // a 1xx HEADERS came
	final  bool // a final HEADERS came
	ended  bool // END_STREAM or RST_STREAM came
}

func newRawSummary() *rawSummary { return &rawSummary{streams: make(map[uint32]*rawSide)} }

func (s *rawSummary) stream(id uint32) *rawSide {
	st := s.streams[id]
	if st == nil {
		st = &rawSide{sha: sha256.New()}
		s.streams[id] = st
	}
	return st
}

// add sums up frame f.
func (s *rawSummary) add(f http2.Frame) {
	switch f := f.(type) {
	case *http2.SettingsFrame:
		if f.IsAck() {
			s.conn = append(s.conn, "SETTINGS ACK")
			return
		}
		var list []http2.Setting
		f.ForeachSetting(func(st http2.Setting) error { list = append(list, st); return nil })
		slices.SortFunc(list, func(a, b http2.Setting) int { return int(a.ID) - int(b.ID) })
		text := fmt.Sprint(list)
		if s.settings == "" {
			s.settings = text
		} else {
			s.conn = append(s.conn, "SETTINGS "+text)
		}
	case *http2.PingFrame:
		if f.IsAck() {
			s.conn = append(s.conn, fmt.Sprintf("PING ACK %q", f.Data[:]))
		} else {
			s.conn = append(s.conn, fmt.Sprintf("PING %q", f.Data[:]))
		}
	case *http2.GoAwayFrame:
		// the last stream ID is kept raw here and normalised by lines
		s.conn = append(s.conn, fmt.Sprintf("GOAWAY %v last=%d", f.ErrCode, f.LastStreamID))
	case *http2.WindowUpdateFrame:
		if f.StreamID == 0 {
			s.connWindow += uint64(f.Increment)
		} else {
			s.stream(f.StreamID).window += uint64(f.Increment)
		}
	case *http2.RSTStreamFrame:
		st := s.stream(f.StreamID)
		st.items = append(st.items, "RST_STREAM "+f.ErrCode.String())
		st.ended = true
	case *http2.MetaHeadersFrame:
		st := s.stream(f.StreamID)
		status := f.PseudoValue("status")
		var fields []string
		for _, hf := range f.RegularFields() {
			if hf.Name != "date" {
				fields = append(fields, hf.Name+": "+hf.Value)
			}
		}
		slices.Sort(fields)
		switch {
		case status == "":
			st.items = append(st.items, fmt.Sprintf("TRAILERS {%s}", strings.Join(fields, ", ")))
		case strings.HasPrefix(status, "1"):
			st.items = append(st.items, fmt.Sprintf("HEADERS %s {%s}", status, strings.Join(fields, ", ")))
			st.info = true
		default:
			st.items = append(st.items, fmt.Sprintf("HEADERS %s {%s}", status, strings.Join(fields, ", ")))
			st.final = true
		}
		if f.StreamEnded() {
			st.items = append(st.items, "END_STREAM")
			st.ended = true
		}
	case *http2.DataFrame:
		st := s.stream(f.StreamID)
		p := f.Data()
		if len(p) > 0 {
			// how DATA is cut into frames differs legitimately: consecutive
			// frames are summed
			if k := len(st.items) - 1; k >= 0 && strings.HasPrefix(st.items[k], "DATA ") {
				var n int
				fmt.Sscan(strings.TrimPrefix(st.items[k], "DATA "), &n)
				st.items[k] = fmt.Sprintf("DATA %d", n+len(p))
			} else {
				st.items = append(st.items, fmt.Sprintf("DATA %d", len(p)))
			}
			st.n += len(p)
			st.sha.Write(p)
			if len(st.head) < 200 {
				st.head = append(st.head, p[:min(len(p), 200-len(st.head))]...)
			}
		}
		if f.StreamEnded() {
			st.items = append(st.items, "END_STREAM")
			st.ended = true
		}
	case *http2.PushPromiseFrame:
		s.conn = append(s.conn, fmt.Sprintf("PUSH_PROMISE on stream %d", f.StreamID))
	default:
		s.conn = append(s.conn, fmt.Sprintf("%v on stream %d", f.Header().Type, f.Header().StreamID))
	}
}

// lines renders s for comparison. The last stream ID of a GOAWAY is
// shown as at most the highest stream the client opened: what a larger
// value says (a stream of the client's beyond those it opened, or even a
// server stream) concerns no stream that exists, and the servers differ
// there legitimately (x/net raises its last stream ID to the stream of
// any frame that made a connection error, even a stream the client never
// opened, or an even one; the engine only to odd ones).
func (s *rawSummary) lines() []string {
	out := []string{"SETTINGS " + s.settings}
	for _, e := range s.conn {
		if rest, ok := strings.CutPrefix(e, "GOAWAY "); ok {
			code, last, _ := strings.Cut(rest, " last=")
			var n uint32
			fmt.Sscan(last, &n)
			e = fmt.Sprintf("GOAWAY %s last=%d", code, min(n, s.maxID))
		}
		out = append(out, e)
	}
	out = append(out, fmt.Sprintf("connection WINDOW_UPDATE total %d", s.connWindow))
	ids := make([]uint32, 0, len(s.streams))
	for id := range s.streams {
		ids = append(ids, id)
	}
	slices.Sort(ids)
	// streams are listed by ID (frames of different streams interleave
	// as they may); runs of streams with the same story share a line
	var prev string
	var first, last uint32
	var count int
	emit := func() {
		if count == 0 {
			return
		}
		if count == 1 {
			out = append(out, fmt.Sprintf("stream %d: %s", first, prev))
		} else {
			out = append(out, fmt.Sprintf("streams %d..%d (%d): %s", first, last, count, prev))
		}
	}
	for _, id := range ids {
		text := s.streams[id].text()
		if count > 0 && text == prev {
			last = id
			count++
			continue
		}
		emit()
		prev, first, last, count = text, id, id, 1
	}
	emit()
	return out
}

func (st *rawSide) text() string {
	items := slices.Clone(st.items)
	if st.n > 0 {
		if st.n <= 200 {
			items = append(items, fmt.Sprintf("body %q", st.head))
		} else {
			items = append(items, fmt.Sprintf("body %d bytes sha256 %.16x", st.n, st.sha.Sum(nil)))
		}
	}
	if st.window > 0 {
		items = append(items, fmt.Sprintf("WINDOW_UPDATE total %d", st.window))
	}
	return strings.Join(items, " | ")
}

// lineDiff returns a line diff of a and b (LCS): "  " for common lines,
// "- " for lines only in a, "+ " for lines only in b.
func lineDiff(a, b []string) string {
	n, m := len(a), len(b)
	lcs := make([][]int, n+1)
	for i := range lcs {
		lcs[i] = make([]int, m+1)
	}
	for i := n - 1; i >= 0; i-- {
		for j := m - 1; j >= 0; j-- {
			if a[i] == b[j] {
				lcs[i][j] = lcs[i+1][j+1] + 1
			} else {
				lcs[i][j] = max(lcs[i+1][j], lcs[i][j+1])
			}
		}
	}
	var sb strings.Builder
	i, j := 0, 0
	for i < n || j < m {
		switch {
		case i < n && j < m && a[i] == b[j]:
			fmt.Fprintf(&sb, "    %s\n", a[i])
			i++
			j++
		case j < m && (i == n || lcs[i][j+1] >= lcs[i+1][j]):
			fmt.Fprintf(&sb, "  + %s\n", b[j])
			j++
		default:
			fmt.Fprintf(&sb, "  - %s\n", a[i])
			i++
		}
	}
	return sb.String()
}
