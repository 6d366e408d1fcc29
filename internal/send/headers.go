package send

import (
	"io/fs"
	"net/http"
	"strconv"
	"time"
)

// HeaderValues holds the values of the header fields a response
// of ServeHTTP sets, so that their one-element slices take one allocation
// instead of one each. A field's slice is capped at its element: a later
// append (an Add by another handler) copies instead of overwriting the
// next field's value.
type HeaderValues [7]string

// The fields' places in HeaderValues.
const (
	VaryValue = iota
	ETagValue
	ContentTypeValue
	AcceptRangesValue
	LastModifiedValue
	ContentLengthValue
	ContentEncodingValue
)

// SetHeaderValue is h.Set(key, value) for a canonical key, with the slice
// in vals[i].
func SetHeaderValue(h http.Header, key, value string, vals *HeaderValues, i int) {
	vals[i] = value
	h[key] = vals[i : i+1 : i+1]
}

// AddHeaderValue is h.Add(key, value) for a canonical key: a new field
// takes its slice from vals[i]; values already there get value appended.
func AddHeaderValue(h http.Header, key, value string, vals *HeaderValues, i int) {
	if old, ok := h[key]; ok {
		h[key] = append(old, value)
		return
	}
	SetHeaderValue(h, key, value, vals, i)
}

// KnownHeaders are the Last-Modified and Content-Length values of a
// file, made once per cache entry instead of once per response. ok is
// false when there are none; modtime and size say what they describe.
type KnownHeaders struct {
	ok            bool
	modtime       time.Time
	size          int64
	lastModified  string // "" when the modification time is not sent
	contentLength string
}

// ContentLength is the Content-Length value of size bytes: k's when it
// describes that size, else made.
func (k KnownHeaders) ContentLength(size int64) string {
	if k.ok && k.size == size && k.contentLength != "" {
		return k.contentLength
	}
	return strconv.FormatInt(size, 10)
}

// KnownHeadersFor makes the values a response for a file with info sends
// (see ValidatorModTime).
func KnownHeadersFor(info fs.FileInfo) KnownHeaders {
	modtime := ValidatorModTime(info.ModTime())
	return formatHeaderValues(modtime, info.Size(), !isZeroTime(modtime), true)
}

// UsefulModTime reports whether a modification time is worth sending as a
// validator; the Unix epoch and one second after it are placeholders
// written by build tools (caddy#5548, caddy#7730).
func UsefulModTime(modTime time.Time) bool {
	unix := modTime.Unix()
	return unix != 0 && unix != 1
}

// ValidatorModTime is the time given to the Range and conditional request
// logic: the zero time (no Last-Modified) when the real one is not useful.
func ValidatorModTime(modTime time.Time) time.Time {
	if !UsefulModTime(modTime) {
		return time.Time{}
	}
	return modTime
}

// SetContentType sets Content-Type to mimeType unless a handler before set
// one. An unknown type ("") gets no Content-Type at all: the header is kept
// as nil so that the standard library does not sniff one.
func SetContentType(header http.Header, mimeType string, vals *HeaderValues) {
	if header.Get("Content-Type") != "" {
		return
	}
	if mimeType != "" {
		SetHeaderValue(header, "Content-Type", mimeType, vals, ContentTypeValue)
	} else {
		header["Content-Type"] = nil
	}
}
