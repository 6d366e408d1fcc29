package h2file

import (
	"bytes"
	"encoding/json"
	"flag"
	"os"
	"path/filepath"
	"reflect"
	"slices"
	"strings"
	"testing"

	"github.com/caddyserver/caddy/v2/caddyconfig"
)

// go test -run Adapt -update rewrites the expected JSON of the golden files
// in testdata/adapt from the adapter's current output. Read the diff before
// committing it.
var cfgUpdate = flag.Bool("update", false, "rewrite the golden files of the adapt tests")

// cfgGoldenSeparator separates the Caddyfile from the expected output in a
// .caddyfiletest file, as in Caddy's own adapt tests.
const cfgGoldenSeparator = "----------"

// cfgExampleJSON is the expected adaptation of the repository's
// Caddyfile.example.
const cfgExampleJSON = "testdata/adapt/caddyfile_example.json"

// TestAdaptGolden adapts each testdata/adapt/*.caddyfiletest: a Caddyfile,
// a line "----------", then either the expected JSON or, if the expected
// part does not start with '{', a string the adapter's error must contain.
func TestAdaptGolden(t *testing.T) {
	files, err := filepath.Glob(filepath.Join("testdata", "adapt", "*.caddyfiletest"))
	if err != nil {
		t.Fatal(err)
	}
	if len(files) == 0 {
		t.Fatal("no golden files in testdata/adapt")
	}
	for _, file := range files {
		t.Run(filepath.Base(file), func(t *testing.T) {
			data, err := os.ReadFile(file)
			if err != nil {
				t.Fatal(err)
			}
			text := strings.ReplaceAll(string(data), "\r\n", "\n")
			body, expected, ok := strings.Cut(text, "\n"+cfgGoldenSeparator+"\n")
			if !ok {
				t.Fatalf("%s: no %q line", file, cfgGoldenSeparator)
			}
			body = strings.TrimSpace(body) + "\n"
			expected = strings.TrimSpace(expected)

			// error cases are written by hand, never updated
			if expected != "" && expected[0] != '{' {
				cfgAdaptError(t, body, expected)
				return
			}

			got := cfgAdaptIndented(t, body, "")
			if *cfgUpdate {
				out := body + cfgGoldenSeparator + "\n" + string(got) + "\n"
				if err := os.WriteFile(file, []byte(out), 0o644); err != nil {
					t.Fatal(err)
				}
				return
			}
			cfgCompareJSON(t, got, []byte(cfgLocalizeHide(expected)))
			cfgCheckParity(t, body, "", got)
		})
	}
}

// TestAdaptCaddyfileExample adapts the repository's Caddyfile.example, as
// `caddy run --config Caddyfile.example` would, against
// testdata/adapt/caddyfile_example.json.
func TestAdaptCaddyfileExample(t *testing.T) {
	const name = "Caddyfile.example"
	body, err := os.ReadFile(name)
	if err != nil {
		t.Fatal(err)
	}
	got := cfgAdaptIndented(t, string(body), name)
	if *cfgUpdate {
		if err := os.WriteFile(cfgExampleJSON, append(got, '\n'), 0o644); err != nil {
			t.Fatal(err)
		}
		return
	}
	want, err := os.ReadFile(cfgExampleJSON)
	if err != nil {
		t.Fatal(err)
	}
	cfgCompareJSON(t, got, []byte(cfgLocalizePath(string(want), "./"+name)))
	cfgCheckParity(t, string(body), name, got)

	// the example hides its own config file
	h := cfgOnlyHandler(t, got, "h2_file_server")
	want2 := "." + string(filepath.Separator) + name
	found := false
	for _, hide := range cfgStrings(h["hide"]) {
		found = found || hide == want2
	}
	if !found {
		t.Errorf("Caddyfile.example does not hide itself: hide = %q", cfgStrings(h["hide"]))
	}
}

// cfgAdaptIndented adapts body and indents the JSON as the golden files
// are.
func cfgAdaptIndented(t *testing.T, body, filename string) []byte {
	t.Helper()
	out := cfgAdapt(t, body, filename)
	var buf bytes.Buffer
	if err := json.Indent(&buf, out, "", "\t"); err != nil {
		t.Fatalf("adapter output is not JSON: %v\n%s", err, out)
	}
	return buf.Bytes()
}

// cfgAdaptError checks that adapting body fails with an error containing
// want.
func cfgAdaptError(t *testing.T, body, want string) {
	t.Helper()
	_, _, err := caddyconfig.GetAdapter("caddyfile").Adapt([]byte(body), nil)
	if err == nil {
		t.Fatalf("adapter accepted:\n%s", body)
	}
	if !strings.Contains(err.Error(), want) {
		t.Errorf("error %q does not contain %q", err, want)
	}
}

