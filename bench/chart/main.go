// Command chart writes the SVG bar chart of bench/run.sh: for every
// workload, one bar per configuration with its ratio to stock file_server
// (nginx and h2o beside them), and a line at 1.0. It reads the
// tab-separated lines run.sh writes (workload, column, kind, ratio; kind is
// h2file, recommended, anchor or ceiling) on standard input, and needs
// nothing but the standard library.
//
//	go run ./bench/chart -title "..." -o bench/latest.svg <bench/out/chart.tsv
package main

import (
	"bufio"
	"errors"
	"flag"
	"fmt"
	"html"
	"io"
	"math"
	"os"
	"strconv"
	"strings"
)

// bar is one configuration's ratio on one workload.
type bar struct {
	workload, column, kind string
	ratio                  float64
}

// chartData is the parsed input, in the order it came.
type chartData struct {
	workloads []string
	columns   []string
	kinds     map[string]string // column -> kind
	bars      map[[2]string]float64
}

func main() {
	title := flag.String("title", "ratio vs. stock file_server", "chart title")
	out := flag.String("o", "", "output file (default: standard output)")
	ceil := flag.Float64("max", 4, "top of the ratio axis; taller bars are cut there and carry their value")
	flag.Parse()
	data, err := parse(os.Stdin)
	if err != nil {
		fmt.Fprintln(os.Stderr, "chart:", err)
		os.Exit(1)
	}
	var w io.Writer = os.Stdout
	if *out != "" {
		f, err := os.Create(*out)
		if err != nil {
			fmt.Fprintln(os.Stderr, "chart:", err)
			os.Exit(1)
		}
		defer f.Close()
		w = f
	}
	if err := render(w, data, *title, *ceil); err != nil {
		fmt.Fprintln(os.Stderr, "chart:", err)
		os.Exit(1)
	}
}

// parse reads the tab-separated lines of run.sh.
func parse(r io.Reader) (*chartData, error) {
	d := &chartData{kinds: map[string]string{}, bars: map[[2]string]float64{}}
	seenW := map[string]bool{}
	sc := bufio.NewScanner(r)
	for n := 1; sc.Scan(); n++ {
		line := sc.Text()
		if strings.TrimSpace(line) == "" {
			continue
		}
		f := strings.Split(line, "\t")
		if len(f) != 4 {
			return nil, fmt.Errorf("line %d: want 4 tab-separated fields, got %d", n, len(f))
		}
		ratio, err := strconv.ParseFloat(f[3], 64)
		if err != nil || ratio < 0 || math.IsInf(ratio, 0) || math.IsNaN(ratio) {
			return nil, fmt.Errorf("line %d: bad ratio %q", n, f[3])
		}
		b := bar{workload: f[0], column: f[1], kind: f[2], ratio: ratio}
		if !seenW[b.workload] {
			seenW[b.workload] = true
			d.workloads = append(d.workloads, b.workload)
		}
		if _, ok := d.kinds[b.column]; !ok {
			d.columns = append(d.columns, b.column)
		}
		d.kinds[b.column] = b.kind
		d.bars[[2]string{b.workload, b.column}] = b.ratio
	}
	if err := sc.Err(); err != nil {
		return nil, fmt.Errorf("reading input: %w", err)
	}
	if len(d.bars) == 0 {
		return nil, errors.New("no data")
	}
	return d, nil
}

// Layout, in SVG user units.
const (
	barW     = 16
	groupGap = 22
	plotH    = 300
	marginL  = 48
	marginT  = 56
	labelH   = 70
	legendH  = 26
)

// palette colours the h2file configurations; the recommended one, the
// anchors and the ceiling have their own.
var palette = []string{"#9ecae1", "#6baed6", "#4292c6", "#2171b5", "#08519c", "#c6dbef"}

func colour(kind string, i int) string {
	switch kind {
	case "recommended":
		return "#e6550d"
	case "anchor":
		if i%2 == 0 {
			return "#636363"
		}
		return "#969696"
	case "ceiling":
		return "#31a354"
	}
	return palette[i%len(palette)]
}

