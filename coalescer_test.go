package h2file

// The coalesce listener wrapper's configuration (coalescer.go): Caddyfile,
// adapted JSON, provisioning, metrics. Caddy serving through the wrapper
// is tested in listener_caddy_test.go.

import (
	"context"
	"encoding/json"
	"io"
	"net"
	"strings"
	"testing"
	"time"

	"github.com/caddyserver/caddy/v2"
	"github.com/caddyserver/caddy/v2/caddyconfig"
	"github.com/caddyserver/caddy/v2/caddyconfig/caddyfile"

	"github.com/h2file/caddy-h2file/internal/coalesce"
	"github.com/h2file/caddy-h2file/internal/coalesce/coalescetest"
	"github.com/h2file/caddy-h2file/internal/harness"

	_ "github.com/caddyserver/caddy/v2/modules/standard"
)

func TestListenerCaddyfile(t *testing.T) {
	for _, tc := range []struct {
		input string
		want  CoalesceWrapper
		err   string // part of the error, if one is expected
	}{
		{input: `coalesce`},
		{input: `coalesce {
		}`},
		{input: `coalesce {
			max_pending 32KiB
			max_total 16MiB
			close_timeout 2s
		}`, want: CoalesceWrapper{MaxPending: 32 << 10, MaxTotal: 16 << 20, CloseTimeout: caddy.Duration(2 * time.Second)}},
		{input: `coalesce {
			max_pending 100000
		}`, want: CoalesceWrapper{MaxPending: 100000}},
		{input: `coalesce {
			close_timeout 1d
		}`, want: CoalesceWrapper{CloseTimeout: caddy.Duration(24 * time.Hour)}},

		{input: `coalesce extra`, err: "wrong argument count"},
		{input: `coalesce {
			max_pending
		}`, err: "wrong argument count"},
		{input: `coalesce {
			max_pending 1KiB 2KiB
		}`, err: "wrong argument count"},
		{input: `coalesce {
			max_pending 1KiB
			max_pending 2KiB
		}`, err: "max_pending already specified"},
		{input: `coalesce {
			max_total 1MiB
			max_total 2MiB
		}`, err: "max_total already specified"},
		{input: `coalesce {
			close_timeout 1s
			close_timeout 2s
		}`, err: "close_timeout already specified"},
		{input: `coalesce {
			max_pending lots
		}`, err: "bad max_pending 'lots': not a byte size such as 4096, 64KiB or 1MB, from 1 byte to 1GiB (leave it out for the default, 64 KiB"},
		{input: `coalesce {
			max_total 0
		}`, err: "max_total out of range: 0 (must be between 1 byte and 1TiB), leave it out for the default (64 MiB)"},
		{input: `coalesce {
			close_timeout
		}`, err: "wrong argument count"},
		{input: `coalesce {
			close_timeout 1s 2s
		}`, err: "wrong argument count"},
		{input: `coalesce {
			close_timeout soon
		}`, err: "bad close_timeout 'soon': must be a duration longer than 0, such as 500ms, 5s or 1m (leave it out for the default, 5s)"},
		{input: `coalesce {
			close_timeout -1s
		}`, err: "bad close_timeout '-1s': must be a duration longer than 0"},
		{input: `coalesce {
			max_pendingg 1KiB
		}`, err: "unrecognized subdirective 'max_pendingg' (accepted: max_pending, max_total, close_timeout)"},
	} {
		var got CoalesceWrapper
		err := got.UnmarshalCaddyfile(caddyfile.NewTestDispenser(tc.input))
		switch {
		case tc.err == "" && err != nil:
			t.Errorf("%s: %v", tc.input, err)
		case tc.err != "" && (err == nil || !strings.Contains(err.Error(), tc.err)):
			t.Errorf("%s: error %v, want one with %q", tc.input, err, tc.err)
		case tc.err == "" && got != tc.want:
			t.Errorf("%s: got %+v, want %+v", tc.input, got, tc.want)
		}
	}
}

