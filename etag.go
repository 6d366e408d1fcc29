package h2file

import (
	"bytes"
	"errors"
	"fmt"
	"io/fs"
	"mime"
	"path/filepath"
	"strconv"

	"github.com/h2file/caddy-h2file/internal/send"
)

// fileMeta is what a response for a regular file needs besides its bytes,
// computed once per version of the file: the open-file cache keeps it with
// the file's entry (see describeFile).
type fileMeta struct {
	etag        string // file_server's ETag; "" without a useful mtime
	contentType string // by extension; "" if unknown
	// headerValues are its Last-Modified and Content-Length values
	headerValues send.KnownHeaders
}

// describeFile makes the metadata of the regular file name, as info
// describes it: the open-file cache's Describe hook.
func describeFile(name string, info fs.FileInfo) fileMeta {
	return fileMeta{
		etag:         calculateEtag(info),
		contentType:  mime.TypeByExtension(filepath.Ext(name)),
		headerValues: send.KnownHeadersFor(info),
	}
}

// calculateEtag computes file_server's strong ETag from the modification
// time and size, both in base 36: "<mtime ns>-<size>". It returns "" when
// the modification time is not useful.
func calculateEtag(info fs.FileInfo) string {
	mtime := info.ModTime()
	if !send.UsefulModTime(mtime) {
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