// render writes the chart. The ratio axis ends at the largest ratio, or at
// ceil if that is smaller (the anchors are up to 10x stock on small files,
// which would flatten every other bar): a taller bar is cut at the top,
// marked with a white notch, and labelled with its value.
func render(w io.Writer, d *chartData, title string, ceil float64) error {
	groupW := len(d.columns)*barW + groupGap
	width := marginL + len(d.workloads)*groupW + 20
	height := marginT + plotH + labelH + legendH*((len(d.columns)+4)/5) + 10
	top := 1.0
	for _, r := range d.bars {
		top = math.Max(top, r)
	}
	top = math.Ceil(top*2) / 2 // next 0.5
	if ceil > 0 && top > ceil {
		top = ceil
	}
	y := func(r float64) float64 { return marginT + plotH - math.Min(r, top)/top*plotH }

	var b strings.Builder
	fmt.Fprintf(&b, `<svg xmlns="http://www.w3.org/2000/svg" width="%d" height="%d" viewBox="0 0 %d %d" font-family="sans-serif" font-size="11">`+"\n", width, height, width, height)
	fmt.Fprintf(&b, `<rect width="%d" height="%d" fill="#ffffff"/>`+"\n", width, height)
	fmt.Fprintf(&b, `<text x="%d" y="24" font-size="14" font-weight="bold">%s</text>`+"\n", marginL, html.EscapeString(title))
	// grid every 0.5
	for r := 0.0; r <= top+1e-9; r += 0.5 {
		fmt.Fprintf(&b, `<line x1="%d" x2="%d" y1="%.1f" y2="%.1f" stroke="#e0e0e0"/>`+"\n", marginL, width-20, y(r), y(r))
		fmt.Fprintf(&b, `<text x="%d" y="%.1f" text-anchor="end">%.1fx</text>`+"\n", marginL-6, y(r)+4, r)
	}
	// the stock line
	fmt.Fprintf(&b, `<line x1="%d" x2="%d" y1="%.1f" y2="%.1f" stroke="#d62728" stroke-dasharray="4 3"/>`+"\n", marginL, width-20, y(1), y(1))
	fmt.Fprintf(&b, `<text x="%d" y="%.1f" fill="#d62728">stock = 1.0</text>`+"\n", width-90, y(1)-4)
	for gi, wl := range d.workloads {
		x0 := marginL + gi*groupW + groupGap/2
		for ci, col := range d.columns {
			r, ok := d.bars[[2]string{wl, col}]
			if !ok {
				continue
			}
			x := x0 + ci*barW
			fmt.Fprintf(&b, `<rect x="%d" y="%.1f" width="%d" height="%.1f" fill="%s"><title>%s, %s: %.2fx</title></rect>`+"\n",
				x, y(r), barW-2, marginT+plotH-y(r), colour(d.kinds[col], ci), html.EscapeString(wl), html.EscapeString(col), r)
			if r > top {
				// cut: a notch near the top, the value inside the bar
				fmt.Fprintf(&b, `<rect x="%d" y="%.1f" width="%d" height="3" fill="#ffffff"/>`+"\n", x, y(top)+8, barW-2)
				fmt.Fprintf(&b, `<text x="%d" y="%.1f" font-size="8" text-anchor="middle" font-weight="bold">%.1f</text>`+"\n", x+(barW-2)/2, y(top)-3, r)
				continue
			}
			fmt.Fprintf(&b, `<text x="%d" y="%.1f" font-size="8" text-anchor="middle">%.2f</text>`+"\n", x+(barW-2)/2, y(r)-3, r)
		}
		// the workload's name, wrapped on two lines if long
		cx := x0 + len(d.columns)*barW/2
		for li, part := range wrap(wl, 2*groupW/11) {
			fmt.Fprintf(&b, `<text x="%d" y="%d" text-anchor="middle">%s</text>`+"\n", cx, marginT+plotH+16+li*13, html.EscapeString(part))
		}
	}
	// legend, five a line
	for ci, col := range d.columns {
		lx := marginL + (ci%5)*170
		ly := marginT + plotH + labelH + (ci/5)*legendH
		fmt.Fprintf(&b, `<rect x="%d" y="%d" width="12" height="12" fill="%s"/>`, lx, ly, colour(d.kinds[col], ci))
		fmt.Fprintf(&b, `<text x="%d" y="%d">%s</text>`+"\n", lx+16, ly+10, html.EscapeString(col))
	}
	b.WriteString("</svg>\n")
	_, err := io.WriteString(w, b.String())
	return err
}

// wrap splits s into lines of about n characters at spaces, at most 4.
func wrap(s string, n int) []string {
	var lines []string
	cur := ""
	for _, word := range strings.Fields(s) {
		if cur != "" && len(cur)+1+len(word) > n {
			lines = append(lines, cur)
			cur = word
			continue
		}
		if cur != "" {
			cur += " "
		}
		cur += word
	}
	if cur != "" {
		lines = append(lines, cur)
	}
	if len(lines) > 4 {
		lines = append(lines[:3], strings.Join(lines[3:], " "))
	}
	return lines
}
