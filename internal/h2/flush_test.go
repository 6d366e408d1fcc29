package h2

import (
	"bytes"
	"net/http"
	"strconv"
	"testing"
)

// TestFlushSendsDeclaredBody: a handler that writes its whole declared
// body in one write larger than its buffer (which leaves the frames in
// the batch for the END_STREAM its return adds) and then flushes gets
// them written by Flush, not deferredFlushDelay later.
func TestFlushSendsDeclaredBody(t *testing.T) {
	body := bytes.Repeat([]byte("x"), 2*handlerChunkWriteSize)
	held := make(chan bool, 1)
	p := startEngine(t, http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		w.Header().Set("Content-Length", strconv.Itoa(len(body)))
		w.Write(body)
		w.(http.Flusher).Flush()
		c := w.(*responseWriter).state.Load().st.c
		c.mu.Lock()
		held <- c.flushPending
		c.mu.Unlock()
	}), Config{})
	res, err := p.client.Get(p.engineURL + "/")
	if err != nil {
		t.Fatal(err)
	}
	res.Body.Close()
	if <-held {
		t.Error("after Flush, the body was still held in the batch for the END_STREAM")
	}
}
