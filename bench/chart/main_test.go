package main

import (
	"encoding/xml"
	"io"
	"strings"
	"testing"
)

// TestRender checks that the chart is well-formed SVG with one bar per
// input line and every column in the legend.
func TestRender(t *testing.T) {
	in := "one stream\talone\th2file\t1.17\n" +
		"one stream\tabove ★\trecommended\t1.62\n" +
		"one stream\tnginx\tanchor\t1.60\n" +
		"10 KB, same\talone\th2file\t1.30\n" +
		"10 KB, same\trespond\tceiling\t2.10\n"
	d, err := parse(strings.NewReader(in))
	if err != nil {
		t.Fatal(err)
	}
	if len(d.workloads) != 2 || len(d.columns) != 4 {
		t.Fatalf("workloads %v, columns %v", d.workloads, d.columns)
	}
	var out strings.Builder
	if err := render(&out, d, "a <title> & more", 2); err != nil {
		t.Fatal(err)
	}
	dec := xml.NewDecoder(strings.NewReader(out.String()))
	bars, texts := 0, []string{}
	for {
		tok, err := dec.Token()
		if err == io.EOF {
			break
		}
		if err != nil {
			t.Fatalf("not well-formed XML: %v\n%s", err, out.String())
		}
		switch el := tok.(type) {
		case xml.StartElement:
			if el.Name.Local == "title" {
				bars++
			}
		case xml.CharData:
			texts = append(texts, string(el))
		}
	}
	if bars != 5 {
		t.Errorf("%d bars, want 5", bars)
	}
	all := strings.Join(texts, "|")
	// respond (2.10) is above the axis's top (2) and is labelled 2.1
	for _, want := range []string{"alone", "above ★", "nginx", "respond", "a <title> & more", "1.62", "2.1"} {
		if !strings.Contains(all, want) {
			t.Errorf("chart text lacks %q", want)
		}
	}
}

// TestParseErrors checks that malformed input is refused.
func TestParseErrors(t *testing.T) {
	for _, in := range []string{"", "a\tb\tc\n", "a\tb\tc\tx\n", "a\tb\tc\t-1\n"} {
		if _, err := parse(strings.NewReader(in)); err == nil {
			t.Errorf("parse(%q) accepted", in)
		}
	}
}
