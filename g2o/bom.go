package g2o

import (
	"bytes"
	"io"
)

// utf8BOM is the UTF-8 encoding of U+FEFF, the byte-order mark some
// Windows editors put at the start of a text file.
var utf8BOM = [3]byte{0xef, 0xbb, 0xbf}

// skipBOM returns a reader of r's bytes without a leading UTF-8 byte-order
// mark, so that a file saved with one reads as the same file without it
// (its first record would otherwise start with invisible bytes and be an
// unknown record type). Read, ReadVertices and ReadTUM call it at their
// entry, before any parsing. A seekable r (a file) is returned itself,
// positioned after the mark or back at its start; anything else is
// replayed from the bytes already read.
func skipBOM(r io.Reader) io.Reader {
	var head [3]byte
	if s, ok := r.(io.ReadSeeker); ok {
		if start, err := s.Seek(0, io.SeekCurrent); err == nil {
			n, _ := io.ReadFull(s, head[:])
			if n == len(head) && head == utf8BOM {
				return r
			}
			if _, err := s.Seek(start, io.SeekStart); err == nil {
				return r
			}
			return io.MultiReader(bytes.NewReader(head[:n]), r)
		}
	}
	n, _ := io.ReadFull(r, head[:])
	if n == len(head) && head == utf8BOM {
		return r
	}
	// A read error other than the end of the input recurs on the next read
	// of r, after the bytes replayed.
	return io.MultiReader(bytes.NewReader(head[:n]), r)
}
