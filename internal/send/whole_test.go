package send

import (
	"bytes"
	"maps"
	"net/http"
	"net/http/httptest"
	"slices"
	"testing"
	"time"

	"github.com/h2file/caddy-h2file/internal/harness"
)

// TestServeFastMatchesServeContent answers the same requests with
// Whole and with http.ServeContent, and wants the same status,
// headers and body wherever Whole answers; where it declines, it must
// have written nothing. (diff_test.go does the same through Caddy against
// file_server.)
func TestServeFastMatchesServeContent(t *testing.T) {
	content := harness.RandomBytes(t, 40_000)
	mod := time.Date(2026, 11, 30, 12, 0, 0, 0, time.UTC)
	type setup struct {
		desc     string
		size     int
		modtime  time.Time
		encoding string // Content-Encoding set before (a sidecar)
		ctype    []string
	}
	setups := []setup{
		{"plain", 40_000, mod, "", []string{"application/octet-stream"}},
		{"unknown type", 40_000, mod, "", nil},
		{"empty file", 0, mod, "", []string{"text/plain"}},
		{"sidecar", 40_000, mod, "gzip", []string{"text/html"}},
		{"epoch", 10, time.Unix(0, 0), "", []string{"text/plain"}},
		{"no modtime", 10, time.Time{}, "", []string{"text/plain"}},
	}
	requests := []struct {
		method  string
		headers map[string]string
		fast    bool
	}{
		{http.MethodGet, nil, true},
		{http.MethodHead, nil, true},
		{http.MethodGet, map[string]string{"If-Range": `"x"`, "Accept": "*/*"}, true},
		{http.MethodGet, map[string]string{"Range": "bytes=0-9"}, false},
		{http.MethodGet, map[string]string{"If-Match": `"x"`}, false},
		{http.MethodGet, map[string]string{"If-None-Match": `"x"`}, false},
		{http.MethodGet, map[string]string{"If-Modified-Since": mod.Format(http.TimeFormat)}, false},
		{http.MethodGet, map[string]string{"If-Unmodified-Since": mod.Format(http.TimeFormat)}, false},
		{http.MethodPost, nil, false},
	}
	for _, s := range setups {
		for _, rq := range requests {
			newReq := func() *http.Request {
				r := httptest.NewRequest(rq.method, "https://example.com/f", nil)
				for k, v := range rq.headers {
					r.Header.Set(k, v)
				}
				return r
			}
			prepare := func(rec *httptest.ResponseRecorder) {
				if s.ctype != nil {
					rec.Header()["Content-Type"] = s.ctype
				} else {
					rec.Header()["Content-Type"] = nil
				}
				if s.encoding != "" {
					rec.Header().Set("Content-Encoding", s.encoding)
				}
			}
			body := func() *Body {
				b := NewBody(content[:s.size], nil, int64(s.size))
				return &b
			}

			// the entry's precomputed values: none, this file's, and
			// another file's (which Whole must not use)
			knowns := map[string]KnownHeaders{
				"none":  {},
				"entry": KnownHeadersFor(fakeFileInfo{size: int64(s.size), modtime: s.modtime}),
				"stale": KnownHeadersFor(fakeFileInfo{size: int64(s.size) + 1, modtime: s.modtime.Add(time.Second)}),
			}
			for kind, known := range knowns {
				fastRec := httptest.NewRecorder()
				prepare(fastRec)
				before := maps.Clone(fastRec.Header())
				served := Whole(NewWriter(fastRec, newReq(), DefaultChunkSize), newReq(), s.modtime, body(), known, new(HeaderValues))
				if served != rq.fast {
					t.Errorf("%s, %s %v: Whole = %v, want %v", s.desc, rq.method, rq.headers, served, rq.fast)
				}
				if !served {
					if fastRec.Body.Len() != 0 || !maps.EqualFunc(before, fastRec.Header(), slices.Equal) {
						t.Errorf("%s, %s %v: declined but wrote something", s.desc, rq.method, rq.headers)
					}
					continue
				}
				slowRec := httptest.NewRecorder()
				prepare(slowRec)
				b := body()
				http.ServeContent(NewWriter(slowRec, newReq(), DefaultChunkSize), newReq(), "f", s.modtime, b)
				if fastRec.Code != slowRec.Code {
					t.Errorf("%s, %s %v, %s values: status %d, ServeContent %d", s.desc, rq.method, rq.headers, kind, fastRec.Code, slowRec.Code)
				}
				if !maps.EqualFunc(fastRec.Header(), slowRec.Header(), slices.Equal) {
					t.Errorf("%s, %s %v, %s values: headers\n%v\nServeContent\n%v", s.desc, rq.method, rq.headers, kind, fastRec.Header(), slowRec.Header())
				}
				if !bytes.Equal(fastRec.Body.Bytes(), slowRec.Body.Bytes()) {
					t.Errorf("%s, %s %v: body of %d bytes, ServeContent %d", s.desc, rq.method, rq.headers, fastRec.Body.Len(), slowRec.Body.Len())
				}
			}
		}
	}
}
