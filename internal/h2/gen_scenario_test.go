package h2

import (
	"fmt"
	"math"
	"math/rand/v2"
)

// A scenario of the generative differential test: what the client does
// on one connection (its SETTINGS, how it gives window, how it reads, its
// streams and what each does) and what each stream's handler does. A
// scenario is made from a seed alone (genScenarioOf), so a seed names it.

// How the client gives back receive window (genPolicy.Kind).
const (
	genWinEager = iota // at once, for every DATA frame
	genWinLazy         // when half of it is used
	genWinEmpty        // when all of it is used
	genWinBytes        // Arg bytes at a time, each time it is used up
	genWinLate         // all of it, Arg ms after it is used up
	genWinKinds
)

// genPolicy is a window policy.
type genPolicy struct {
	Kind int
	Arg  int
}

func (p genPolicy) String() string {
	switch p.Kind {
	case genWinEager:
		return "eager"
	case genWinLazy:
		return "lazy"
	case genWinEmpty:
		return "when-empty"
	case genWinBytes:
		return fmt.Sprintf("%d-bytes-when-empty", p.Arg)
	default:
		return fmt.Sprintf("late-%dms", p.Arg)
	}
}

// When the client resets a stream (genStreamPlan.RST).
const (
	genRSTNone     = iota
	genRSTAfterMs  // Arg ms after its HEADERS
	genRSTAfterGot // once Arg bytes of the response body came
	genRSTAfterPut // once Arg bytes of the request body were sent
)

// genStreamPlan is one stream: its request, what the client does on it,
// and its handler's shape.
type genStreamPlan struct {
	Method   string
	Shape    genShape
	Upload   int       // request body size
	Chunk    int       // largest DATA frame sent
	PaceMs   int       // ms slept after each request DATA frame
	CL       bool      // the request declares its Content-Length
	Trailers bool      // request trailers (declared)
	PingPong bool      // sends the next piece only once the echo of the last came back
	Window   genPolicy // how the stream's receive window is given back
	RST      int       // genRST*
	RSTArg   int
	RSTCode  uint32
	Prio     string // a PRIORITY_UPDATE's field value ("" none)
	PrioLate bool   // sent after the HEADERS (else before)
	DelayMs  int    // ms waited before the HEADERS
	Lag      int    // DATA frames sent after the server's RST_STREAM (in flight, as a real client's)
}

// genScenario is one connection.
type genScenario struct {
	Seed        uint64
	Window      uint32    // SETTINGS_INITIAL_WINDOW_SIZE
	FrameSize   uint32    // SETTINGS_MAX_FRAME_SIZE (0: not sent)
	TableSize   int64     // SETTINGS_HEADER_TABLE_SIZE (-1: not sent)
	MaxConc     int64     // SETTINGS_MAX_CONCURRENT_STREAMS (-1: not sent)
	ConnGrant   uint32    // connection window added at once
	ConnWindow  genPolicy // how the connection window is given back
	PauseEvery  int       // the reader pauses after every PauseEvery frames (0: never)
	PauseMs     int
	GoAwayAfter int // a GOAWAY(NO_ERROR) after this many streams were opened (-1: none); no stream opens after it
	CloseMs     int // the client closes the connection this long after its start (0: never)
	Streams     []genStreamPlan
}

// genWindows are INITIAL_WINDOW_SIZE values around the edges that
// matter: 1 byte, a frame, the default, the engine's and x/net's buffers.
var genWindows = []uint32{1, 2, 100, 16383, 16384, 65535, 1 << 20, 16<<20 - 1, 65535, 16384}

// genScenarioOf makes scenario seed.
func genScenarioOf(seed uint64) genScenario {
	rng := rand.New(rand.NewPCG(seed, 0x68326765))
	pick := func(percent int) bool { return rng.IntN(100) < percent }
	logUniform := func(lo, hi int) int { // lo..hi, log-uniform
		if lo < 1 {
			lo = 1
		}
		x := float64(lo) * math.Exp2(rng.Float64()*math.Log2(float64(hi)/float64(lo)))
		return min(hi, max(lo, int(x)))
	}
	sc := genScenario{Seed: seed, TableSize: -1, MaxConc: -1, GoAwayAfter: -1}
	if pick(60) {
		sc.Window = genWindows[rng.IntN(len(genWindows))]
	} else {
		sc.Window = uint32(logUniform(1, 16<<20))
	}
	if pick(25) {
		sc.FrameSize = uint32([]int{16384, 16385, 65536, 1<<24 - 1, logUniform(16384, 1<<24-1)}[rng.IntN(5)])
	}
	if pick(25) {
		sc.TableSize = int64([]int{0, 0, 1, 256, 4096, 65536}[rng.IntN(6)])
	}
	if pick(15) {
		sc.MaxConc = int64(rng.IntN(200))
	}
	switch rng.IntN(4) {
	case 0:
		sc.ConnGrant = 1 << 30
	case 1:
		sc.ConnGrant = 0
	default:
		sc.ConnGrant = uint32(logUniform(1, 4<<20))
	}
	sc.ConnWindow = genPolicyOf(rng, false)
	if pick(15) {
		sc.PauseEvery, sc.PauseMs = 1+rng.IntN(40), 1+rng.IntN(20)
	}
	nStreams := 1 + rng.IntN(4)
	if pick(25) {
		nStreams = 1 + rng.IntN(12)
	}
	if pick(5) {
		sc.GoAwayAfter = rng.IntN(nStreams + 1)
	}
	if pick(4) {
		sc.CloseMs = 1 + rng.IntN(200)
	}
	for range nStreams {
		sc.Streams = append(sc.Streams, genStreamOf(rng, pick, logUniform))
	}
	sc.normalize()
	return sc
}

