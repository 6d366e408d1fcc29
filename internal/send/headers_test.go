package send

import (
	"io/fs"
	"net/http"
	"slices"
	"testing"
	"time"
)

// fakeFileInfo is a regular file's FileInfo with a given size and
// modification time.
type fakeFileInfo struct {
	size    int64
	modtime time.Time
}

func (fi fakeFileInfo) Name() string       { return "f" }
func (fi fakeFileInfo) Size() int64        { return fi.size }
func (fi fakeFileInfo) Mode() fs.FileMode  { return 0o644 }
func (fi fakeFileInfo) ModTime() time.Time { return fi.modtime }
func (fi fakeFileInfo) IsDir() bool        { return false }
func (fi fakeFileInfo) Sys() any           { return nil }

// TestHeaderValuesBehaveAsHeaderMethods checks that the shared-array
// setters give what Header.Set and Header.Add give, and that appending to
// one field's slice leaves the others alone.
func TestHeaderValuesBehaveAsHeaderMethods(t *testing.T) {
	for _, existing := range [][]string{nil, {"Origin"}} {
		got, want := http.Header{}, http.Header{}
		if existing != nil {
			got["Vary"] = slices.Clone(existing)
			want["Vary"] = slices.Clone(existing)
		}
		vals := new(HeaderValues)
		AddHeaderValue(got, "Vary", "Accept-Encoding", vals, VaryValue)
		want.Add("Vary", "Accept-Encoding")
		SetHeaderValue(got, "Etag", `"abc"`, vals, ETagValue)
		want.Set("Etag", `"abc"`)
		SetContentType(got, "text/plain", vals)
		want.Set("Content-Type", "text/plain")
		for k := range want {
			if !slices.Equal(got[k], want[k]) {
				t.Errorf("Vary before %v: %s = %q, Header methods give %q", existing, k, got[k], want[k])
			}
		}
		// another handler adds to one field: the next keeps its value
		got.Add("Vary", "Cookie")
		got.Add("Etag", "W/x")
		if got.Get("Content-Type") != "text/plain" || got.Values("Etag")[0] != `"abc"` {
			t.Errorf("an append overwrote a neighbour: %v", got)
		}
	}
}

// TestEntryHeaderValues checks the per-entry strings against what
// ServeContent's own formatting gives.
func TestEntryHeaderValues(t *testing.T) {
	mod := time.Date(2026, 12, 1, 15, 4, 5, 123, time.FixedZone("x", 3600))
	v := KnownHeadersFor(fakeFileInfo{size: 10_000, modtime: mod})
	if !v.ok || v.lastModified != mod.UTC().Format(http.TimeFormat) || v.contentLength != "10000" || v.size != 10_000 {
		t.Errorf("KnownHeadersFor = %+v", v)
	}
	v = KnownHeadersFor(fakeFileInfo{size: 0, modtime: time.Unix(0, 0)})
	if !v.ok || v.lastModified != "" || v.contentLength != "0" {
		t.Errorf("KnownHeadersFor at the epoch = %+v, want no Last-Modified", v)
	}
}
