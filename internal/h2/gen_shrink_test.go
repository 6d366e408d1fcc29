package h2

import (
	"fmt"
	"slices"
	"strings"
	"sync"
	"time"
)

// Shrinking a failing scenario of the generative differential test:
// smaller variants (a stream fewer, an action fewer, a size halved) are
// tried, a batch at a time, and the first that still fails the same way
// replaces it, until none does or the budget is spent.

// genShrinkBudget bounds the time spent shrinking one scenario.
const genShrinkBudget = 45 * time.Second

// shrinkCandidates returns variants of sc, each a step smaller or
// simpler, the largest steps first.
func shrinkCandidates(sc genScenario) []genScenario {
	var out []genScenario
	try := func(change func(*genScenario)) {
		c := sc.clone()
		change(&c)
		c.normalize()
		if !c.equal(sc) {
			out = append(out, c)
		}
	}
	for i := range sc.Streams {
		if len(sc.Streams) > 1 {
			try(func(c *genScenario) {
				c.Streams = slices.Delete(c.Streams, i, i+1)
				if c.GoAwayAfter > i {
					c.GoAwayAfter--
				}
			})
		}
	}
	try(func(c *genScenario) { c.GoAwayAfter = -1 })
	try(func(c *genScenario) { c.CloseMs = 0 })
	try(func(c *genScenario) { c.PauseEvery, c.PauseMs = 0, 0 })
	try(func(c *genScenario) { c.FrameSize = 0 })
	try(func(c *genScenario) { c.TableSize = -1 })
	try(func(c *genScenario) { c.MaxConc = -1 })
	try(func(c *genScenario) { c.ConnGrant, c.ConnWindow = 1<<30, genPolicy{} })
	try(func(c *genScenario) { c.ConnWindow = genPolicy{} })
	for i := range sc.Streams {
		st := func(change func(sp *genStreamPlan)) { try(func(c *genScenario) { change(&c.Streams[i]) }) }
		st(func(sp *genStreamPlan) { sp.RST, sp.RSTArg, sp.RSTCode = 0, 0, 8 })
		st(func(sp *genStreamPlan) {
			sp.Upload, sp.Trailers, sp.PingPong, sp.CL, sp.Lag, sp.PaceMs = 0, false, false, false, 0, 0
			if sp.Method != "HEAD" {
				sp.Method = "GET"
			}
			if sp.Shape.Read == genReadEcho {
				sp.Shape.Read = genReadNone
			}
		})
		st(func(sp *genStreamPlan) { sp.Shape.End, sp.Shape.At = 0, 0 })
		st(func(sp *genStreamPlan) { sp.Shape.Trail = 0 })
		st(func(sp *genStreamPlan) { sp.Shape.Trail &^= 2 })
		st(func(sp *genStreamPlan) { sp.Shape.Trail &^= 1 })
		st(func(sp *genStreamPlan) { sp.DelayMs = 0 })
		st(func(sp *genStreamPlan) { sp.Prio, sp.PrioLate = "", false })
		st(func(sp *genStreamPlan) { sp.Lag = 0 })
		st(func(sp *genStreamPlan) { sp.PaceMs = 0 })
		st(func(sp *genStreamPlan) { sp.Trailers = false })
		st(func(sp *genStreamPlan) { sp.CL = false })
		st(func(sp *genStreamPlan) { sp.PingPong = false })
		st(func(sp *genStreamPlan) { sp.Window = genPolicy{} })
		st(func(sp *genStreamPlan) { sp.Shape.Hint = false })
		st(func(sp *genStreamPlan) { sp.Shape.Hdrs = 0 })
		st(func(sp *genStreamPlan) { sp.Shape.Slow = 0 })
		st(func(sp *genStreamPlan) { sp.Shape.Ignore = false })
		st(func(sp *genStreamPlan) { sp.Shape.Status = 0 })
		st(func(sp *genStreamPlan) { sp.Shape.CL = false })
		st(func(sp *genStreamPlan) { sp.Shape.Flush = 0 })
		st(func(sp *genStreamPlan) { sp.Shape.Flush = min(sp.Shape.Flush, 1) })
		st(func(sp *genStreamPlan) {
			if sp.Shape.Read != genReadEcho {
				sp.Shape.Read = genReadNone
			}
		})
		st(func(sp *genStreamPlan) {
			if sp.Method == "HEAD" {
				sp.Method = "GET"
			}
		})
		st(func(sp *genStreamPlan) { sp.Shape.N /= 2; sp.Shape.At = min(sp.Shape.At, sp.Shape.N) })
		st(func(sp *genStreamPlan) { sp.Shape.N -= sp.Shape.N / 8; sp.Shape.At = min(sp.Shape.At, sp.Shape.N) })
		st(func(sp *genStreamPlan) { sp.Upload /= 2 })
		st(func(sp *genStreamPlan) { sp.Shape.At /= 2 })
		st(func(sp *genStreamPlan) { sp.RSTArg /= 2 })
		// fewer, larger writes are simpler to read
		st(func(sp *genStreamPlan) { sp.Shape.Write = min(sp.Shape.Write*2, max(sp.Shape.N, 1)) })
		st(func(sp *genStreamPlan) { sp.Chunk = min(sp.Chunk*2, 16384) })
	}
	return out
}

func (sc genScenario) clone() genScenario {
	sc.Streams = slices.Clone(sc.Streams)
	return sc
}

