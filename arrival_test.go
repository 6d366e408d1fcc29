package h2file

import (
	"net/http"
	"net/http/httptest"
	"testing"
	"time"
)

// arrivalWriter is a response writer that says when its request arrived,
// as internal/h2's does.
type arrivalWriter struct {
	http.ResponseWriter
	at time.Time
}

func (w arrivalWriter) RequestArrived() time.Time { return w.at }

// unwrappingWriter is a wrapper of Caddy's kind, with Unwrap.
type unwrappingWriter struct{ http.ResponseWriter }

func (w unwrappingWriter) Unwrap() http.ResponseWriter { return w.ResponseWriter }

// TestRequestArrival: the time the engine says, found under wrappers;
// under a server that says nothing (or says zero), the handler's start.
func TestRequestArrival(t *testing.T) {
	at := time.Now().Add(-time.Second)
	engine := arrivalWriter{httptest.NewRecorder(), at}
	if got := requestArrival(unwrappingWriter{unwrappingWriter{engine}}); !got.Equal(at) {
		t.Errorf("under two wrappers: %v; want the engine's %v", got, at)
	}
	for name, w := range map[string]http.ResponseWriter{
		"another server":                 unwrappingWriter{httptest.NewRecorder()},
		"a handle whose handler is done": arrivalWriter{httptest.NewRecorder(), time.Time{}},
	} {
		before := time.Now()
		if got := requestArrival(w); got.Before(before) || got.After(time.Now()) {
			t.Errorf("%s: %v; want now", name, got)
		}
	}
}
