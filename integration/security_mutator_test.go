package integration

// Security suite, part 2 (see security_test.go): the requests, and the
// changes made to the files while they run.

import (
	"errors"
	"fmt"
	"io"
	"math/rand/v2"
	"net/http"
	"os"
	"path/filepath"
	"slices"
	"strings"
	"testing"
	"time"
)

// secFetch sends one GET and reads the whole response.
func secFetch(dc diffClient, site diffSite, target string, rangeReq bool) secResult {
	r := secResult{proto: dc.name, rangeReq: rangeReq, t0: time.Now()}
	var hdrs [][2]string
	if rangeReq {
		hdrs = append(hdrs, [2]string{"Range", fmt.Sprintf("bytes=%d-%d", secRangeFrom, secRangeTo)})
	}
	req, err := diffRequest(http.MethodGet, site, target, hdrs)
	if err != nil {
		r.doErr, r.t1 = err, time.Now()
		return r
	}
	resp, err := dc.c.Do(req)
	if err != nil {
		r.doErr, r.t1 = err, time.Now()
		return r
	}
	r.status, r.header, r.contentLen = resp.StatusCode, resp.Header, resp.ContentLength
	r.body, r.bodyErr = io.ReadAll(resp.Body)
	resp.Body.Close()
	if r.bodyErr != nil && dc.major == 2 {
		r.h2StreamErr = strings.Contains(r.bodyErr.Error(), "stream error")
		r.shortCleanH2 = errors.Is(r.bodyErr, io.ErrUnexpectedEOF)
	}
	r.t1 = time.Now()
	return r
}

// secMutator changes the files of a directory, one change at a time.
type secMutator struct {
	t      *testing.T
	dir    string
	files  []*secHistory
	rng    *rand.Rand
	counts map[string]int
}

// content makes the content of a new version of h: a unique first line,
// then bytes that differ from one version to the next.
func (m *secMutator) content(h *secHistory, size int) []byte {
	h.generated++
	b := make([]byte, size)
	seed := m.rng.Uint64()
	for i := range b {
		b[i] = 'a' + byte((seed>>(i%37)+uint64(i)*0x9e3779b97f4a7c15>>59)%26)
	}
	copy(b, fmt.Sprintf("%s version %d size %d\n", h.name, h.generated, size))
	return b
}

// secPageStates are the states a file goes through while one write grows
// it from oldLen to the bytes of c: its size grows a page at a time.
func secPageStates(c []byte, oldLen int) [][]byte {
	var states [][]byte
	for n := (oldLen/4096 + 1) * 4096; n < len(c); n += 4096 {
		states = append(states, c[:n])
	}
	return append(states, c)
}

func (m *secMutator) fail(h *secHistory, err error) {
	if err != nil {
		m.t.Errorf("changing %s: %v", h.name, err)
	}
}

// step makes one change to a random file and records it.
func (m *secMutator) step() {
	h := m.files[m.rng.IntN(len(m.files))]
	// changes of one file are more than a timestamp tick apart, so that
	// each version has a modification time of its own
	if wait := 12*time.Millisecond - time.Since(h.lastChange); wait > 0 {
		time.Sleep(wait)
	}
	defer func() { h.lastChange = time.Now() }()
	name := filepath.Join(m.dir, h.name)
	size := func() int { return h.min + m.rng.IntN(h.max-h.min) }
	var err error
	switch {
	case !h.present:
		c := m.content(h, size())
		m.fail(h, os.WriteFile(name+".tmp", c, 0o644))
		_, err = h.change(false, func() error {
			err := os.Rename(name+".tmp", name)
			secToggle(&h.absent, false, time.Now())
			return err
		}, c)
		h.present = true
		m.counts["create_again"]++
		m.fail(h, err)
		return
	case !h.readable:
		_, err = h.change(false, func() error {
			err := os.Chmod(name, 0o644)
			secToggle(&h.noPerm, false, time.Now())
			return err
		})
		h.readable = true
		m.counts["chmod_back"]++
		m.fail(h, err)
		return
	}
	ops := []string{"truncate", "rename_over", "delete", "chmod_000"}
	if h.inPlace {
		ops = append(ops, "extend", "append", "rewrite_in_place", "rewrite_resize")
	}
	op := ops[m.rng.IntN(len(ops))]
	cur := h.current()
	if op == "truncate" && len(cur) <= h.min || op == "extend" && len(cur) >= h.max {
		op = "rename_over"
	}
	switch op {
	case "truncate": // shorter only
		n := h.min + m.rng.IntN(len(cur)-h.min)
		_, err = h.change(h.inPlace, func() error { return os.Truncate(name, int64(n)) }, cur[:n:n])
	case "extend": // with zeros
		n := len(cur) + 1 + m.rng.IntN(h.max-len(cur))
		_, err = h.change(true, func() error { return os.Truncate(name, int64(n)) },
			append(slices.Clone(cur), make([]byte, n-len(cur))...))
	case "append":
		extra := m.content(h, 1+m.rng.IntN(3*4096))
		_, err = h.change(true, func() error {
			f, err := os.OpenFile(name, os.O_WRONLY|os.O_APPEND, 0)
			if err != nil {
				return err
			}
			defer f.Close()
			_, err = f.Write(extra)
			return err
		}, secPageStates(append(slices.Clone(cur), extra...), len(cur))...)
	case "rewrite_in_place": // same size, one pwrite
		c := m.content(h, len(cur))
		_, err = h.change(true, func() error {
			f, err := os.OpenFile(name, os.O_WRONLY, 0)
			if err != nil {
				return err
			}
			defer f.Close()
			_, err = f.WriteAt(c, 0)
			return err
		}, c)
	case "rewrite_resize": // os.WriteFile: truncated to nothing, then written
		c := m.content(h, size())
		_, err = h.change(true, func() error { return os.WriteFile(name, c, 0o644) },
			append([][]byte{{}}, secPageStates(c, 0)...)...)
	case "rename_over":
		c := m.content(h, size())
		m.fail(h, os.WriteFile(name+".tmp", c, 0o644))
		_, err = h.change(false, func() error { return os.Rename(name+".tmp", name) }, c)
	case "delete":
		_, err = h.change(false, func() error {
			secToggle(&h.absent, true, time.Now())
			err := os.Remove(name)
			h.versions[len(h.versions)-1].until = time.Now()
			return err
		})
		h.present = false
	case "chmod_000":
		_, err = h.change(false, func() error {
			secToggle(&h.noPerm, true, time.Now())
			return os.Chmod(name, 0)
		})
		h.readable = false
	}
	m.fail(h, err)
	m.counts[op]++
}
