package h2

import (
	"fmt"
	"strings"
)

// A generated scenario as a short readable script, as TestGenerated
// prints it for a failing seed.

// String renders sc as a short script: the connection, then one line per
// stream.
func (sc *genScenario) String() string {
	var b strings.Builder
	fmt.Fprintf(&b, "scenario %d: SETTINGS{INITIAL_WINDOW_SIZE %d", sc.Seed, sc.Window)
	if sc.FrameSize != 0 {
		fmt.Fprintf(&b, ", MAX_FRAME_SIZE %d", sc.FrameSize)
	}
	if sc.TableSize >= 0 {
		fmt.Fprintf(&b, ", HEADER_TABLE_SIZE %d", sc.TableSize)
	}
	if sc.MaxConc >= 0 {
		fmt.Fprintf(&b, ", MAX_CONCURRENT_STREAMS %d", sc.MaxConc)
	}
	fmt.Fprintf(&b, "}, connection WINDOW_UPDATE %d, connection window %v", sc.ConnGrant, sc.ConnWindow)
	if sc.PauseEvery > 0 {
		fmt.Fprintf(&b, ", reader pauses %d ms every %d frames", sc.PauseMs, sc.PauseEvery)
	}
	if sc.GoAwayAfter >= 0 {
		fmt.Fprintf(&b, ", GOAWAY after %d streams", sc.GoAwayAfter)
	}
	if sc.CloseMs > 0 {
		fmt.Fprintf(&b, ", closes the connection after %d ms", sc.CloseMs)
	}
	for i, sp := range sc.Streams {
		fmt.Fprintf(&b, "\n  stream %d: %s", 2*i+1, sp.String())
	}
	return b.String()
}

func (sp genStreamPlan) String() string {
	var parts []string
	add := func(format string, a ...any) { parts = append(parts, fmt.Sprintf(format, a...)) }
	if sp.DelayMs > 0 {
		add("after %d ms", sp.DelayMs)
	}
	add("%s %s", sp.Method, sp.path())
	if sp.Prio != "" {
		when := "before"
		if sp.PrioLate {
			when = "after"
		}
		add("PRIORITY_UPDATE %q %s HEADERS", sp.Prio, when)
	}
	if sp.Upload > 0 || sp.Trailers {
		add("uploads %d bytes in DATA of up to %d", sp.Upload, sp.Chunk)
		if sp.PaceMs > 0 {
			add("%d ms apart", sp.PaceMs)
		}
		if sp.PingPong {
			add("each once the last is echoed")
		}
		if sp.CL {
			add("with Content-Length")
		}
		if sp.Trailers {
			add("then trailers")
		}
		if sp.Lag > 0 {
			add("%d more DATA after a server RST_STREAM", sp.Lag)
		}
	}
	add("window %v", sp.Window)
	switch sp.RST {
	case genRSTAfterMs:
		add("RST_STREAM(%d) %d ms after HEADERS", sp.RSTCode, sp.RSTArg)
	case genRSTAfterGot:
		add("RST_STREAM(%d) after %d body bytes received", sp.RSTCode, sp.RSTArg)
	case genRSTAfterPut:
		add("RST_STREAM(%d) after %d bytes uploaded", sp.RSTCode, sp.RSTArg)
	}
	return strings.Join(parts, "; ")
}