// normalize makes sc keep the rules the generator keeps (the shrinker's
// variants go through it too), then fits it in time.
func (sc *genScenario) normalize() {
	for i := range sc.Streams {
		sp := &sc.Streams[i]
		sh := &sp.Shape
		if sh.Read == genReadEcho {
			sh.End, sh.CL = genEndReturn, false
		} else {
			sp.PingPong = false
		}
		if sh.Status == 204 || sh.Status == 304 {
			sp.PingPong = false // no echo comes back
		}
		if sp.PingPong {
			sh.Flush = 1 // else the echo waits in the handler's buffer for more, which never comes
		}
		if sp.Chunk <= 1 {
			sp.Upload = min(sp.Upload, 2000)
		}
		sh.At = min(sh.At, sh.N)
		if sh.Slow > 0 && sh.Read != genReadEcho && sh.N/max(1, (sh.Write+1)/2) > 50 {
			sh.Slow = 0 // a slow writer sleeps 250 ms at most: longer looks like a stall
		}
		if sp.Upload > 0 || sp.Trailers {
			if sp.Method == "GET" || sp.Method == "HEAD" {
				sp.Method = "POST"
			}
		} else if sp.Method != "HEAD" {
			sp.Method = "GET"
		}
	}
	if sc.GoAwayAfter > len(sc.Streams) {
		sc.GoAwayAfter = -1
	}
	sc.fit()
}

func genPolicyOf(rng *rand.Rand, stream bool) genPolicy {
	p := genPolicy{Kind: rng.IntN(genWinKinds)}
	if !stream && p.Kind == genWinBytes {
		p.Kind = genWinEager // a connection window a few bytes at a time: too slow to be worth it
	}
	switch p.Kind {
	case genWinBytes:
		p.Arg = 1 + rng.IntN(64)
	case genWinLate:
		p.Arg = 1 + rng.IntN(30)
	}
	return p
}

func genStreamOf(rng *rand.Rand, pick func(int) bool, logUniform func(int, int) int) genStreamPlan {
	sp := genStreamPlan{Method: "GET", Window: genPolicyOf(rng, true), RSTCode: 8} // CANCEL
	sh := &sp.Shape
	sh.Seed = rng.Uint64()
	switch {
	case pick(3):
		sh.N = logUniform(1<<20, 8<<20)
	case pick(10):
		sh.N = 0
	case pick(40):
		sh.N = logUniform(1, 4096)
	default:
		sh.N = logUniform(4096, 300_000)
	}
	sh.Write = []int{1, 100, 4096, 4097, 16384, 65536, 1 << 20, logUniform(1, 1<<20)}[rng.IntN(8)]
	if pick(50) {
		sh.Flush = 1 + rng.IntN(3)
	}
	sh.CL = pick(30)
	if pick(35) {
		sh.Trail = 1 + rng.IntN(3)
	}
	if pick(20) {
		sh.Hdrs = 1 + rng.IntN(6)
	}
	sh.Hint = pick(10)
	if pick(20) {
		sh.Status = []int{200, 201, 204, 304, 404, 413, 500}[rng.IntN(7)]
	}
	if pick(8) {
		sh.End = 1 + rng.IntN(2)
		sh.At = rng.IntN(sh.N + 1)
	}
	if pick(10) {
		sh.Slow = 1 + rng.IntN(5)
	}
	sh.Ignore = pick(20)
	if pick(35) {
		sp.Method = []string{"POST", "PUT"}[rng.IntN(2)]
		sp.Upload = []int{0, 1, logUniform(1, 16384), logUniform(1, 300_000), logUniform(1, 2<<20)}[rng.IntN(5)]
		sp.Chunk = []int{1, 1024, 16384, logUniform(1, 16384)}[rng.IntN(4)]
		if pick(20) {
			sp.PaceMs = 1 + rng.IntN(3)
		}
		sp.CL = pick(50)
		sp.Trailers = pick(25)
		sh.Read = rng.IntN(4)
		if sh.Read == genReadEcho {
			sh.End = genEndReturn
			sp.PingPong = pick(40)
			sh.CL = false
		}
		if sh.Read == genReadNone && pick(30) {
			sh.Status = 413
		}
		if pick(10) {
			sp.Lag = 1 + rng.IntN(1500)
			if pick(50) {
				// an upload refused at once, whose DATA in flight is many
				// small frames: what a flood counter must not punish
				sh.Read, sh.Status, sh.End = genReadNone, 413, genEndReturn
				sp.Chunk = 1 + rng.IntN(64)
				sp.Upload = max(sp.Upload, sp.Lag*sp.Chunk)
			}
		}
	} else if pick(5) {
		sp.Method = "HEAD"
	}
	if pick(15) {
		sp.RST = 1 + rng.IntN(3)
		sp.RSTArg = []int{0, 1, rng.IntN(50), logUniform(1, 1<<20)}[rng.IntN(4)]
		if pick(20) {
			sp.RSTCode = []uint32{0, 1, 2}[rng.IntN(3)]
		}
	}
	if pick(15) {
		sp.Prio = fmt.Sprintf("u=%d", rng.IntN(8))
		if pick(50) {
			sp.Prio += ", i"
		}
		sp.PrioLate = pick(50)
	}
	if pick(20) {
		sp.DelayMs = rng.IntN(20)
	}
	return sp
}

