package integration

// Security suite, part 2 (see security_test.go): the history of a file
// that changes, and the rule a response is checked by (secHistory.check).

import (
	"bytes"
	"errors"
	"fmt"
	"net/http"
	"os"
	"regexp"
	"slices"
	"strconv"
	"strings"
	"sync"
	"testing"
	"time"
)

// secVersion is one content a file had.
type secVersion struct {
	content []byte
	from    time.Time // when it came to be (the start of the change)
	until   time.Time // when the next change ended; zero while current
}

// secSpan is an interval of time; a zero until means still open.
type secSpan struct{ from, until time.Time }

func (s secSpan) overlaps(from, until time.Time) bool {
	return !s.from.After(until) && (s.until.IsZero() || !s.until.Before(from))
}

// secHistory is everything one file was: every version, and when it was
// absent, unreadable or being changed in place.
//
// A file is changed either only atomically (inPlace false: renamed over,
// deleted and created again by rename, chmod, truncated shorter, so that
// an inode's bytes never change and a reader sees its version or comes
// short), or also in place (truncated, extended, appended to, rewritten
// with the same or another size), which can tear a response that reads
// it meanwhile (the README's documented limitation).
type secHistory struct {
	name     string
	inPlace  bool
	min, max int

	mu       sync.Mutex
	versions []*secVersion
	absent   []secSpan
	noPerm   []secSpan
	changes  []secSpan // changes in place

	// the mutator's own state
	present, readable bool
	generated         int
	lastChange        time.Time
}

// current returns the content now on disk.
func (h *secHistory) current() []byte {
	h.mu.Lock()
	defer h.mu.Unlock()
	return h.versions[len(h.versions)-1].content
}

// change makes a change to the file, with do, and records it: the states
// it went through (the last one stays current), and whether it changed the
// bytes of the inode in place. Checks wait: a response that shows the
// change is never checked against a history without it.
func (h *secHistory) change(inPlace bool, do func() error, states ...[]byte) (time.Time, error) {
	h.mu.Lock()
	defer h.mu.Unlock()
	start := time.Now()
	err := do()
	h.recordLocked(start, time.Now(), inPlace, states...)
	return start, err
}

// recordAt records a change that ran from start to end.
func (h *secHistory) recordAt(start, end time.Time, inPlace bool, states ...[]byte) {
	h.mu.Lock()
	defer h.mu.Unlock()
	h.recordLocked(start, end, inPlace, states...)
}

func (h *secHistory) recordLocked(start, end time.Time, inPlace bool, states ...[]byte) {
	if len(states) > 0 {
		// the change took effect at some time between start and end
		// (a loaded machine can hold the mutator between them for
		// hundreds of milliseconds): until then the file was as before
		if n := len(h.versions); n > 0 && h.versions[n-1].until.IsZero() {
			h.versions[n-1].until = end
		}
		for i, c := range states {
			v := &secVersion{content: c, from: start}
			if i < len(states)-1 {
				v.until = end // a state of the file during the change
			}
			h.versions = append(h.versions, v)
		}
	}
	if inPlace {
		h.changes = append(h.changes, secSpan{start, end})
	}
}

// secToggle opens (on) or closes an interval of spans; the caller holds
// the history's lock.
func secToggle(spans *[]secSpan, on bool, at time.Time) {
	if on {
		*spans = append(*spans, secSpan{from: at})
		return
	}
	if n := len(*spans); n > 0 && (*spans)[n-1].until.IsZero() {
		(*spans)[n-1].until = at
	}
}

// secResult is what the client got for one request.
type secResult struct {
	t0, t1       time.Time
	proto        string // "h2", "h1", "h1c"
	rangeReq     bool
	status       int
	header       http.Header
	contentLen   int64
	body         []byte
	doErr        error // before the response headers
	bodyErr      error // while reading the body
	h2StreamErr  bool  // the error is an HTTP/2 stream reset
	shortCleanH2 bool  // HTTP/2 body ended cleanly before Content-Length
}

// secOutcome classifies a checked result.
type secOutcome int

const (
	secOK        secOutcome = iota // complete body of one version
	secTorn                        // bytes of several versions, while a change in place ran (documented)
	secAborted                     // the client saw an error, and the bytes before it are consistent
	secNotFound                    // 404 while the file was absent
	secForbidden                   // 403 while the file had mode 000 (not as root)
	secMismatch                    // wrong bytes, wrong headers, or a wrong status
)

// secRangeFrom and secRangeTo are the range asked by range requests; every
// version is longer.
const secRangeFrom, secRangeTo = 10, 1009

// secEtagRE is file_server's ETag: "<mtime ns base 36>-<size base 36>".
var secEtagRE = regexp.MustCompile(`^"([0-9a-z]+)-([0-9a-z]+)"$`)