// The wrapper in the servers global option, before and after tls.
func TestListenerCaddyfileAdapt(t *testing.T) {
	const input = `{
	servers {
		listener_wrappers {
			coalesce {
				max_pending 32KiB
			}
			tls
			coalesce
		}
	}
}

localhost:8443 {
	respond "hi"
}
`
	out, _, err := caddyconfig.GetAdapter("caddyfile").Adapt([]byte(input), nil)
	if err != nil {
		t.Fatal(err)
	}
	var cfg struct {
		Apps struct {
			HTTP struct {
				Servers map[string]struct {
					ListenerWrappers []map[string]any `json:"listener_wrappers"`
				} `json:"servers"`
			} `json:"http"`
		} `json:"apps"`
	}
	if err := json.Unmarshal(out, &cfg); err != nil {
		t.Fatal(err)
	}
	if len(cfg.Apps.HTTP.Servers) != 1 {
		t.Fatalf("servers: %s", out)
	}
	for _, srv := range cfg.Apps.HTTP.Servers {
		got, _ := json.Marshal(srv.ListenerWrappers)
		want := `[{"max_pending":32768,"wrapper":"coalesce"},{"wrapper":"tls"},{"wrapper":"coalesce"}]`
		if string(got) != want {
			t.Fatalf("listener_wrappers = %s, want %s", got, want)
		}
	}

	_, _, err = caddyconfig.GetAdapter("caddyfile").Adapt([]byte(strings.Replace(input, "max_pending", "max_pendin", 1)), nil)
	if err == nil || !strings.Contains(err.Error(), "unrecognized subdirective 'max_pendin'") {
		t.Fatalf("typo adapted: %v", err)
	}
}

func TestListenerProvision(t *testing.T) {
	for _, tc := range []struct {
		json string
		want CoalesceWrapper
		err  string
	}{
		{json: `{}`, want: CoalesceWrapper{MaxPending: 64 << 10, MaxTotal: 64 << 20, CloseTimeout: caddy.Duration(5 * time.Second)}},
		{json: `{"max_pending": 8192, "max_total": 1048576, "close_timeout": "250ms"}`,
			want: CoalesceWrapper{MaxPending: 8192, MaxTotal: 1 << 20, CloseTimeout: caddy.Duration(250 * time.Millisecond)}},
		{json: `{"max_pending": 134217728}`, want: CoalesceWrapper{MaxPending: 128 << 20, MaxTotal: 128 << 20, CloseTimeout: caddy.Duration(5 * time.Second)}},
		{json: `{"max_pending": -1}`, err: "max_pending must be from 1 to 1073741824 bytes (1 GiB), or 0 for the default (64 KiB"},
		{json: `{"max_pending": 2147483648}`, err: "max_pending must be from 1 to 1073741824 bytes (1 GiB), or 0 for the default (64 KiB"},
		{json: `{"max_total": -5}`, err: "max_total must be from 1 to 1099511627776 bytes (1 TiB), or 0 for the default (64 MiB): -5"},
		{json: `{"max_pending": 65536, "max_total": 1000}`, err: "must be at least max_pending"},
		{json: `{"close_timeout": "-1s"}`, err: "close_timeout must be a duration longer than 0, such as 5s, or 0 for the default (5s): -1s"},
	} {
		var w CoalesceWrapper
		if err := json.Unmarshal([]byte(tc.json), &w); err != nil {
			t.Fatal(err)
		}
		ctx, cancel := caddy.NewContext(caddy.Context{Context: context.Background()})
		err := w.Provision(ctx)
		if err == nil {
			err = w.Validate()
		}
		cancel()
		switch {
		case tc.err == "" && err != nil:
			t.Errorf("%s: %v", tc.json, err)
		case tc.err != "" && (err == nil || !strings.Contains(err.Error(), tc.err)):
			t.Errorf("%s: error %v, want one with %q", tc.json, err, tc.err)
		case tc.err == "":
			got := CoalesceWrapper{MaxPending: w.MaxPending, MaxTotal: w.MaxTotal, CloseTimeout: w.CloseTimeout}
			if got != tc.want {
				t.Errorf("%s: got %+v, want %+v", tc.json, got, tc.want)
			}
			if w.limits.MaxPending() != int(w.MaxPending) || w.limits.MaxTotal() != w.MaxTotal/coalesce.ChunkSize*coalesce.ChunkSize ||
				w.limits.CloseTimeout() != time.Duration(w.CloseTimeout) {
				t.Errorf("%s: limits %+v", tc.json, w.limits)
			}
		}
	}
}

