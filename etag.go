package h2file

import (
	"bytes"
	"errors"
	"fmt"
	"io/fs"
	"mime"
	"net/http"
	"path/filepath"
	"strconv"
	"time"
)

// fileMeta is what a response for a regular file needs besides its bytes,
// computed once per version of the file: the open-file cache keeps it with
// the file's entry (see describeFile).
type fileMeta struct {
	etag        string // file_server's ETag; "" without a useful mtime
	contentType string // by extension; "" if unknown
	// headerValues are its Last-Modified and Content-Length values
	headerValues entryHeaderValues
}

// describeFile makes the metadata of the regular file name, as info
// describes it: the open-file cache's Describe hook.
func describeFile(name string, info fs.FileInfo) fileMeta {
	return fileMeta{
		etag:         calculateEtag(info),
		contentType:  mime.TypeByExtension(filepath.Ext(name)),
		headerValues: headerValuesFor(info),
	}
}

// usefulModTime reports whether a modification time is worth sending as a
// validator; the Unix epoch and one second after it are placeholders
// written by build tools (caddy#5548, caddy#7730).
func usefulModTime(modTime time.Time) bool {
	unix := modTime.Unix()
	return unix != 0 && unix != 1
}

// validatorModTime is the time given to the Range and conditional request
// logic: the zero time (no Last-Modified) when the real one is not useful.
func validatorModTime(modTime time.Time) time.Time {
	if !usefulModTime(modTime) {
		return time.Time{}
	}
	return modTime
}

// calculateEtag computes file_server's strong ETag from the modification
// time and size, both in base 36: "<mtime ns>-<size>". It returns "" when
// the modification time is not useful.
func calculateEtag(info fs.FileInfo) string {
	mtime := info.ModTime()
	if !usefulModTime(mtime) {
		return ""
	}
	b := make([]byte, 0, 32)
	b = append(b, '"')
	b = strconv.AppendInt(b, mtime.UnixNano(), 36)
	b = append(b, '-')
	b = strconv.AppendInt(b, info.Size(), 36)
	b = append(b, '"')
	return string(b)
}

// etagFromFile reads the ETag of filename from the first sidecar file with
// one of the configured extensions, without newlines; "" if there is none.
func (h *Handler) etagFromFile(fileSystem fs.FS, filename string) (string, error) {
	for _, suffix := range h.EtagFileExtensions {
		etagFilename := filename + suffix
		etag, err := fs.ReadFile(fileSystem, etagFilename)
		if errors.Is(err, fs.ErrNotExist) {
			continue
		}
		if err != nil {
			return "", fmt.Errorf("cannot read etag from file %s: %v", etagFilename, err)
		}
		return string(bytes.ReplaceAll(etag, []byte("\n"), nil)), nil
	}
	return "", nil
}

// setContentType sets Content-Type to mimeType unless a handler before set
// one. An unknown type ("") gets no Content-Type at all: the header is kept
// as nil so that the standard library does not sniff one.
func setContentType(header http.Header, mimeType string, vals *responseHeaderValues) {
	if header.Get("Content-Type") != "" {
		return
	}
	if mimeType != "" {
		setHeaderValue(header, "Content-Type", mimeType, vals, contentTypeValue)
	} else {
		header["Content-Type"] = nil
	}
}