// check classifies r. window is how far back a response may reach: the
// cache re-checks a path every revalidate interval, plus a margin for
// scheduling. The rule: a 200 (206 for the range requests) has an ETag
// whose size is the file's, a Content-Length that agrees, and a body that
// is exactly a version of that size (or the asked range of it) that was
// current at some time in [t0-window, t1]. A torn body is accepted only for
// a file changed in place, while a change overlapped that window, and only
// if each byte is the byte at its offset of one of the window's versions.
// A 404 needs the file absent in the window, a 403 mode 000 (never as
// root). An error the client sees is fine if the bytes before it are
// consistent by the same rule; an HTTP/2 body that ends cleanly but short
// is not, nor is a timeout.
func (h *secHistory) check(r secResult, window time.Duration) (secOutcome, string) {
	h.mu.Lock()
	defer h.mu.Unlock()
	from, until := r.t0.Add(-window), r.t1
	var live []*secVersion
	for _, v := range h.versions {
		if (secSpan{v.from, v.until}).overlaps(from, until) {
			live = append(live, v)
		}
	}
	changing := false
	for _, s := range h.changes {
		if s.overlaps(from, until) {
			changing = true
			break
		}
	}
	// sendfile (h1c) hands the client the page cache's pages, and a cut
	// before the client reads them zeroes the cut page's tail under them
	// (README, Limitations): there a zero byte past the shortest version
	// of the window may stand for any
	cut := int64(-1)
	if r.proto == "h1c" {
		for _, v := range live {
			if cut < 0 || int64(len(v.content)) < cut {
				cut = int64(len(v.content))
			}
		}
	}
	zeroed := func(at int64, x byte) bool { return cut >= 0 && at >= cut && x == 0 }
	// consistent reports whether b, at offset off of a version of size
	// total, is that version's bytes (secOK) or acceptably torn (secTorn)
	consistent := func(b []byte, off, total int64) (secOutcome, bool) {
		for _, v := range live {
			if int64(len(v.content)) == total && off+int64(len(b)) <= total && bytes.Equal(v.content[off:off+int64(len(b))], b) {
				return secOK, true
			}
		}
		for _, v := range live { // one version, zeroed past a cut
			if int64(len(v.content)) != total || off+int64(len(b)) > total {
				continue
			}
			i := 0
			for i < len(b) && (v.content[off+int64(i)] == b[i] || zeroed(off+int64(i), b[i])) {
				i++
			}
			if i == len(b) {
				return secTorn, true
			}
		}
		if !changing {
			return 0, false
		}
		for i, x := range b {
			ok := zeroed(off+int64(i), x)
			for _, v := range live {
				if at := off + int64(i); at < int64(len(v.content)) && v.content[at] == x {
					ok = true
					break
				}
			}
			if !ok {
				return 0, false
			}
		}
		return secTorn, true
	}

	if r.doErr != nil {
		if secIsTimeout(r.doErr) {
			return secMismatch, fmt.Sprintf("request failed: %v", r.doErr)
		}
		return secAborted, ""
	}
	switch {
	case r.status == http.StatusNotFound:
		for _, s := range h.absent {
			if s.overlaps(from, until) {
				return secNotFound, ""
			}
		}
		return secMismatch, "404 while the file was present"
	case r.status == http.StatusForbidden:
		for _, s := range h.noPerm {
			if s.overlaps(from, until) && os.Geteuid() != 0 {
				return secForbidden, ""
			}
		}
		return secMismatch, "403 while the file was readable"
	case r.status == http.StatusOK && !r.rangeReq, r.status == http.StatusPartialContent && r.rangeReq:
	case r.status == http.StatusOK && r.rangeReq && r.header.Get("Content-Length") == "0":
		// net/http ignores the Range of an empty file (rewrite_resize
		// empties the file for a moment)
		r.rangeReq = false
	default:
		return secMismatch, fmt.Sprintf("status %d", r.status)
	}

	etag := r.header.Get("Etag")
	m := secEtagRE.FindStringSubmatch(etag)
	if m == nil {
		return secMismatch, fmt.Sprintf("ETag %q is not file_server's", etag)
	}
	etagSize, err := strconv.ParseInt(m[2], 36, 64)
	if err != nil {
		return secMismatch, fmt.Sprintf("ETag %q: %v", etag, err)
	}
	total, off, wantLen := etagSize, int64(0), etagSize
	if r.rangeReq {
		cr := r.header.Get("Content-Range")
		var a, b, tot int64
		if _, err := fmt.Sscanf(cr, "bytes %d-%d/%d", &a, &b, &tot); err != nil || a != secRangeFrom || b != secRangeTo {
			return secMismatch, fmt.Sprintf("Content-Range %q for bytes=%d-%d", cr, secRangeFrom, secRangeTo)
		}
		if tot != etagSize {
			return secMismatch, fmt.Sprintf("Content-Range %q and ETag %q give different sizes", cr, etag)
		}
		off, wantLen = a, b-a+1
	}
	if r.contentLen != wantLen {
		return secMismatch, fmt.Sprintf("Content-Length %d, but the ETag %q says the file has %d bytes", r.contentLen, etag, etagSize)
	}
	if r.bodyErr != nil {
		switch {
		case r.shortCleanH2:
			return secMismatch, fmt.Sprintf("HTTP/2 body ended cleanly after %d of %d bytes", len(r.body), r.contentLen)
		case secIsTimeout(r.bodyErr):
			return secMismatch, fmt.Sprintf("body read failed: %v", r.bodyErr)
		case r.proto == "h2" && !r.h2StreamErr:
			return secMismatch, fmt.Sprintf("HTTP/2 body failed without a stream reset: %v", r.bodyErr)
		}
		if _, ok := consistent(r.body, off, total); !ok {
			return secMismatch, fmt.Sprintf("the %d bytes before the error (%v) are of no version: %s", len(r.body), r.bodyErr, h.explainLocked(r.body, off, live))
		}
		return secAborted, ""
	}
	if int64(len(r.body)) != wantLen {
		return secMismatch, fmt.Sprintf("body of %d bytes, Content-Length %d", len(r.body), r.contentLen)
	}
	outcome, ok := consistent(r.body, off, total)
	if !ok {
		return secMismatch, fmt.Sprintf("body is no version current in [t0-%v, t1] (changes in place then: %v): %s", window, changing, h.explainLocked(r.body, off, live))
	}
	return outcome, ""
}

