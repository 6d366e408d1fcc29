package attack

import (
	"fmt"
	"strings"
	"testing"
	"time"

	"github.com/h2file/caddy-h2file/internal/harness/attacker"
)

// engineWrappers is h2file's engine configuration: coalesce below tls,
// the engine after it.
var engineWrappers = []any{map[string]any{"wrapper": "coalesce"}, map[string]any{"wrapper": "tls"}, map[string]any{"wrapper": "h2_engine"}}

// TestAttackTable runs every attack of the HTTP/2 checklist (issue 20)
// against stock Caddy (file_server, Go's HTTP/2 server, no wrappers) and
// against h2_file_server behind h2file's engine, each in a Caddy process
// of its own, for attackTime each, with a legitimate client served
// throughout, and logs the table. It fails if the engine did not serve
// the legitimate client throughout, did not end with GOAWAY
// (ENHANCE_YOUR_CALM) an attack it must cut, or grew more than stock
// did plus slackKiB (twice in a row).
func TestAttackTable(t *testing.T) {
	bin := caddyToAttack(t)
	st := newSite(t)
	small, large := st.small.Path, st.large.Path
	// cut: the engine must send GOAWAY ENHANCE_YOUR_CALM (its flood
	// defence, or the handler queue). Trailers with a pseudo-header are
	// cut by both servers with PROTOCOL_ERROR instead (the trailers come
	// after the response ended the stream: HEADERS on a closed stream);
	// DATA past the window, whose frames each break the connection's
	// window once the first body fills it, may be cut either way.
	scenarios := []struct {
		attack attacker.Attack
		path   string
		cut    bool
	}{
		{attacker.RapidReset(), small, true},
		{attacker.DataAfterEndStream(), small, true},
		{attacker.PseudoHeaderTrailer(), small, false},
		{attacker.DataPastWindow(1 << 20), small, false},
		{attacker.ContinuationFlood(), small, true},
		{attacker.HeaderListFlood(), small, false},
		{attacker.PingFlood(), small, true},
		{attacker.SettingsFlood(), small, true},
		{attacker.EmptyDataFlood(), small, true},
		{attacker.ResetFlood(), small, true},
		{attacker.PriorityFlood(), small, true},
		{attacker.PriorityUpdateFlood(), small, true},
		{attacker.UnknownFrameFlood(), small, true},
		{attacker.WindowDribble(), large, true},
		{attacker.TooManyStreams(), large, true},
		{attacker.ZeroWindow(4, 250), large, false},
		{attacker.NeverRead(1, 200), large, false},
	}
	stock := served{name: "stock", handler: fileServer, reference: true}
	engine := served{name: "engine", handler: h2FileServer, wrappers: engineWrappers}
	var table []string
	for _, sc := range scenarios {
		t.Run(sc.attack.Name, func(t *testing.T) {
			run := func(addr string) (*attacker.Stats, error) { return attacker.Run(addr, sc.path, sc.attack, attackTime) }
			var ref, m measured
			var problem string
			for try := 1; try <= 2; try++ {
				ref, m = measure(t, bin, st, stock, run), measure(t, bin, st, engine, run)
				t.Logf("try %d\n\tstock:  %v\n\tengine: %v", try, ref, m)
				if problem = compare(ref, m); problem == "" {
					break
				}
				t.Logf("engine: %s", problem)
			}
			if problem != "" {
				t.Errorf("engine, twice: %s", problem)
			}
			if sc.cut && m.stats.Calm.Load() == 0 {
				t.Errorf("the engine did not end the attack with GOAWAY ENHANCE_YOUR_CALM: %v", m.stats)
			}
			table = append(table, fmt.Sprintf("| %s | %s | %s |", sc.attack.Name, tableCell(ref), tableCell(m)))
		})
	}
	t.Logf("attack | stock Caddy | h2file engine\n|---|---|---|\n%s", strings.Join(table, "\n"))
}

// tableCell sums up one server under one attack: what it did to the
// attacker, how much it grew, and the legitimate client's request times.
func tableCell(m measured) string {
	median, most := m.legitLatency()
	what := m.stats.CutText()
	if n := m.stats.Calm.Load(); n > 0 {
		what = fmt.Sprintf("%d GOAWAY ENHANCE_YOUR_CALM, %s", n, what)
	}
	legit := fmt.Sprintf("legit %d ok, median %v, max %v", m.legitOK, median.Round(100*time.Microsecond), most.Round(100*time.Microsecond))
	if m.legitFailed > 0 {
		legit += fmt.Sprintf(", %d FAILED", m.legitFailed)
	}
	return fmt.Sprintf("%s; RSS +%.1f MiB; %s", what, mib(m.growthKiB()), legit)
}
