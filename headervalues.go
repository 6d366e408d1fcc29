package h2file

import (
	"io/fs"
	"net/http"
	"time"
)

// responseHeaderValues holds the values of the header fields a response
// of ServeHTTP sets, so that their one-element slices take one allocation
// instead of one each. A field's slice is capped at its element: a later
// append (an Add by another handler) copies instead of overwriting the
// next field's value.
type responseHeaderValues [6]string

// The fields' places in responseHeaderValues.
const (
	varyValue = iota
	etagValue
	contentTypeValue
	acceptRangesValue
	lastModifiedValue
	contentLengthValue
)

// setHeaderValue is h.Set(key, value) for a canonical key, with the slice
// in vals[i].
func setHeaderValue(h http.Header, key, value string, vals *responseHeaderValues, i int) {
	vals[i] = value
	h[key] = vals[i : i+1 : i+1]
}

// addHeaderValue is h.Add(key, value) for a canonical key: a new field
// takes its slice from vals[i]; values already there get value appended.
func addHeaderValue(h http.Header, key, value string, vals *responseHeaderValues, i int) {
	if old, ok := h[key]; ok {
		h[key] = append(old, value)
		return
	}
	setHeaderValue(h, key, value, vals, i)
}

// entryHeaderValues are the Last-Modified and Content-Length values of a
// file, made once per cache entry instead of once per response. ok is
// false when there are none; modtime and size say what they describe.
type entryHeaderValues struct {
	ok            bool
	modtime       time.Time
	size          int64
	lastModified  string // "" when the modification time is not sent
	contentLength string
}

// headerValuesFor makes the values a response for a file with info sends
// (see validatorModTime).
func headerValuesFor(info fs.FileInfo) entryHeaderValues {
	modtime := validatorModTime(info.ModTime())
	return formatHeaderValues(modtime, info.Size(), !isZeroTime(modtime), true)
}