// cfgCompareJSON compares two JSON documents by value, and shows both
// indented if they differ.
func cfgCompareJSON(t *testing.T, got, want []byte) {
	t.Helper()
	var g, w any
	if err := json.Unmarshal(got, &g); err != nil {
		t.Fatalf("got invalid JSON: %v\n%s", err, got)
	}
	if err := json.Unmarshal(want, &w); err != nil {
		t.Fatalf("golden file has invalid JSON: %v\n%s", err, want)
	}
	if !reflect.DeepEqual(g, w) {
		var wb bytes.Buffer
		_ = json.Indent(&wb, want, "", "\t")
		t.Errorf("adapted JSON differs from the golden file (rerun with -update if intended)\ngot:\n%s\nwant:\n%s", got, wb.Bytes())
	}
}

// cfgLocalizeHide turns the "./Caddyfile" of golden files into this
// platform's path.
func cfgLocalizeHide(expected string) string {
	return cfgLocalizePath(expected, "./Caddyfile")
}

func cfgLocalizePath(expected, path string) string {
	local, _ := json.Marshal(filepath.FromSlash(path))
	return strings.ReplaceAll(expected, `"`+path+`"`, string(local))
}

// cfgCheckParity adapts body again with h2_file_server renamed to
// file_server (with the same file name) and h2_file_server's own
// subdirectives left out (cfgOwnSubdirectives), and checks that the result
// is the same config but for the handler name and those options:
// h2_file_server takes the same Caddyfile syntax to the same JSON. Bodies
// that already use file_server are skipped.
func cfgCheckParity(t *testing.T, body, filename string, got []byte) {
	t.Helper()
	if strings.Contains(strings.ReplaceAll(body, "h2_file_server", ""), "file_server") {
		return
	}
	fsBody := strings.ReplaceAll(cfgWithoutOwnSubdirectives(body), "h2_file_server", "file_server")
	adapter := caddyconfig.GetAdapter("caddyfile")
	opts := map[string]any{}
	if filename != "" {
		opts["filename"] = filename
	}
	fsJSON, _, err := adapter.Adapt([]byte(fsBody), opts)
	if err != nil {
		t.Errorf("file_server does not accept what h2_file_server accepts: %v\n%s", err, fsBody)
		return
	}
	renamed := bytes.ReplaceAll(got, []byte(`"h2_file_server"`), []byte(`"file_server"`))
	var g, w any
	if err := json.Unmarshal(renamed, &g); err != nil {
		t.Fatal(err)
	}
	cfgDeleteOwnFields(g)
	if err := json.Unmarshal(fsJSON, &w); err != nil {
		t.Fatal(err)
	}
	if !reflect.DeepEqual(g, w) {
		var wb bytes.Buffer
		_ = json.Indent(&wb, fsJSON, "", "\t")
		t.Errorf("h2_file_server adapts differently from file_server\nh2_file_server (renamed):\n%s\nfile_server:\n%s", renamed, wb.Bytes())
	}
}

// cfgOwnSubdirectives are h2_file_server's options that file_server does
// not have, with their JSON fields.
var cfgOwnSubdirectives = []string{"compress", "cache", "write_chunk"}

// cfgWithoutOwnSubdirectives removes the lines of cfgOwnSubdirectives (and
// their blocks) from a Caddyfile.
func cfgWithoutOwnSubdirectives(body string) string {
	var out []string
	depth := 0 // >0: inside a removed block
	for _, line := range strings.Split(body, "\n") {
		fields := strings.Fields(line)
		switch {
		case depth > 0:
			depth += strings.Count(line, "{") - strings.Count(line, "}")
			continue
		case len(fields) > 0 && slices.Contains(cfgOwnSubdirectives, fields[0]):
			depth = strings.Count(line, "{") - strings.Count(line, "}")
			continue
		}
		out = append(out, line)
	}
	return strings.Join(out, "\n")
}

// cfgDeleteOwnFields deletes the JSON fields of cfgOwnSubdirectives from
// every file_server handler in v (h2_file_server's, renamed).
func cfgDeleteOwnFields(v any) {
	switch x := v.(type) {
	case map[string]any:
		if x["handler"] == "file_server" {
			for _, f := range cfgOwnSubdirectives {
				delete(x, f)
			}
		}
		for _, e := range x {
			cfgDeleteOwnFields(e)
		}
	case []any:
		for _, e := range x {
			cfgDeleteOwnFields(e)
		}
	}
}
