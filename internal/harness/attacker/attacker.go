// Package attacker runs known attacks against an HTTP server, frame by
// frame (HTTP/2) or byte by byte (HTTP/1.1) over TLS, for tests that hold
// the server's memory and its service to a legitimate client up against
// them. Only tests import it.
package attacker

import (
	"context"
	"errors"
	"fmt"
	"sync"
	"sync/atomic"
	"time"
)

// Attack is one attack: Conns attackers at once, each running until the
// attack ends and opening a new connection whenever the server ends one,
// as an attacker would.
type Attack struct {
	Name  string
	Conns int
	// run attacks the server at addr, each request for path, until ctx
	// is done, counting into st.
	run func(ctx context.Context, addr, path string, st *Stats) error
}

// Stats is what an attack did and saw.
type Stats struct {
	Requests atomic.Int64 // requests (streams) sent
	Frames   atomic.Int64 // frames of a flood sent
	Dials    atomic.Int64 // connections made
	Resets   atomic.Int64 // RST_STREAM frames received
	GoAways  atomic.Int64 // GOAWAY frames received
	Calm     atomic.Int64 // of them, GOAWAY ENHANCE_YOUR_CALM
	Received atomic.Int64 // response bytes received (DATA payloads on HTTP/2)
	// Cut counts the connections the server ended (GOAWAY or close)
	// while the attack went on, and CutNanos their lifetimes, summed.
	Cut, CutNanos atomic.Int64
}

func (s *Stats) String() string {
	return fmt.Sprintf("%d requests and %d flood frames on %d connections; received %d RST_STREAM, %d GOAWAY (%d ENHANCE_YOUR_CALM), %d bytes; %s",
		s.Requests.Load(), s.Frames.Load(), s.Dials.Load(), s.Resets.Load(), s.GoAways.Load(), s.Calm.Load(), s.Received.Load(), s.CutText())
}

// CutText says how many connections the server ended, and after how
// long on average.
func (s *Stats) CutText() string {
	n := s.Cut.Load()
	if n == 0 {
		return "none cut"
	}
	return fmt.Sprintf("%d cut after %v on average", n, (time.Duration(s.CutNanos.Load() / n)).Round(100*time.Microsecond))
}

// Run runs a against the server at addr, each request for path, for d.
// It returns what the attack did; an error only if no connection could
// be made at all.
func Run(addr, path string, a Attack, d time.Duration) (*Stats, error) {
	ctx, cancel := context.WithTimeout(context.Background(), d)
	defer cancel()
	st := new(Stats)
	var wg sync.WaitGroup
	errs := make([]error, a.Conns)
	for i := range a.Conns {
		wg.Go(func() { errs[i] = a.run(ctx, addr, path, st) })
	}
	wg.Wait()
	if st.Dials.Load() == 0 {
		return st, fmt.Errorf("%s: no connection: %w", a.Name, errors.Join(errs...))
	}
	return st, nil
}

// pause waits a little before the next dial, unless ctx ends first.
func pause(ctx context.Context) {
	select {
	case <-ctx.Done():
	case <-time.After(10 * time.Millisecond):
	}
}
