package h2

import (
	"math/rand/v2"
	"net/url"
	"reflect"
	"strings"
	"testing"
)

// requestPathPieces are what the generated request paths are made of:
// the characters of the common shape and those around it.
var requestPathPieces = []string{
	"/", "//", "a", "Z", "0", "-", "_", ".", "..", "~", "$", "&", "+", ",", ":", ";", "=", "@",
	"?", "??", "#", "%", "%2F", "%41", "%zz", " ", "!", "*", "'", "(", ")", "[", "]", "\"", "<",
	"\\", "^", "`", "{", "|", "}", "\x00", "\t", "\x7f", "\xc3\xa9", "\xff", "x=1", "&y=", "http:", "*",
}

// TestParseRequestPathMatchesNetURL holds parseRequestPath to
// url.ParseRequestURI's URL (every field) and error on generated paths.
func TestParseRequestPathMatchesNetURL(t *testing.T) {
	check := func(path string) (common bool) {
		t.Helper()
		checkRequestPathAsNetURL(t, path)
		_, _, common = commonRequestPath(path)
		return common
	}
	for _, path := range []string{"/", "/style.css", "/a/b.js?v=3", "/img/logo.svg?x=1&y=2", "/fonts/i.woff2"} {
		if !check(path) {
			t.Errorf("%q is parsed by net/url: it is a path of the common shape", path)
		}
	}
	checkGenerated(t, rand.New(rand.NewPCG(29, 3986)), check, func(rng *rand.Rand, b *strings.Builder) {
		if rng.IntN(8) != 0 {
			b.WriteByte('/')
		}
		for range rng.IntN(10) {
			b.WriteString(requestPathPieces[rng.IntN(len(requestPathPieces))])
		}
	})
}

// FuzzParseRequestPath is TestParseRequestPathMatchesNetURL's check on
// any string.
func FuzzParseRequestPath(f *testing.F) {
	for _, s := range []string{"/a?b", "/a?", "/%41", "*", "//x", "/a b"} {
		f.Add(s)
	}
	f.Fuzz(checkRequestPathAsNetURL)
}

// checkRequestPathAsNetURL fails t unless parseRequestPath gives
// url.ParseRequestURI's URL (every field) and error for path.
func checkRequestPathAsNetURL(t *testing.T, path string) {
	t.Helper()
	var dst url.URL
	got, gotErr := parseRequestPath(path, &dst)
	want, wantErr := url.ParseRequestURI(path)
	if (gotErr != nil) != (wantErr != nil) || (wantErr == nil && !reflect.DeepEqual(*got, *want)) {
		t.Fatalf("parseRequestPath(%q) = %#v, %v; url.ParseRequestURI: %#v, %v", path, got, gotErr, want, wantErr)
	}
}
