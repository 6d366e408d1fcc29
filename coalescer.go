package h2file

import (
	"errors"
	"fmt"
	"io"
)

// fileBody is the content of one response, read for http.ServeContent:
// from memory, or with ReadAt from a file that other requests may read at
// the same time. It knows the size the response announces, so a file that
// shrinks while it is sent shows as truncated instead of as a short body.
type fileBody struct {
	data []byte      // whole content, for a file held in memory
	file io.ReaderAt // otherwise read from here
	size int64       // bytes announced
	off  int64

	// truncated is set when the file gave fewer bytes than announced.
	truncated bool
}

// errTruncated is returned by fileBody when the file ends early.
var errTruncated = errors.New("file shrank or failed while it was being sent")

// Read reads the next bytes of the body.
func (b *fileBody) Read(p []byte) (int, error) {
	if b.off >= b.size {
		return 0, io.EOF
	}
	if rem := b.size - b.off; int64(len(p)) > rem {
		p = p[:rem]
	}
	if b.data != nil {
		n := copy(p, b.data[b.off:])
		b.off += int64(n)
		return n, nil
	}
	n, err := b.file.ReadAt(p, b.off)
	b.off += int64(n)
	if n < len(p) {
		b.truncated = true
		return n, fmt.Errorf("%w: read %d of %d bytes at offset %d: %v", errTruncated, n, len(p), b.off-int64(n), err)
	}
	return n, nil
}

// Seek sets the offset of the next Read, as io.Seeker describes.
func (b *fileBody) Seek(offset int64, whence int) (int64, error) {
	switch whence {
	case io.SeekStart:
	case io.SeekCurrent:
		offset += b.off
	case io.SeekEnd:
		offset += b.size
	default:
		return 0, errors.New("fileBody.Seek: invalid whence")
	}
	if offset < 0 {
		return 0, errors.New("fileBody.Seek: negative position")
	}
	b.off = offset
	return offset, nil
}