// fit shrinks bodies until the scenario's estimated time fits: a window
// of a byte given back one DATA frame at a time makes a round trip per
// byte, and a late window one pause per window.
func (sc *genScenario) fit() {
	for {
		ms, frames := sc.estimate()
		if ms <= 1500 && frames <= genMaxFrames {
			break
		}
		big := 0
		for i, sp := range sc.Streams {
			if sp.Shape.N+sp.Upload > sc.Streams[big].Shape.N+sc.Streams[big].Upload {
				big = i
			}
		}
		sp := &sc.Streams[big]
		sp.Shape.N /= 2
		sp.Upload /= 2
		sp.Shape.At = min(sp.Shape.At, sp.Shape.N)
		if sp.Shape.N+sp.Upload == 0 {
			break
		}
	}
}

// genMaxFrames bounds the frames of a scenario (DATA both ways and
// WINDOW_UPDATE, roughly): tiny frames cost the CPU most of a run's time,
// and a few thousand show what more would.
const genMaxFrames = 3000

// estimate is a rough time for the scenario, counting 3 ms per round
// trip of window (what x/net takes with two dozen scenarios at once under
// the race detector) and
// the pauses, and a rough count of its frames.
func (sc *genScenario) estimate() (ms, frames float64) {
	total := 0.0
	for _, sp := range sc.Streams {
		n := float64(sp.Shape.N)
		if sp.Shape.Read == genReadEcho {
			n = float64(sp.Upload)
		}
		total += n
		win := float64(sc.Window)
		per := 3.0
		switch sp.Window.Kind {
		case genWinLazy:
			win = max(1, win/2)
		case genWinBytes:
			win = float64(sp.Window.Arg)
		case genWinLate:
			per += float64(sp.Window.Arg)
		}
		ms += n / win * per
		// DATA frames: a flushed write is one at least, else the
		// handler's 4 KiB buffer is; each costs the reader's pauses
		frame := 4096.0
		if sp.Shape.Flush > 0 || sp.Shape.Read == genReadEcho {
			frame = float64(max(1, sp.Shape.Write/2)) * float64(max(1, sp.Shape.Flush))
			if sp.Shape.Read == genReadEcho {
				frame = float64(max(1, min(sp.Chunk, sp.Shape.Write)))
			}
		}
		down := n / min(frame, win, 16384)
		up := float64(sp.Upload) / float64(max(1, sp.Chunk))
		frames += 2*down + up
		ms += down * 0.02
		if sc.PauseEvery > 0 {
			ms += down / float64(sc.PauseEvery) * float64(sc.PauseMs)
		}
		ms += up * (0.01 + float64(sp.PaceMs))
		ms += float64(sp.Shape.Slow) * (n/float64(max(1, sp.Shape.Write)/2+1) + 1)
		if sp.PingPong {
			ms += float64(sp.Upload) / float64(max(1, sp.Chunk)) * 3 // a round trip each
		}
	}
	cw := float64(65535 + int64(sc.ConnGrant))
	if sc.ConnWindow.Kind == genWinLate {
		ms += total / cw * float64(sc.ConnWindow.Arg)
	}
	ms += total / 20_000 // bytes through TLS and two hashes
	return ms, frames
}

// expect is what stream plan sp must receive: the body's seed, its size,
// and whether it may end cleanly (END_STREAM) at all.
func (sp *genStreamPlan) expect() (seed uint64, n int64, cleanEnd bool) {
	sh := sp.Shape
	seed = sh.Seed
	if sh.Read == genReadEcho {
		seed = genUploadSeed(sh.Seed)
	}
	switch {
	case sp.Method == "HEAD":
		// a HEAD's response ends with its HEADERS, sent when the
		// handler's buffer is first flushed, whatever the handler does
		// later: a panic may come after a clean end
		return seed, 0, true
	case sh.End != genEndReturn:
		return seed, -1, false
	case sh.Status == 204 || sh.Status == 304:
		return seed, 0, true
	case sh.Read == genReadEcho:
		return seed, int64(sp.Upload), true
	}
	return sh.Seed, int64(sh.N), true
}

// path is the request's :path.
func (sp *genStreamPlan) path() string { return "/gen?" + sp.Shape.query() }