// explainLocked describes, 4 KiB block by block, which versions (index in
// the history, * if not in the window) hold the bytes of b at offset off;
// a run of blocks held by the same versions is shown once, as [first-last].
func (h *secHistory) explainLocked(b []byte, off int64, live []*secVersion) string {
	var blocks []string // per block, the versions that hold it
	for start := 0; start < len(b); start += 4096 {
		end := min(start+4096, len(b))
		var who []string
		for i, v := range h.versions {
			at := off + int64(start)
			if at+int64(end-start) <= int64(len(v.content)) && bytes.Equal(v.content[at:at+int64(end-start)], b[start:end]) {
				mark := "*"
				if slices.Contains(live, v) {
					mark = ""
				}
				who = append(who, fmt.Sprintf("v%d%s", i, mark))
			}
		}
		if len(who) == 0 {
			who = []string{"none"}
		}
		blocks = append(blocks, strings.Join(who, ","))
	}
	var parts []string
	for first := 0; first < len(blocks); {
		last := first
		for last+1 < len(blocks) && blocks[last+1] == blocks[first] {
			last++
		}
		span := strconv.Itoa(first)
		if last > first {
			span += "-" + strconv.Itoa(last)
		}
		parts = append(parts, fmt.Sprintf("[%s]%s", span, blocks[first]))
		first = last + 1
	}
	if len(parts) > 40 {
		parts = append(parts[:40], "...")
	}
	var lives []string
	for i, v := range h.versions {
		if slices.Contains(live, v) {
			lives = append(lives, fmt.Sprintf("v%d %d bytes", i, len(v.content)))
		}
	}
	head := b[:min(len(b), 60)]
	return fmt.Sprintf("%d versions, in the window %s; body starts %q; blocks %s", len(h.versions), strings.Join(lives, ", "), head, strings.Join(parts, " "))
}

func secIsTimeout(err error) bool {
	var te interface{ Timeout() bool }
	return errors.As(err, &te) && te.Timeout()
}

// TestSecExplainMergesRuns: the mismatch report names each run of blocks
// held by the same versions once, shows a block no version holds, and
// lists the window's versions.
func TestSecExplainMergesRuns(t *testing.T) {
	a := bytes.Repeat([]byte("a"), 4*4096)
	b := slices.Clone(a)
	copy(b[3*4096:], bytes.Repeat([]byte("b"), 4096))
	h := &secHistory{versions: []*secVersion{{content: a}, {content: b}}}
	body := slices.Clone(a)
	body[2*4096] = 'x' // block 2: no version's
	got := h.explainLocked(body, 0, h.versions[1:])
	for _, want := range []string{"in the window v1 16384 bytes;", "blocks [0-1]v0*,v1 [2]none [3]v0*"} {
		if !strings.Contains(got, want) {
			t.Errorf("report %q lacks %q", got, want)
		}
	}
}
