package h2

import (
	"fmt"
	"slices"
	"strings"
)

// What the generative differential test checks of a scenario's two runs
// (gen_client_test.go's genResult): first each server's run alone (the
// invariants: every body byte right, no stall, no DATA beyond a window,
// no clean END_STREAM on a short body, and for the engine no connection
// error for a client that broke no rule), then the engine's run against
// x/net's, stream by stream, on what does not depend on timing.

// genFailure is one thing wrong with a scenario's runs. kind is a short
// category (the server, then what); shrinking keeps a scenario that fails
// with the same kind.
type genFailure struct {
	kind, detail string
}

func (f genFailure) String() string { return f.kind + ": " + f.detail }

// checkGen checks one server's run alone.
func checkGen(sc *genScenario, res *genResult) []genFailure {
	var out []genFailure
	fail := func(what, format string, a ...any) {
		out = append(out, genFailure{res.server + ": " + what, fmt.Sprintf(format, a...)})
	}
	if res.err != nil {
		fail("dial", "%v", res.err)
		return out
	}
	for _, v := range res.violations {
		fail("protocol", "%s", v)
	}
	for _, s := range res.stalled {
		fail("stall", "%s", s)
	}
	for _, r := range res.runs {
		if !r.opened {
			continue
		}
		// what the handler read of the request body, if it read it and
		// is done (gen_reads_test.go)
		if rd, ok := takeGenRead(res.run, r.id); ok {
			switch {
			case rd.bad >= 0:
				fail("wrong request body bytes", "stream %d: the handler read byte %d wrong (%d bytes read)", r.id, rd.bad, rd.n)
			case rd.err == nil && rd.n != int64(r.plan.Upload):
				fail("short request body read as whole", "stream %d: the handler read %d of the %d bytes sent%s, then io.EOF",
					r.id, rd.n, r.plan.Upload, resetNote(r))
			}
		}
		if r.badAt >= 0 {
			fail("wrong body bytes", "stream %d: body byte %d is wrong (%d bytes came)", r.id, r.badAt, r.n)
		}
		if r.end != "END_STREAM" {
			continue
		}
		// A clean END_STREAM says the response is complete, whenever it
		// came (a reset by the client after it changes nothing): a short
		// body with it is a loss the client cannot see.
		_, want, clean := r.plan.expect()
		switch {
		case !clean:
			fail("clean END_STREAM from a failing handler", "stream %d: the handler panics after %d bytes, yet %d bytes and END_STREAM came",
				r.id, r.plan.Shape.At, r.n)
		case r.n < want:
			fail("short body with a clean END_STREAM", "stream %d: %d body bytes of %d, then END_STREAM%s (first missing byte at %d)",
				r.id, r.n, want, trailersNote(r), r.n)
		case r.n > want:
			fail("long body", "stream %d: %d body bytes, want %d", r.id, r.n, want)
		}
	}
	// A client that keeps every rule must never get a connection error
	// (RFC 9113 §5.1: frames on a stream the server reset, which a client
	// may have had in flight, are ignored, not punished). Checked for the
	// engine; x/net's exceptions are in compareGen.
	if res.server == "engine" && !res.closedByUs && !dribbled(res) {
		for _, code := range res.goAways {
			if code != "NO_ERROR" {
				fail("connection error", "GOAWAY %s to a client that broke no rule%s", code, lateFramesNote(res))
			}
		}
	}
	return out
}

func resetNote(r *genRun) string {
	if r.clientRST {
		return " (the client reset the stream)"
	}
	return ""
}

func trailersNote(r *genRun) string {
	if len(r.trail) > 0 {
		return " on the trailers"
	}
	return ""
}

// lateFramesNote says which streams got request frames after the
// server's RST_STREAM.
func lateFramesNote(res *genResult) string {
	var ids []string
	for _, r := range res.runs {
		if r.serverRST && (r.sent < int64(r.plan.Upload) || r.trailsSent) && r.plan.Lag > 0 {
			ids = append(ids, fmt.Sprint(r.id))
		}
	}
	if len(ids) == 0 {
		return ""
	}
	return " (the client went on sending request DATA after the server's RST_STREAM on stream " + strings.Join(ids, ", ") + ")"
}

// genDribble is how many WINDOW_UPDATEs under 1 KiB make a client a
// dribbler (see compareGen).
const genDribble = 500

// dribbled reports whether res's connection ended with ENHANCE_YOUR_CALM
// after the client gave window back in genDribble small steps or more.
func dribbled(res *genResult) bool {
	return res.dribble >= genDribble && slices.Contains(res.goAways, "ENHANCE_YOUR_CALM")
}

// connError returns the first GOAWAY code other than NO_ERROR, or "".
func connError(res *genResult) string {
	for _, code := range res.goAways {
		if code != "NO_ERROR" {
			return code
		}
	}
	return ""
}

