package harness

import (
	"bufio"
	"bytes"
	"os"
	"path/filepath"
	"strings"
	"testing"
)

// HostilePaths reads <testdata>/hostile/paths.txt: one request-target a
// line, then optionally a tab and a note; # starts a comment line.
func HostilePaths(tb testing.TB, testdata string) []string {
	tb.Helper()
	data, err := os.ReadFile(filepath.Join(testdata, "hostile", "paths.txt"))
	if err != nil {
		tb.Fatal(err)
	}
	var paths []string
	sc := bufio.NewScanner(bytes.NewReader(data))
	for line := 1; sc.Scan(); line++ {
		text := strings.TrimSuffix(sc.Text(), "\r")
		if strings.TrimSpace(text) == "" || strings.HasPrefix(text, "#") {
			continue
		}
		target, _, _ := strings.Cut(text, "\t")
		if !strings.HasPrefix(target, "/") {
			tb.Fatalf("paths.txt:%d: target %q does not start with /", line, target)
		}
		paths = append(paths, target)
	}
	if err := sc.Err(); err != nil {
		tb.Fatal(err)
	}
	return paths
}

// GeneratedHostilePaths are the very long hostile paths: 4 KiB and 64 KiB
// segments, long chains of ../ and %2e%2e/, and deep nesting climbing back.
func GeneratedHostilePaths() []string {
	kib4, kib64 := strings.Repeat("a", 4096), strings.Repeat("b", 65536)
	return []string{
		"/" + kib4,
		"/" + kib64,
		"/" + kib4 + "/../x.secret",
		"/" + kib64 + "/../../outside/secret.txt",
		"/dir/" + kib4 + "/../../Caddyfile",
		"/x.secret" + kib4,
		"/visible.txt/" + kib4,
		"/" + strings.Repeat("../", 1366) + "outside/secret.txt",
		"/" + strings.Repeat("%2e%2e/", 9363) + "outside/secret.txt",
		"/" + strings.Repeat("a/", 2048) + strings.Repeat("../", 2048) + "x.secret",
		"/" + strings.Repeat("a/", 2048) + strings.Repeat("../", 2049) + "outside/secret.txt",
		"/" + strings.Repeat("./", 32768) + "hiddendir/file.txt",
		"/" + strings.Repeat("/", 4096) + "Caddyfile",
		"/" + strings.Repeat("%2f", 4096) + "private/key.txt",
		"/dir/" + strings.Repeat("%c0%ae", 4096),
	}
}

// CorpusEntry is one request of the differential corpus.
type CorpusEntry struct {
	Method, Target string
	Headers        [][2]string
}

// Corpus reads every request of <testdata>/diff/*.txt (see corpus.txt
// there for the format): a method, a request-target and header lines,
// tab-separated; # starts a comment.
func Corpus(f testing.TB, testdata string) []CorpusEntry {
	files, err := filepath.Glob(filepath.Join(testdata, "diff", "*.txt"))
	if err != nil || len(files) == 0 {
		f.Fatalf("no corpus in testdata/diff: %v", err)
	}
	var entries []CorpusEntry
	for _, file := range files {
		data, err := os.ReadFile(file)
		if err != nil {
			f.Fatal(err)
		}
		sc := bufio.NewScanner(bytes.NewReader(data))
		for sc.Scan() {
			text := strings.TrimRight(sc.Text(), "\r")
			if strings.TrimSpace(text) == "" || strings.HasPrefix(strings.TrimSpace(text), "#") {
				continue
			}
			var fields []string
			for _, fl := range strings.Split(text, "\t") {
				if strings.HasPrefix(strings.TrimSpace(fl), "#") {
					break
				}
				if fl != "" {
					fields = append(fields, fl)
				}
			}
			if len(fields) < 2 {
				continue
			}
			e := CorpusEntry{Method: fields[0], Target: fields[1]}
			for _, h := range fields[2:] {
				if name, value, ok := strings.Cut(h, ":"); ok {
					e.Headers = append(e.Headers, [2]string{strings.TrimSpace(name), strings.TrimSpace(value)})
				}
			}
			entries = append(entries, e)
		}
	}
	return entries
}
