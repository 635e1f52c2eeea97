package g2o

import (
	"bufio"
	"errors"
	"fmt"
	"io"
	"math"
	"strconv"
	"strings"
)

// errStopLines ends eachDataLine early without an error.
var errStopLines = errors.New("stop")

// eachDataLine calls fn with the 1-based number and the fields of every
// line of r that is not blank or a '#' comment (a '#' starts a comment to
// the end of its line; CRLF and any mix of spaces and tabs are fine), the
// lines of the plain-text trajectory formats (TUM, KITTI). It stops at the
// first error fn returns, which it returns, unless that is errStopLines.
// A line longer than MaxLineLength is a *ParseError.
func eachDataLine(r io.Reader, name string, fn func(line int, fields []string) error) error {
	br := bufio.NewReaderSize(r, MaxLineLength)
	for line := 1; ; line++ {
		raw, err := br.ReadSlice('\n')
		if errors.Is(err, bufio.ErrBufferFull) {
			return &ParseError{File: name, Line: line, Msg: fmt.Sprintf("line longer than %d bytes", MaxLineLength)}
		}
		if err != nil && err != io.EOF {
			return fmt.Errorf("%s: %w", name, err)
		}
		s := string(raw)
		if k := strings.IndexByte(s, '#'); k >= 0 {
			s = s[:k]
		}
		if fields := strings.Fields(s); len(fields) > 0 {
			if ferr := fn(line, fields); ferr != nil {
				if ferr == errStopLines {
					return nil
				}
				return ferr
			}
		}
		if err == io.EOF {
			return nil
		}
	}
}

// parseFinite parses fields into dst (as many as fields) as finite
// numbers; a field that is not one is a *ParseError naming the field.
func parseFinite(dst []float64, fields []string, name string, line int) error {
	for k, f := range fields {
		x, err := strconv.ParseFloat(f, 64)
		if err != nil && !errors.Is(err, strconv.ErrRange) {
			return &ParseError{File: name, Line: line, Msg: fmt.Sprintf("field %d (%s) is not a number", k+1, printable(f))}
		}
		if err != nil || math.IsNaN(x) || math.IsInf(x, 0) {
			return &ParseError{File: name, Line: line, Msg: fmt.Sprintf("field %d (%s) is not a finite number", k+1, printable(f))}
		}
		dst[k] = x
	}
	return nil
}
