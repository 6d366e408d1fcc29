package harness

import "net/http/httptest"

// WriteSizeRecorder is a ResponseRecorder that records the size of every
// Write.
type WriteSizeRecorder struct {
	*httptest.ResponseRecorder
	Sizes []int
}

// NewWriteSizeRecorder returns an empty recorder.
func NewWriteSizeRecorder() *WriteSizeRecorder {
	return &WriteSizeRecorder{ResponseRecorder: httptest.NewRecorder()}
}

// Write records len(p) and writes p.
func (w *WriteSizeRecorder) Write(p []byte) (int, error) {
	w.Sizes = append(w.Sizes, len(p))
	return w.ResponseRecorder.Write(p)
}