// The metrics are registered in the config's registry (twice is fine)
// and count socket writes, bytes and the writes saved.
func TestListenerMetrics(t *testing.T) {
	coalescetest.NoLeaks(t)
	ctx, cancel := caddy.NewContext(caddy.Context{Context: context.Background()})
	defer cancel()
	var w, w2 CoalesceWrapper
	if err := w.Provision(ctx); err != nil {
		t.Fatal(err)
	}
	if err := w2.Provision(ctx); err != nil {
		t.Fatalf("second Provision: %v", err)
	}
	reg := ctx.GetMetricsRegistry()
	before := harness.Gather(t, reg, "caddy_h2file_coalesce_")
	for _, name := range []string{"batches_total", "bytes_total", "writes_coalesced_total", "backpressure_waits_total", "buffer_bytes"} {
		if _, ok := before["caddy_h2file_coalesce_"+name]; !ok {
			t.Errorf("metric caddy_h2file_coalesce_%s not registered", name)
		}
	}

	ln, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		t.Fatal(err)
	}
	wln := w.WrapListener(ln)
	defer wln.Close()
	client, err := net.Dial("tcp", ln.Addr().String())
	if err != nil {
		t.Fatal(err)
	}
	defer client.Close()
	conn, err := wln.Accept()
	if err != nil {
		t.Fatal(err)
	}
	read := harness.Async(func() []byte { b, _ := io.ReadAll(client); return b })
	const writes, size = 2000, 100
	for range writes {
		if _, err := conn.Write(make([]byte, size)); err != nil {
			t.Fatal(err)
		}
	}
	conn.Close()
	if got := harness.Recv(t, read, "reader"); len(got) != writes*size {
		t.Fatalf("peer got %d bytes", len(got))
	}
	after := harness.Gather(t, reg, "caddy_h2file_coalesce_")
	delta := func(name string) float64 {
		return after["caddy_h2file_coalesce_"+name] - before["caddy_h2file_coalesce_"+name]
	}
	batches, bytes, saved := delta("batches_total"), delta("bytes_total"), delta("writes_coalesced_total")
	t.Logf("%d writes: %v socket writes, %v saved, %v bytes", writes, batches, saved, bytes)
	// a Write split across two batches counts in both
	if bytes != writes*size || batches < 1 || batches > writes || batches+saved < writes || batches+saved > writes+batches {
		t.Errorf("batches %v, saved %v for %d writes; bytes %v, want %d", batches, saved, writes, bytes, writes*size)
	}
}

// Only the default max_pending is elastic; one set explicitly is a hard
// limit.
func TestCoalesceSparePendingOnlyByDefault(t *testing.T) {
	for _, tc := range []struct {
		maxPending      int64
		wantMax, wantSp int
	}{
		{0, coalesce.DefaultMaxPending, coalesce.DefaultSparePending},
		{coalesce.DefaultMaxPending, coalesce.DefaultMaxPending, 0},
		{32 << 10, 32 << 10, 0},
	} {
		w := &CoalesceWrapper{MaxPending: tc.maxPending}
		ctx, cancel := caddy.NewContext(caddy.Context{Context: context.Background()})
		err := w.Provision(ctx)
		cancel()
		if err != nil {
			t.Fatal(err)
		}
		if w.limits.MaxPending() != tc.wantMax || w.limits.SparePending() != tc.wantSp {
			t.Errorf("max_pending %d: limits %d, spare %d; want %d, %d", tc.maxPending, w.limits.MaxPending(), w.limits.SparePending(), tc.wantMax, tc.wantSp)
		}
	}
}
