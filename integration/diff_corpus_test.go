package integration

// The corpus of the differential test (diff_test.go): testdata/diff/*.txt,
// one request a line (see testdata/diff/corpus.txt for the format).

import (
	"bufio"
	"bytes"
	"fmt"
	"os"
	"path/filepath"
	"sort"
	"strings"
	"testing"

	_ "github.com/caddyserver/caddy/v2/modules/standard"
)

// diffEntry is one request of the corpus.
type diffEntry struct {
	file      string
	line      int
	method    string
	target    string      // raw request-target, sent as is
	headers   [][2]string // in order; values may hold placeholders
	knownDiff string      // reason, if marked "# KNOWN-DIFF"
}

func (e diffEntry) String() string {
	var b strings.Builder
	fmt.Fprintf(&b, "%s:%d: %s %s", filepath.Base(e.file), e.line, e.method, e.target)
	for _, h := range e.headers {
		fmt.Fprintf(&b, "\n    %s: %s", h[0], h[1])
	}
	return b.String()
}

// diffLoadCorpus reads every testdata/diff/*.txt file.
func diffLoadCorpus(t *testing.T) []diffEntry {
	t.Helper()
	files, err := filepath.Glob(filepath.Join("..", "testdata", "diff", "*.txt"))
	if err != nil || len(files) == 0 {
		t.Fatalf("no corpus files in testdata/diff: %v", err)
	}
	sort.Strings(files)
	var entries []diffEntry
	for _, file := range files {
		data, err := os.ReadFile(file)
		if err != nil {
			t.Fatal(err)
		}
		sc := bufio.NewScanner(bytes.NewReader(data))
		for line := 1; sc.Scan(); line++ {
			text := strings.TrimRight(sc.Text(), "\r")
			if strings.TrimSpace(text) == "" || strings.HasPrefix(strings.TrimSpace(text), "#") {
				continue
			}
			fields := strings.Split(text, "\t")
			e := diffEntry{file: file, line: line}
			var rest []string
			for i, f := range fields {
				if strings.HasPrefix(strings.TrimSpace(f), "#") {
					comment := strings.TrimSpace(strings.Join(fields[i:], " "))
					if r, ok := strings.CutPrefix(comment, "# KNOWN-DIFF"); ok {
						e.knownDiff = strings.TrimSpace(r)
						if e.knownDiff == "" {
							e.knownDiff = "(no reason given)"
						}
					}
					break
				}
				if f == "" {
					continue // allow runs of tabs
				}
				rest = append(rest, f)
			}
			if len(rest) < 2 {
				t.Fatalf("%s:%d: want METHOD<TAB>TARGET[<TAB>Header: value...], got %q", file, line, text)
			}
			e.method, e.target = rest[0], rest[1]
			for _, h := range rest[2:] {
				name, value, ok := strings.Cut(h, ":")
				if !ok || strings.TrimSpace(name) == "" {
					t.Fatalf("%s:%d: bad header field %q", file, line, h)
				}
				e.headers = append(e.headers, [2]string{strings.TrimSpace(name), strings.TrimSpace(value)})
			}
			entries = append(entries, e)
		}
		if err := sc.Err(); err != nil {
			t.Fatal(err)
		}
	}
	return entries
}
