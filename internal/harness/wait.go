package harness

import (
	"fmt"
	"testing"
	"time"
)

// Poll calls cond until it returns nil or within has passed, and returns
// its last error. It waits 1 ms after the first try, doubling up to 50 ms.
func Poll(within time.Duration, cond func() error) error {
	deadline := time.Now().Add(within)
	wait := time.Millisecond
	for {
		err := cond()
		if err == nil || time.Now().After(deadline) {
			return err
		}
		time.Sleep(wait)
		wait = min(2*wait, 50*time.Millisecond)
	}
}

// Eventually fails the test unless cond returns nil within the time
// given; the message is cond's last error.
func Eventually(t testing.TB, within time.Duration, cond func() error) {
	t.Helper()
	if err := Poll(within, cond); err != nil {
		t.Fatalf("after %v: %v", within, err)
	}
}

// WaitUntil fails the test unless cond holds within 10 s; what says what
// was awaited.
func WaitUntil(t testing.TB, what string, cond func() bool) {
	t.Helper()
	Eventually(t, 10*time.Second, func() error {
		if !cond() {
			return fmt.Errorf("timed out waiting for %s", what)
		}
		return nil
	})
}

// Async runs f in a goroutine and returns a channel with its result.
func Async[T any](f func() T) <-chan T {
	ch := make(chan T, 1)
	go func() { ch <- f() }()
	return ch
}

// Recv returns what ch delivers, failing the test if it has not within
// 10 s; what names it in the failure.
func Recv[T any](t testing.TB, ch <-chan T, what string) T {
	t.Helper()
	select {
	case v := <-ch:
		return v
	case <-time.After(10 * time.Second):
		t.Fatalf("%s did not return", what)
		panic("unreachable")
	}
}

// NoLeaks fails the test unless, within 10 s of its end, read reports no
// flusher goroutine running and as many pooled chunks out as when NoLeaks
// was called: what a write-behind connection must give back once closed.
func NoLeaks(t testing.TB, read func() (flushers, chunksOut int64)) {
	t.Helper()
	_, chunks := read()
	t.Cleanup(func() {
		t.Helper()
		if err := Poll(10*time.Second, func() error {
			if n, c := read(); n != 0 || c != chunks {
				return fmt.Errorf("leak: %d flushers running, %d chunks out (want 0, %d)", n, c, chunks)
			}
			return nil
		}); err != nil {
			t.Error(err)
		}
	})
}
