package h2

import (
	"fmt"
	"sync"
	"sync/atomic"
)

// What a generated stream's handler read of the request body, checked
// by the client's side after the run (checkGen): a read that ends
// cleanly (io.EOF) must have given every byte the client sent, and only
// those, whatever happened to the stream afterwards. Nothing the client
// sees shows it: a handler that read a short body as if it were whole
// (the client reset the stream after sending it all) answers on a stream
// that is gone.

// genRead is one handler's read of its request body.
type genRead struct {
	n, bad int64 // bytes read; the first wrong one's offset, or -1
	err    error // the read's end: nil at io.EOF
}

// genReads holds the reads of the handlers that read their body, by the
// request's X-Gen-Rec, until checkGen takes them.
var genReads sync.Map // string -> genRead

// genRunSeq numbers the runs of scenarios, so that a record of a run's
// handler is never taken for another's (a scenario replayed, or a
// handler that outlives its run).
var genRunSeq atomic.Uint64

// genRecKey is the X-Gen-Rec of stream id in run.
func genRecKey(run uint64, id uint32) string { return fmt.Sprintf("%d/%d", run, id) }

// recordGenRead keeps what the handler of the request with rec read.
func recordGenRead(rec string, n, bad int64, err error) {
	if rec != "" {
		genReads.Store(rec, genRead{n: n, bad: bad, err: err})
	}
}

// takeGenRead returns and forgets the read of stream id in run, if its
// handler read its body and has finished reading.
func takeGenRead(run uint64, id uint32) (genRead, bool) {
	v, ok := genReads.LoadAndDelete(genRecKey(run, id))
	if !ok {
		return genRead{}, false
	}
	return v.(genRead), true
}
