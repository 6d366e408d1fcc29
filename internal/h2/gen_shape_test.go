package h2

import (
	"errors"
	"fmt"
	"io"
	"math/rand/v2"
	"net/http"
	"net/url"
	"strconv"
	"strings"
	"time"
)

// The handler side of the generative differential test (gen_test.go): a
// handler whose behaviour, its "shape", is read from the request's query,
// so that the same handler serves the engine and x/net's server, and the
// client knows what it must receive. Body bytes depend on their offset
// (genFill), so a missing, repeated or reordered range is seen.

// How a handler treats the request body (genShape.Read).
const (
	genReadNone  = iota // never reads it: answers (maybe early) and returns
	genReadFirst        // reads it all first, and reports it in X-Upload
	genReadEcho         // full duplex: writes back each piece as it is read
	genReadAfter        // sends the header (flushed), then reads it all, then the body
)

// How a handler ends (genShape.End).
const (
	genEndReturn = iota // returns
	genEndPanic         // panics once At bytes are written
	genEndAbort         // panics with http.ErrAbortHandler once At bytes are written
)

// genShape is what a handler does for one request.
type genShape struct {
	Seed   uint64 // s: seeds the body bytes, the write sizes and header values
	N      int    // n: body size (genReadEcho: what is read)
	Write  int    // w: largest write; each write is 1..w bytes
	Flush  int    // f: Flush after every f-th write (0: never)
	CL     bool   // cl: declares Content-Length: n
	Trail  int    // tr: bit 1 a declared trailer (Trailer header), bit 2 a "Trailer:"-prefixed one
	Hdrs   int    // h: extra response header fields
	Hint   bool   // e: a 103 Early Hints first
	Status int    // st: the status (0: 200 by the first write)
	Read   int    // rd: genRead*
	End    int    // x: genEnd*
	At     int    // p: where a panic happens (bytes written before it)
	Slow   int    // sl: milliseconds slept after each write
	Ignore bool   // ig: keeps writing after a write error (outlives a reset)
}

// query encodes sh as the request's query; parseShape decodes it.
func (sh genShape) query() string {
	q := []string{"s=" + strconv.FormatUint(sh.Seed, 10), "n=" + strconv.Itoa(sh.N), "w=" + strconv.Itoa(sh.Write)}
	add := func(k string, v int) {
		if v != 0 {
			q = append(q, k+"="+strconv.Itoa(v))
		}
	}
	b := func(v bool) int {
		if v {
			return 1
		}
		return 0
	}
	add("f", sh.Flush)
	add("cl", b(sh.CL))
	add("tr", sh.Trail)
	add("h", sh.Hdrs)
	add("e", b(sh.Hint))
	add("st", sh.Status)
	add("rd", sh.Read)
	add("x", sh.End)
	add("p", sh.At)
	add("sl", sh.Slow)
	add("ig", b(sh.Ignore))
	return strings.Join(q, "&")
}

func parseShape(raw string) (genShape, error) {
	q, err := url.ParseQuery(raw)
	if err != nil {
		return genShape{}, err
	}
	num := func(k string) int { v, _ := strconv.Atoi(q.Get(k)); return v }
	seed, _ := strconv.ParseUint(q.Get("s"), 10, 64)
	sh := genShape{Seed: seed, N: num("n"), Write: num("w"), Flush: num("f"), CL: num("cl") == 1, Trail: num("tr"),
		Hdrs: num("h"), Hint: num("e") == 1, Status: num("st"), Read: num("rd"), End: num("x"), At: num("p"),
		Slow: num("sl"), Ignore: num("ig") == 1}
	if sh.Write <= 0 {
		return sh, errors.New("w must be positive")
	}
	return sh, nil
}

// genUploadSeed is the seed of the request body of a stream whose
// handler has shape seed s.
func genUploadSeed(s uint64) uint64 { return s ^ 0x5eed_0f_0b0d1e5 }

// genMix is splitmix64's finaliser of seed and k.
func genMix(seed uint64, k int64) uint64 {
	z := seed + uint64(k+1)*0x9e3779b97f4a7c15
	z = (z ^ z>>30) * 0xbf58476d1ce4e5b9
	z = (z ^ z>>27) * 0x94d049bb133111eb
	return z ^ z>>31
}

// genFill fills p with the bytes at offsets off.. of the body seeded by
// seed: byte i is byte i%8 of genMix(seed, i/8).
func genFill(seed uint64, off int64, p []byte) {
	var word uint64
	for i := range p {
		pos := off + int64(i)
		if i == 0 || pos&7 == 0 {
			word = genMix(seed, pos>>3)
		}
		p[i] = byte(word >> (8 * (pos & 7)))
	}
}

// genMismatch returns the index of the first byte of p that differs from
// the body seeded by seed at offset off, or -1.
func genMismatch(seed uint64, off int64, p []byte) int {
	var word uint64
	for i := range p {
		pos := off + int64(i)
		if i == 0 || pos&7 == 0 {
			word = genMix(seed, pos>>3)
		}
		if p[i] != byte(word>>(8*(pos&7))) {
			return i
		}
	}
	return -1
}

// genHeaderValue is the value of extra header field i (or a trailer).
func genHeaderValue(seed uint64, i int) string {
	v := genMix(seed, int64(1000+i))
	return strings.Repeat(strconv.FormatUint(v, 36), 1+int(v%7))
}