// compareGen compares the engine's run with x/net's.
func compareGen(sc *genScenario, e, x *genResult) []genFailure {
	var out []genFailure
	fail := func(what, format string, a ...any) {
		out = append(out, genFailure{"engine and x/net differ: " + what, fmt.Sprintf(format, a...)})
	}
	if e.err != nil || x.err != nil || e.closedByUs || x.closedByUs {
		// the client closed the connection at some time: what came
		// before is a matter of timing, and only the invariants hold
		return nil
	}
	ece, xce := connError(e), connError(x)
	if dribbled(e) {
		// Accepted: the engine ends a connection that gives window back
		// in hundreds of steps under 1 KiB (CVE-2019-9511, data
		// dribble; RFC 9113 §10.5 lets a server treat such use as
		// ENHANCE_YOUR_CALM); x/net has no such defence. The streams,
		// cut at that time, are not compared.
		return nil
	}
	if (xce == "PROTOCOL_ERROR" || closedEarly(x)) && ece == "" && trailersAfterReset(x) {
		// Accepted: x/net answers a HEADERS (request trailers) on a
		// stream it reset with a connection error once its RST_STREAM
		// is written (it forgets the stream); RFC 9113 §5.1 says to
		// ignore it, which the engine does. After a GOAWAY NO_ERROR (the
		// client's GOAWAY) x/net sends no second GOAWAY for it, and only
		// closes the connection a second later. Whether the trailers
		// were in flight then is timing: the streams are not compared.
		return nil
	}
	if ece != xce {
		fail("connection error", "engine GOAWAY %q, x/net GOAWAY %q (all: %v, %v)", ece, xce, e.goAways, x.goAways)
	}
	if ece != "" || xce != "" {
		// a connection error ends every stream at a time of its own
		return out
	}
	if eg, xg := len(e.goAways) > 0, len(x.goAways) > 0; eg != xg {
		fail("GOAWAY", "engine %v, x/net %v", e.goAways, x.goAways)
	}
	for i, er := range e.runs {
		xr := x.runs[i]
		if !er.opened || !xr.opened || er.clientRST || xr.clientRST {
			// a stream the client reset may have got any prefix of its
			// body (checked by checkGen), and any end
			continue
		}
		if er.end != xr.end {
			fail("end", "stream %d: engine %s after %d body bytes, x/net %s after %d", er.id, genEnd(er), er.n, genEnd(xr), xr.n)
			continue
		}
		// How the response was framed, window updates, and a RST_STREAM
		// NO_ERROR after END_STREAM (sent when the request body was not
		// read, if it had not ended by then) are not compared: RFC 9113
		// allows either, and they depend on timing.
		if er.end != "END_STREAM" {
			// a stream the server reset: how much came first depends on
			// when the handler's writes reached the connection
			continue
		}
		if er.status != xr.status {
			fail("status", "stream %d: engine %q, x/net %q", er.id, er.status, xr.status)
		}
		if !slices.Equal(er.info, xr.info) {
			fail("1xx", "stream %d: engine %v, x/net %v", er.id, er.info, xr.info)
		}
		eh, xh := er.header, xr.header
		if er.plan.Shape.Read == genReadEcho {
			// Accepted: an echo that fits the 4 KiB buffer gets a
			// Content-Length when the handler read the request body in
			// few enough pieces to finish before its first Flush, and its
			// Content-Type is sniffed from what was written by then; the
			// pieces a Read returns depend on when the DATA came.
			eh, xh = withoutTimedFields(eh), withoutTimedFields(xh)
		}
		if !slices.Equal(eh, xh) {
			fail("header", "stream %d:\n%s", er.id, lineDiff(er.header, xr.header))
		}
		if er.n != xr.n || string(er.sha.Sum(nil)) != string(xr.sha.Sum(nil)) {
			fail("body", "stream %d: engine %d bytes, x/net %d, first differing offset %d", er.id, er.n, xr.n, firstDiff(er, xr))
		}
		if !slices.Equal(er.trail, xr.trail) {
			fail("trailers", "stream %d: engine %v, x/net %v", er.id, er.trail, xr.trail)
		}
	}
	return out
}

func withoutTimedFields(h []string) []string {
	return slices.DeleteFunc(slices.Clone(h), func(f string) bool {
		return strings.HasPrefix(f, "content-length: ") || strings.HasPrefix(f, "content-type: ")
	})
}

// closedEarly reports whether res's connection closed before a stream
// ended.
func closedEarly(res *genResult) bool {
	return slices.ContainsFunc(res.runs, func(r *genRun) bool { return r.end == "closed" })
}

// trailersAfterReset reports whether the client sent trailers on a
// stream the server reset.
func trailersAfterReset(res *genResult) bool {
	for _, r := range res.runs {
		if r.trailsSent && r.serverRST {
			return true
		}
	}
	return false
}

func genEnd(r *genRun) string {
	if r.end == "" {
		return "no end"
	}
	return r.end
}

// firstDiff is the first offset where a's and b's bodies differ: both are
// checked against the expected bytes as they come, so it is where one of
// them went wrong or the shorter ended.
func firstDiff(a, b *genRun) int64 {
	d := min(a.n, b.n)
	for _, bad := range []int64{a.badAt, b.badAt} {
		if bad >= 0 {
			d = min(d, bad)
		}
	}
	return d
}