func (sc genScenario) equal(o genScenario) bool {
	return fmt.Sprintf("%+v", sc) == fmt.Sprintf("%+v", o)
}

// shrink returns the smallest variant of sc found that still fails with
// kind, its failures, and how many runs it took. run runs a scenario
// once. A failure that depends on timing is looked for in several runs
// of each variant at once: as many as the original needed to fail about
// three times (at most 16).
func shrink(sc genScenario, kind string, parallel int, run func(genScenario) []genFailure) (genScenario, []genFailure, int) {
	start := time.Now()
	runs := 0
	// runAll runs each of cands tries times, parallel runs at once, and
	// returns the failures of kind of each (nil: it did not fail so)
	runAll := func(cands []genScenario, tries int) [][]genFailure {
		out := make([][]genFailure, len(cands))
		var mu sync.Mutex
		var wg sync.WaitGroup
		sem := make(chan struct{}, parallel)
		for i, c := range cands {
			for range tries {
				sem <- struct{}{}
				wg.Go(func() {
					defer func() { <-sem }()
					fs := run(c)
					mu.Lock()
					defer mu.Unlock()
					runs++
					if out[i] == nil && slices.ContainsFunc(fs, func(f genFailure) bool { return f.kind == kind }) {
						out[i] = fs
					}
				})
			}
		}
		wg.Wait()
		return out
	}
	probe := make([]genScenario, 8)
	for i := range probe {
		probe[i] = sc
	}
	failed := 0
	var last []genFailure
	for _, fs := range runAll(probe, 1) {
		if fs != nil {
			failed++
			last = fs
		}
	}
	if failed == 0 {
		return sc, nil, runs
	}
	tries := min(16, (3*8+failed-1)/failed)
	shrunk := false
	for time.Since(start) < genShrinkBudget {
		cands := shrinkCandidates(sc)
		found := false
		for len(cands) > 0 && !found && time.Since(start) < genShrinkBudget {
			batch := cands[:min(max(1, 2*parallel/tries), len(cands))]
			cands = cands[len(batch):]
			for i, fs := range runAll(batch, tries) {
				if fs != nil {
					sc, last, found, shrunk = batch[i], fs, true, true
					break
				}
			}
		}
		if !found {
			break
		}
	}
	if !shrunk {
		return sc, nil, runs
	}
	return sc, last, runs
}

// rawSketch renders sc as the start of a rawScript case for
// rawscripts_test.go. rawConn gives no window by itself: the sketch
// gives each stream its initial window back whenever it has been used
// (the scenario's own policy is in a comment), and TestRawDiff's handler
// must route /gen to genHandler.
func rawSketch(sc genScenario) string {
	var b strings.Builder
	fmt.Fprintf(&b, "{name: \"gen_%d\", open: rawOpen{settings: []http2.Setting{{ID: http2.SettingInitialWindowSize, Val: %d}", sc.Seed, sc.Window)
	if sc.FrameSize != 0 {
		fmt.Fprintf(&b, ", {ID: http2.SettingMaxFrameSize, Val: %d}", sc.FrameSize)
	}
	if sc.TableSize >= 0 {
		fmt.Fprintf(&b, ", {ID: http2.SettingHeaderTableSize, Val: %d}", sc.TableSize)
	}
	b.WriteString("}")
	if sc.ConnGrant == 0 {
		b.WriteString(", noWindow: true")
	}
	b.WriteString("}, run: func(c *rawConn) {\n")
	for i, sp := range sc.Streams {
		id := 2*i + 1
		if sc.GoAwayAfter == i {
			b.WriteString("\tc.goAwayFrame(0, http2.ErrCodeNo)\n")
			break
		}
		body := sp.Upload > 0 || sp.Trailers
		var extra []string
		if sp.CL && sp.Upload > 0 {
			extra = append(extra, `"content-length"`, fmt.Sprintf("%q", fmt.Sprint(sp.Upload)))
		}
		if sp.Trailers {
			extra = append(extra, `"trailer"`, `"x-req-t"`)
		}
		fmt.Fprintf(&b, "\tc.req(%d, %q, %q, %v%s) // window %v\n", id, sp.Method, sp.path(), !body, strings.Join(append([]string{""}, extra...), ", "), sp.Window)
		if sp.Upload > 0 {
			fmt.Fprintf(&b, "\tfill(c, %d, %d) // the body must be genFill(genUploadSeed(%d), ...) for handlers that check it\n", id, sp.Upload, sp.Shape.Seed)
		}
		if sp.Trailers {
			fmt.Fprintf(&b, "\tc.headers(%d, true, hfs(\"x-req-t\", \"t-%d\"))\n", id, sp.Upload)
		} else if sp.Upload > 0 {
			fmt.Fprintf(&b, "\tc.data(%d, true, nil)\n", id)
		}
		if sp.RST != genRSTNone {
			fmt.Fprintf(&b, "\tc.rst(%d, %d) // %s\n", id, sp.RSTCode, sp.String())
		}
	}
	for i, sp := range sc.Streams {
		if sc.GoAwayAfter == i {
			break
		}
		if _, n, _ := sp.expect(); n > int64(sc.Window) {
			fmt.Fprintf(&b, "\tfor got := %d; got < %d; got += %d {\n\t\tc.waitData(%d, got)\n\t\tc.windowUpdate(%d, %d)\n\t}\n",
				sc.Window, n, sc.Window, 2*i+1, 2*i+1, sc.Window)
		}
	}
	b.WriteString("}},")
	return b.String()
}