// genHandler serves a request as its query's shape says.
func genHandler(w http.ResponseWriter, r *http.Request) {
	sh, err := parseShape(r.URL.RawQuery)
	if err != nil {
		http.Error(w, err.Error(), http.StatusBadRequest)
		return
	}
	h := w.Header()
	for i := range sh.Hdrs {
		h.Set(fmt.Sprintf("X-Gen-%d", i), genHeaderValue(sh.Seed, i))
	}
	if sh.Trail&1 != 0 {
		h.Set("Trailer", "X-Gen-Trailer")
	}
	if sh.Hint {
		h.Set("Link", "</gen.css>; rel=preload")
		// x/net encodes a 1xx's header map on its writing goroutine
		// while the handler goes on, and changing the header after a 1xx,
		// as net/http allows, races with it (x/net v0.60 server.go,
		// responseWriterState.writeHeader), unless the map holds a
		// Content-Length: then it encodes a copy without it. Both servers
		// leave Content-Length out of a 1xx.
		h.Set("Content-Length", "0")
		w.WriteHeader(http.StatusEarlyHints)
		h.Del("Content-Length")
	}
	if sh.CL && sh.Read != genReadEcho {
		h.Set("Content-Length", strconv.Itoa(sh.N))
	}
	rec := r.Header.Get("X-Gen-Rec")
	if sh.Read == genReadFirst {
		n, bad, err := genVerify(r.Body, genUploadSeed(sh.Seed))
		recordGenRead(rec, n, bad, err)
		h.Set("X-Upload", fmt.Sprintf("%d bytes, first bad byte %d, err %v", n, bad, err))
		h.Set("X-Upload-Trailer", r.Trailer.Get("X-Req-T"))
	}
	if sh.Status != 0 {
		w.WriteHeader(sh.Status)
	}
	if sh.Read == genReadAfter {
		w.(http.Flusher).Flush()
		n, bad, err := genVerify(r.Body, genUploadSeed(sh.Seed))
		recordGenRead(rec, n, bad, err)
	}
	if sh.Read == genReadEcho {
		genEcho(w, r, sh, rec)
	} else {
		genWrite(w, sh)
	}
	if sh.Trail&1 != 0 {
		h.Set("X-Gen-Trailer", genHeaderValue(sh.Seed, 100))
	}
	if sh.Trail&2 != 0 {
		h.Set(http.TrailerPrefix+"X-Gen-Late", genHeaderValue(sh.Seed, 101))
	}
}

// genWrite writes sh's body in writes of 1..sh.Write bytes.
func genWrite(w http.ResponseWriter, sh genShape) {
	rng := rand.New(rand.NewPCG(sh.Seed, 7))
	buf := make([]byte, min(sh.Write, sh.N))
	writes := 0
	for off := 0; off < sh.N; {
		if sh.End != genEndReturn && off >= sh.At {
			break
		}
		k := min(1+rng.IntN(sh.Write), sh.N-off)
		if sh.End != genEndReturn {
			k = min(k, sh.At-off)
		}
		p := buf[:k]
		genFill(sh.Seed, int64(off), p)
		_, err := w.Write(p)
		off += k
		writes++
		if sh.Flush > 0 && writes%sh.Flush == 0 {
			w.(http.Flusher).Flush()
		}
		if sh.Slow > 0 {
			time.Sleep(time.Duration(sh.Slow) * time.Millisecond)
		}
		if err != nil && !sh.Ignore {
			break // to the panic, if any
		}
	}
	switch sh.End {
	case genEndPanic:
		panic("gen: handler panic")
	case genEndAbort:
		panic(http.ErrAbortHandler)
	}
}

// genEcho writes back the request body as it comes, in pieces of up to
// sh.Write bytes; what it read is recorded under rec once the body ends
// (not when a failed write ends the echo first).
func genEcho(w http.ResponseWriter, r *http.Request, sh genShape, rec string) {
	http.NewResponseController(w).EnableFullDuplex() // not needed in HTTP/2; an error is fine
	buf := make([]byte, sh.Write)
	writes := 0
	body := newGenBodyCheck(genUploadSeed(sh.Seed))
	for {
		n, rerr := r.Body.Read(buf)
		body.note(buf[:n])
		if rerr != nil {
			recordGenRead(rec, body.n, body.bad, genReadEnd(rerr))
		}
		if n > 0 {
			_, err := w.Write(buf[:n])
			writes++
			if sh.Flush > 0 && writes%sh.Flush == 0 {
				w.(http.Flusher).Flush()
			}
			if err != nil && !sh.Ignore {
				return
			}
		}
		if rerr != nil {
			return
		}
	}
}

// genVerify reads r to its end and returns how many bytes came, the
// offset of the first one that is not the body seeded by seed (-1 if
// none) and the read error (nil at EOF).
func genVerify(r io.Reader, seed uint64) (int64, int64, error) {
	buf := make([]byte, 32<<10)
	body := newGenBodyCheck(seed)
	for {
		k, err := r.Read(buf)
		body.note(buf[:k])
		if err != nil {
			return body.n, body.bad, genReadEnd(err)
		}
	}
}

// genBodyCheck follows a body as it is read, against the body seeded by
// seed.
type genBodyCheck struct {
	seed uint64
	n    int64 // bytes read
	bad  int64 // offset of the first wrong byte, or -1
}

func newGenBodyCheck(seed uint64) genBodyCheck { return genBodyCheck{seed: seed, bad: -1} }

// note checks p, the next bytes read.
func (b *genBodyCheck) note(p []byte) {
	if i := genMismatch(b.seed, b.n, p); i >= 0 && b.bad < 0 {
		b.bad = b.n + int64(i)
	}
	b.n += int64(len(p))
}

// genReadEnd is how a read ended: nil at io.EOF, else err.
func genReadEnd(err error) error {
	if err == io.EOF {
		return nil
	}
	return err
}
