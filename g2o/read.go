package g2o

import (
	"bufio"
	"bytes"
	"errors"
	"fmt"
	"io"
	"io/fs"
	"math"
	"os"
	"slices"
	"strconv"
	"strings"

	"github.com/bcmsync/bcmsync/posegraph"
)

// ReadOptions controls Read.
type ReadOptions struct {
	// Lenient skips records of unsupported or unknown types (landmarks,
	// priors, parameters, ...) instead of failing on the first one. It
	// skips nothing else: a malformed record, or an edge to a vertex that a
	// file with VERTEX lines does not declare, is still an error.
	Lenient bool
	// Warn, if not nil, receives one message per skipped record type, with
	// the number of records skipped, once reading has finished.
	Warn func(msg string)
	// StrictInfo rejects an edge whose full information matrix, cross terms
	// included, is not positive definite. By default such an edge is read
	// (its precisions come from the diagonal blocks alone, which must be
	// positive definite) and Warn gets one summary with the count and the
	// first line: published data sets have such edges (cubicle).
	StrictInfo bool
	// RawQuaternions selects SE-Sync's reading of EDGE_SE3:QUAT records
	// (read_g2o_file): the measured rotation is Eigen's toRotationMatrix of
	// the quaternion as printed, NOT normalized (RotationFromQuatRaw), and
	// the graph is marked RawRotations, so Validate tolerates the resulting
	// O(|q|^2 - 1) loss of orthogonality and Cost reports tr(X Q X^T) as
	// SE-Sync does. The 3-D optima in REFERENCE.tsv are optima of this
	// reading. It is off by default because a measured rotation should be
	// a rotation. VERTEX_SE3:QUAT poses are normalized either way: they are
	// only initial estimates and do not enter the objective. 2-D files are
	// unaffected (their rotations come from an angle, exactly), and their
	// graphs are not marked.
	RawQuaternions bool
}

// ErrUnsupported is the cause (errors.Is) of the *ParseError for a record
// of a type Read does not read, such as a landmark or a prior:
// ReadOptions.Lenient skips such records, and a caller can say so.
var ErrUnsupported = errors.New("unsupported record type")

// ParseError is a problem in an input file, located by file and line.
type ParseError struct {
	File string
	Line int // 1-based; 0 for problems with the file as a whole
	Msg  string
	// Err is the kind of problem, for errors.Is, when it has one
	// (ErrUnsupported); nil otherwise. Error does not print it.
	Err error
}

// Unwrap returns Err.
func (e *ParseError) Unwrap() error { return e.Err }

func (e *ParseError) Error() string {
	f := e.File
	if f == "" {
		f = "<input>"
	}
	if e.Line > 0 {
		return f + ":" + strconv.Itoa(e.Line) + ": " + e.Msg
	}
	return f + ": " + e.Msg
}

// MaxLineLength is the longest line Read accepts, in bytes. The longest
// valid record (EDGE_SE3:QUAT) needs a few hundred.
const MaxLineLength = 1 << 16

// maxID bounds the absolute value of vertex ids, so id ranges cannot
// overflow an int.
const maxID = 1 << 60

// ReadFile reads the g2o or TORO file at path; see Read.
func ReadFile(path string, opts ReadOptions) (*posegraph.Graph, error) {
	f, err := os.Open(path)
	if err != nil {
		return nil, err
	}
	defer f.Close()
	return Read(f, path, opts)
}

// Read parses a pose graph in g2o or TORO format from r. name is used in
// error messages and as the graph's Source. Problems in the input are
// reported as a *ParseError naming the line; see the package documentation
// for the records understood. A leading UTF-8 byte-order mark is skipped.
func Read(r io.Reader, name string, opts ReadOptions) (*posegraph.Graph, error) {
	r = skipBOM(r)
	p := parser{name: name, opts: opts}
	if err := p.scan(r); err != nil {
		return nil, err
	}
	return p.finish()
}

// scan parses every line of r into p. Read and ReadVertices share it, so
// that a trajectory is read by exactly the rules a graph is.
func (p *parser) scan(r io.Reader) error {
	p.left = inputSize(r)
	br := bufio.NewReaderSize(r, MaxLineLength)
	p.src, p.br = r, br
	for {
		raw, err := br.ReadSlice('\n')
		if errors.Is(err, bufio.ErrBufferFull) {
			p.line++
			return p.errorf("line longer than %d bytes", MaxLineLength)
		}
		if len(raw) > 0 {
			p.line++
			p.lineLen = len(raw)
			if perr := p.parseLine(raw); perr != nil {
				return perr
			}
			p.left -= int64(len(raw))
		}
		if err == io.EOF {
			p.edges, p.verts = p.readEdges.all(), p.readVerts.all()
			return nil
		}
		if err != nil {
			return fmt.Errorf("%s: %w", p.fileName(), err)
		}
	}
}

// inputSize is the number of bytes r holds, when it can say (a regular
// file, a bytes.Reader), else -1.
func inputSize(r io.Reader) int64 {
	switch s := r.(type) {
	case interface{ Stat() (fs.FileInfo, error) }:
		if st, err := s.Stat(); err == nil && st.Mode().IsRegular() {
			return st.Size()
		}
	case interface{ Len() int }:
		return int64(s.Len())
	}
	return -1
}

// vertex is a VERTEX record before ids are mapped to indices.
type vertex struct {
	id, line int
	pose     posegraph.Pose
}

type fix struct{ id, line int }

type parser struct {
	name string
	opts ReadOptions
	line int
	// lineLen is the current line's length in bytes, left the bytes from
	// its start to the end of the input (negative when the size is not
	// known): the first edge sizes the edge store from them.
	lineLen int
	left    int64
	src     io.Reader     // the input
	br      *bufio.Reader // and its buffer
	// sized: sizeStores has run; edgesCounted: it sized the edge store.
	sized, edgesCounted bool

	fields [][]byte    // reused field slices of the current line
	rest   []byte      // the current line after its tag
	vals   [30]float64 // numeric fields of the current record
	ids    [2]int      // and its ids, when fastNumbers read it

	d       int    // dimension fixed by the first record, 0 before
	dimLine int    // that record's line
	dimTag  string // and tag

	// Records are collected in chunks while reading, and handed over in
	// one slice each at the end of scan.
	readEdges chunked[posegraph.Edge]
	readVerts chunked[vertex]
	edges     []posegraph.Edge // I, J hold file ids until finish
	verts     []vertex
	fixes     []fix
	slab      []float64 // backing store for Meas and Info, allocated in chunks

	haveID       bool
	minID, maxID int

	skipped      map[string]int
	skippedOrder []string

	// Landmarks (landmarks.go): ids named as landmarks (with the first
	// line doing so), the lines of landmark vertices, and the sensor
	// offsets declared (nil: none).
	landmarks     map[int]int
	landmarkLines map[int]bool
	params        map[int]sensorOffset

	priors []priorRecord // priors.go, pose ids as in the file

	info       lastInfo   // the last edge's information matrix
	toroInfo   [6]float64 // a TORO edge's, in g2o order
	notPD      int        // edges whose full information matrix is not positive definite
	notPDFirst int        // the first one's line
	notPDMsg   string
}

func (p *parser) fileName() string {
	if p.name == "" {
		return "<input>"
	}
	return p.name
}

func (p *parser) errorf(format string, args ...any) *ParseError {
	return &ParseError{File: p.name, Line: p.line, Msg: fmt.Sprintf(format, args...)}
}

// split appends the fields of line, separated by runs of white space (which
// covers tabs and the CR of CRLF line ends), to p.fields.
func (p *parser) split(line []byte) {
	i, n := 0, len(line)
	for {
		for i < n && isSpace[line[i]] {
			i++
		}
		if i == n {
			return
		}
		start := i
		// Every separator is a control byte or the space: most bytes are
		// not, and one comparison says so.
		for i < n && (line[i] > ' ' || !isSpace[line[i]]) {
			i++
		}
		p.fields = append(p.fields, line[start:i])
	}
}

// isSpace marks the bytes that separate fields.
var isSpace = [256]bool{' ': true, '\t': true, '\r': true, '\n': true, '\v': true, '\f': true}

// parseLine parses one line: its tag, then the record. The records that
// make up a file's bulk (poses and edges) are read by fastNumbers straight
// from the text after the tag; every other record, and any of those that
// fastNumbers does not take, is split into p.fields first and read field
// by field.
func (p *parser) parseLine(line []byte) *ParseError {
	if i := bytes.IndexByte(line, '#'); i >= 0 {
		line = line[:i] // a comment
	}
	p.fields = p.fields[:0]
	i, n := 0, len(line)
	for i < n && isSpace[line[i]] {
		i++
	}
	if i == n {
		return nil
	}
	start := i
	for i < n && (line[i] > ' ' || !isSpace[line[i]]) {
		i++
	}
	tag := line[start:i]
	p.fields = append(p.fields, tag)
	p.rest = line[i:]
	switch string(tag) {
	case "VERTEX_SE2", "VERTEX2":
		return p.vertex(2, 3)
	case "VERTEX_SE3:QUAT":
		return p.vertex(3, 7)
	case "EDGE_SE2":
		return p.edge(2, 9, false)
	case "EDGE2":
		return p.edge(2, 9, true)
	case "EDGE_SE3:QUAT":
		return p.edge(3, 28, false)
	}
	p.split(p.rest)
	switch string(tag) {
	case "FIX":
		return p.fix()
	case "VERTEX_XY":
		return p.landmarkVertex(2)
	case "VERTEX_TRACKXYZ":
		return p.landmarkVertex(3)
	case "EDGE_SE2_XY":
		return p.observation(2)
	case "EDGE_SE3_TRACKXYZ":
		return p.observation(3)
	case "PARAMS_SE3OFFSET":
		return p.offsetParams()
	case "EDGE_PRIOR_SE2":
		return p.prior(2, posegraph.PosePrior)
	case "EDGE_PRIOR_SE2_XY":
		return p.prior(2, posegraph.PositionPrior)
	case "EDGE_SE3_PRIOR":
		return p.prior(3, posegraph.PosePrior)
	case "EDGE_SE3_XYZ_PRIOR":
		return p.prior(3, posegraph.PositionPrior)
	}
	return p.unsupported(tag)
}

// unsupported fails on, or in lenient mode counts, a record this package
// does not read.
func (p *parser) unsupported(tag []byte) *ParseError {
	t := string(tag)
	if !p.opts.Lenient {
		err := p.errorf("%s is not supported (%s)", printable(t), unsupportedReason(t))
		err.Err = ErrUnsupported
		return err
	}
	if p.skipped == nil {
		p.skipped = make(map[string]int)
	}
	if _, ok := p.skipped[t]; !ok {
		p.skippedOrder = append(p.skippedOrder, t)
	}
	p.skipped[t]++
	return nil
}

// unsupportedReason says what kind of record an unsupported tag is.
func unsupportedReason(tag string) string {
	switch {
	case strings.Contains(tag, "PRIOR"):
		return "this kind of prior; pose and position priors are read as EDGE_PRIOR_SE2 / EDGE_PRIOR_SE2_XY and EDGE_SE3_PRIOR / EDGE_SE3_XYZ_PRIOR"
	case strings.HasPrefix(tag, "PARAMS") || strings.Contains(tag, "OFFSET") || strings.HasPrefix(tag, "CACHE"):
		return "sensor parameters and offsets"
	case tag == "VERTEX3" || tag == "EDGE3":
		return "TORO 3-D records; use g2o VERTEX_SE3:QUAT / EDGE_SE3:QUAT"
	case strings.Contains(tag, "_XY") || strings.Contains(tag, "XYZ") || strings.Contains(tag, "POINT") ||
		strings.Contains(tag, "LANDMARK") || strings.Contains(tag, "BEARING"):
		return "this kind of landmark record; position landmarks are read as VERTEX_XY / EDGE_SE2_XY and VERTEX_TRACKXYZ / EDGE_SE3_TRACKXYZ"
	case tag == "VERTEX_SE3" || tag == "EDGE_SE3" || strings.Contains(tag, "EULER"):
		return "use VERTEX_SE3:QUAT / EDGE_SE3:QUAT"
	}
	return "unknown record type; expected VERTEX_SE2, EDGE_SE2, VERTEX_SE3:QUAT, EDGE_SE3:QUAT, VERTEX2, EDGE2, FIX, " +
		"VERTEX_XY, EDGE_SE2_XY, VERTEX_TRACKXYZ, EDGE_SE3_TRACKXYZ, PARAMS_SE3OFFSET, " +
		"EDGE_PRIOR_SE2, EDGE_PRIOR_SE2_XY, EDGE_SE3_PRIOR or EDGE_SE3_XYZ_PRIOR"
}

// printable quotes a token that would garble a message and shortens long ones.
func printable(s string) string {
	const max = 40
	short := s
	if len(short) > max {
		short = short[:max] + "..."
	}
	for _, c := range short {
		if c < 0x21 || c > 0x7e {
			return strconv.Quote(short)
		}
	}
	return short
}

// setDim fixes the file's dimension on its first record and rejects records
// of the other one.
func (p *parser) setDim(d int) *ParseError {
	if p.d == 0 {
		p.d, p.dimLine, p.dimTag = d, p.line, string(p.fields[0])
		return nil
	}
	if p.d != d {
		return p.errorf("%s is a %d-D record but line %d has a %d-D one (%s); a file holds one dimension",
			printable(string(p.fields[0])), d, p.dimLine, p.d, p.dimTag)
	}
	return nil
}

// count checks the number of fields: the tag, ids, then nv numbers.
func (p *parser) count(ids, nv int) *ParseError {
	want := ids + nv
	if got := len(p.fields) - 1; got != want {
		few := "too few"
		if got > want {
			few = "too many"
		}
		return p.errorf("%s fields: %s needs %d after the tag (%d ids and %d numbers), found %d",
			few, string(p.fields[0]), want, ids, nv, got)
	}
	return nil
}

// idRecord reads a record of one id and nv numbers (a vertex, a landmark,
// a parameter block): it checks the field count, returns the id and leaves
// the numbers in p.vals.
func (p *parser) idRecord(nv int) (int, *ParseError) {
	if len(p.fields) == 1 { // not split yet
		if p.fastNumbers(1, nv) {
			return p.ids[0], nil
		}
		p.split(p.rest)
	}
	if err := p.count(1, nv); err != nil {
		return 0, err
	}
	id, err := p.parseID(1)
	if err != nil {
		return 0, err
	}
	return id, p.parseVals(2)
}

func (p *parser) parseID(k int) (int, *ParseError) {
	f := p.fields[k]
	v, err := strconv.ParseInt(string(f), 10, 64)
	if err != nil || v > maxID || v < -maxID {
		return 0, p.errorf("field %d of %s (%s) is not a vertex id (an integer of magnitude at most 2^60)",
			k, string(p.fields[0]), printable(string(f)))
	}
	id := int(v)
	p.noteID(id)
	return id, nil
}

// noteID keeps the range of the ids read.
func (p *parser) noteID(id int) {
	if !p.haveID {
		p.minID, p.maxID, p.haveID = id, id, true
	} else if id < p.minID {
		p.minID = id
	} else if id > p.maxID {
		p.maxID = id
	}
}

// parseVals parses fields[first:] into p.vals.
func (p *parser) parseVals(first int) *ParseError {
	for k, f := range p.fields[first:] {
		v, err := strconv.ParseFloat(string(f), 64)
		if err != nil && !errors.Is(err, strconv.ErrRange) {
			return p.errorf("field %d of %s (%s) is not a number", first+k, string(p.fields[0]), printable(string(f)))
		}
		if err != nil || math.IsNaN(v) || math.IsInf(v, 0) {
			return p.errorf("field %d of %s (%s) is not a finite number", first+k, string(p.fields[0]), printable(string(f)))
		}
		p.vals[k] = v
	}
	return nil
}

func (p *parser) vertex(d, nv int) *ParseError {
	if err := p.setDim(d); err != nil {
		return err
	}
	id, err := p.idRecord(nv)
	if err != nil {
		return err
	}
	if !p.sized {
		p.sizeStores()
	}
	v := vertex{id: id, line: p.line}
	if d == 2 {
		v.pose.R = RotationFromAngle(p.vals[2])
		v.pose.T = [3]float64{p.vals[0], p.vals[1]}
	} else {
		r, ok := RotationFromQuat(p.vals[3], p.vals[4], p.vals[5], p.vals[6])
		if !ok {
			return p.errorf("VERTEX_SE3:QUAT has a zero quaternion")
		}
		v.pose.R = r
		v.pose.T = [3]float64{p.vals[0], p.vals[1], p.vals[2]}
	}
	*p.readVerts.next() = v
	return nil
}

// chunked collects values in chunks, each a quarter of the values so far,
// and hands them over in one slice of the exact length: an edge is ~180
// bytes, and append's growth, which copies a large slice each time it grows
// by a quarter, was most of the time spent reading a large file.
type chunked[T any] struct {
	full [][]T // filled chunks
	cur  []T   // the chunk being filled
	n    int   // values in full
	hint int   // the capacity of the first chunk, if larger than usual
}

// next appends a zero value and returns it to be filled in place.
func (c *chunked[T]) next() *T {
	if len(c.cur) == cap(c.cur) {
		if len(c.cur) > 0 {
			c.full = append(c.full, c.cur)
			c.n += len(c.cur)
		}
		c.cur = make([]T, 0, max(min(max(256, c.n/4), 1<<16), c.hint))
		c.hint = 0
	}
	c.cur = c.cur[:len(c.cur)+1]
	return &c.cur[len(c.cur)-1]
}

// pop removes the value next returned last.
func (c *chunked[T]) pop() {
	var zero T
	c.cur[len(c.cur)-1] = zero
	c.cur = c.cur[:len(c.cur)-1]
}

// all returns every value in order; c is empty afterwards.
func (c *chunked[T]) all() []T {
	if len(c.full) == 0 {
		s := c.cur
		*c = chunked[T]{}
		return s
	}
	s := make([]T, 0, c.n+len(c.cur))
	for _, f := range c.full {
		s = append(s, f...)
	}
	s = append(s, c.cur...)
	*c = chunked[T]{}
	return s
}

// alloc returns a slice of k floats carved from a shared slab, so Meas and
// Info cost no allocation per edge.
func (p *parser) alloc(k int) []float64 {
	if len(p.slab) < k {
		p.slab = make([]float64, 1<<14)
	}
	s := p.slab[:k:k]
	p.slab = p.slab[k:]
	return s
}

func (p *parser) edge(d, nv int, toro bool) *ParseError {
	if err := p.setDim(d); err != nil {
		return err
	}
	fast := p.fastNumbers(2, nv)
	if !fast {
		p.split(p.rest)
		if err := p.count(2, nv); err != nil {
			return err
		}
	}
	i, j := p.ids[0], p.ids[1]
	if !fast {
		var err *ParseError
		if i, err = p.parseID(1); err != nil {
			return err
		}
		if j, err = p.parseID(2); err != nil {
			return err
		}
	}
	if i == j {
		return p.errorf("%s from vertex %d to itself", string(p.fields[0]), i)
	}
	if !fast {
		if err := p.parseVals(3); err != nil {
			return err
		}
	}
	v := &p.vals
	if !p.sized {
		p.sizeStores()
	}
	p.estimateEdges()
	// Fill the edge in place: an Edge is ~180 bytes, worth not copying.
	e := p.readEdges.next()
	e.I, e.J, e.Line = i, j, p.line
	ok := false
	defer func() {
		if !ok {
			p.readEdges.pop()
		}
	}()
	nm := 3 // dx dy dth
	if d == 3 {
		nm = 7 // x y z qx qy qz qw
	}
	e.Meas = p.alloc(nm)
	copy(e.Meas, v[:nm])
	var info []float64
	if d == 2 {
		if toro {
			// TORO: Ixx Ixy Iyy Ith Ixth Iyth -> g2o: I11 I12 I13 I22 I23 I33.
			p.toroInfo = [6]float64{v[3], v[4], v[7], v[5], v[8], v[6]}
			info = p.toroInfo[:]
		} else {
			info = v[3:9]
		}
		e.R = RotationFromAngle(v[2])
		e.T = [3]float64{v[0], v[1]}
	} else {
		info = v[7:28]
		var r [9]float64
		var nonzero bool
		if p.opts.RawQuaternions {
			r, nonzero = RotationFromQuatRaw(v[3], v[4], v[5], v[6])
		} else {
			r, nonzero = RotationFromQuat(v[3], v[4], v[5], v[6])
		}
		if !nonzero {
			return p.errorf("EDGE_SE3:QUAT has a zero quaternion")
		}
		e.R = r
		e.T = [3]float64{v[0], v[1], v[2]}
	}
	if !sameBits(info, p.info.vals) {
		// A matrix other than the previous edge's: store and check it.
		vals := p.alloc(len(info))
		copy(vals, info)
		var kappa, tau float64
		var perr, pdErr error
		if d == 2 {
			var fine bool
			if kappa, tau, fine = se2Fast(vals); !fine {
				kappa, tau, perr = SE2Precisions(vals)
				if perr == nil {
					pdErr = InfoPositiveDefinite(vals)
				}
			}
		} else {
			kappa, tau, perr = SE3Precisions(vals)
			if perr == nil {
				pdErr = InfoPositiveDefinite(vals)
			}
		}
		if perr != nil {
			return p.errorf("%s: %v", string(p.fields[0]), perr)
		}
		p.info = lastInfo{vals: vals, kappa: kappa, tau: tau, notPD: pdErr}
	}
	e.Info, e.Kappa, e.Tau = p.info.vals, p.info.kappa, p.info.tau
	if err := p.info.notPD; err != nil {
		if p.opts.StrictInfo {
			return p.errorf("%s: %v", string(p.fields[0]), err)
		}
		if p.notPD == 0 {
			p.notPDFirst, p.notPDMsg = p.line, err.Error()
		}
		p.notPD++
	}
	ok = true
	return nil
}

// lastInfo is the information matrix of the edge read last and what it
// gave. Files mostly give every edge the same matrix: an edge with the
// previous one's values, bit for bit, shares its Info array (6 of the 33
// words a 2-D edge takes) and its precisions and verdict, which are functions
// of those values alone.
type lastInfo struct {
	vals       []float64 // nil before the first edge
	kappa, tau float64
	notPD      error // InfoPositiveDefinite's, nil if positive definite
}

// sameBits reports whether a and b hold the same values bit for bit
// (so 0 and -0 differ, as they print differently).
func sameBits(a, b []float64) bool {
	if len(a) != len(b) {
		return false
	}
	for k := range a {
		if math.Float64bits(a[k]) != math.Float64bits(b[k]) {
			return false
		}
	}
	return true
}

// sizeStores sizes the vertex and edge stores at the first pose or edge
// record, when the input can be read at an offset (a file, a
// bytes.Reader), from the lines left that start with V and E: usually
// every record of its kind, so the store is one chunk, which needs no
// copying, of the right size. Reading the rest twice costs a few
// hundredths of the reading's time; a 192-byte edge store a quarter too
// large (the estimate from the bytes left) was a fifth of the memory of
// reading a large 2-D file, and copying the vertices from their chunks a
// tenth.
func (p *parser) sizeStores() {
	p.sized = true
	verts, edges, ok := p.recordsLeft()
	if !ok {
		return
	}
	if p.readVerts.n == 0 && len(p.readVerts.cur) == 0 {
		p.readVerts.hint = verts
	}
	if p.readEdges.n == 0 && len(p.readEdges.cur) == 0 {
		p.readEdges.hint, p.edgesCounted = edges, true
	}
}

// estimateEdges sizes the edge store at the first edge when sizeStores
// could not count: edges usually fill the rest of the file, in lines of
// similar length, and room for a quarter more than that estimate usually
// holds them all in one chunk.
func (p *parser) estimateEdges() {
	if p.edgesCounted || p.readEdges.n != 0 || len(p.readEdges.cur) != 0 || p.left <= 0 {
		return
	}
	p.readEdges.hint = int(min(p.left/int64(p.lineLen)*5/4+16, 1<<26))
}

// recordsLeft counts, without consuming any input, the vertices and
// edges from the current line to the end of the input as files lay them
// out, when the input can be read at an offset (else ok is false): the
// run of lines that start with V, from the current one, counts as
// vertices, and every line after it as an edge. Files put their vertices
// first, so both counts are exact but for a few other records (a file
// that mixes them gets too few vertices, whose store then grows in
// chunks, and too many edges). Lines are only split in the run of
// vertices: the rest is one count of line ends. A read error ends the
// count early (the reading will meet it).
func (p *parser) recordsLeft() (verts, edges int, ok bool) {
	ra, ok := p.src.(io.ReaderAt)
	sk, ok2 := p.src.(io.Seeker)
	if !ok || !ok2 {
		return 0, 0, false
	}
	pos, err := sk.Seek(0, io.SeekCurrent)
	if err != nil {
		return 0, 0, false
	}
	inVertices := p.fields[0][0] == 'V'
	if inVertices {
		verts++
	} else {
		edges++
	}
	midLine := false // the last buf ended inside a vertex line
	count := func(buf []byte) {
		for inVertices && len(buf) > 0 {
			if !midLine {
				if buf[0] != 'V' {
					inVertices = false
					break
				}
				verts++
			}
			k := bytes.IndexByte(buf, '\n')
			if k < 0 {
				midLine = true
				return
			}
			midLine, buf = false, buf[k+1:]
		}
		edges += bytes.Count(buf, newline)
	}
	buffered, _ := p.br.Peek(p.br.Buffered())
	count(buffered)
	if p.left >= 0 && int64(p.lineLen+len(buffered)) >= p.left {
		return verts, edges + 1, true // the buffer holds the rest
	}
	buf := make([]byte, 32<<10)
	for {
		k, err := ra.ReadAt(buf, pos)
		count(buf[:k])
		pos += int64(k)
		if err != nil || k == 0 {
			return verts, edges + 1, true // and a last line without its end
		}
	}
}

func (p *parser) fix() *ParseError {
	if len(p.fields) < 2 {
		return p.errorf("too few fields: FIX needs at least one vertex id")
	}
	for k := 1; k < len(p.fields); k++ {
		id, err := p.parseID(k)
		if err != nil {
			return err
		}
		p.fixes = append(p.fixes, fix{id: id, line: p.line})
	}
	return nil
}

// finish maps ids to pose indices (rank among all ids, ascending) and
// assembles the graph.
func (p *parser) finish() (*posegraph.Graph, error) {
	if len(p.edges) == 0 && len(p.priors) == 0 {
		msg := "no edges: a pose graph needs at least one EDGE_SE2, EDGE_SE3:QUAT or EDGE2 record (or a prior)"
		if len(p.skipped) > 0 {
			msg += " (all records of unsupported types were skipped)"
		}
		p.warn()
		return nil, &ParseError{File: p.name, Msg: msg}
	}
	// A vertex declared twice: report the earliest second declaration.
	sortVertices(p.verts)
	dup := -1
	for k := 1; k < len(p.verts); k++ {
		if p.verts[k].id == p.verts[k-1].id && (dup < 0 || p.verts[k].line < p.verts[dup].line) {
			dup = k
		}
	}
	if dup >= 0 {
		v := p.verts[dup]
		p.line = v.line
		return nil, p.errorf("vertex %d declared twice (first at line %d)", v.id, p.verts[dup-1].line)
	}

	idx := p.indexer()
	g := &posegraph.Graph{D: p.d, Source: p.name, RawRotations: p.opts.RawQuaternions && p.d == 3}
	g.IDs = idx.ids
	n := len(g.IDs)
	for k := range p.edges {
		e := &p.edges[k]
		e.I, e.J = idx.index(e.I), idx.index(e.J)
	}
	g.Edges = p.edges
	g.Initial = make([]posegraph.Pose, n)
	g.HasInitial = make([]bool, n)
	id := posegraph.Identity(p.d)
	for i := range g.Initial {
		g.Initial[i] = id
	}
	if len(p.verts) > 0 {
		g.VertexLines = make([]int, n)
	}
	for k := range p.verts {
		v := &p.verts[k] // by pointer: a range copy of each 112- or 192-byte record cost more than the loop's work
		i := idx.index(v.id)
		g.Initial[i] = v.pose
		g.HasInitial[i] = true
		g.VertexLines[i] = v.line
	}
	if err := p.checkDeclared(g); err != nil {
		return nil, err
	}
	for _, f := range p.fixes {
		i := idx.index(f.id)
		if i < 0 {
			p.line = f.line
			return nil, p.errorf("FIX names vertex %d, which no VERTEX or EDGE record mentions", f.id)
		}
		if !slices.Contains(g.Fixed, i) {
			g.Fixed = append(g.Fixed, i)
		}
	}
	if err := p.placeLandmarks(g); err != nil {
		return nil, err
	}
	g, perr := p.placePriors(g)
	if perr != nil {
		return nil, perr
	}
	p.warn()
	return g, nil
}

// checkDeclared rejects, in a file that declares vertices, the first edge
// (in file order) to a vertex that no VERTEX line declares. Reading it
// would invent a pose for that vertex (the identity, as its initial
// estimate), which hides a truncated or mis-merged file. A file with no
// VERTEX lines at all declares none, and every id its edges name is a
// pose. Lenient reading does not relax this: it skips records of
// unsupported types, not pose-pose edges.
func (p *parser) checkDeclared(g *posegraph.Graph) *ParseError {
	if len(p.verts) == 0 {
		return nil
	}
	for t := range g.Edges {
		e := &g.Edges[t]
		k := e.J
		if !g.HasInitial[e.I] {
			k = e.I
		} else if g.HasInitial[e.J] {
			continue
		}
		p.line = e.Line
		msg := fmt.Sprintf("edge %d -> %d names vertex %d, which no VERTEX line declares "+
			"(a file with VERTEX lines must declare every vertex its edges name)",
			g.IDs[e.I], g.IDs[e.J], g.IDs[k])
		for _, t := range p.skippedOrder {
			if strings.HasPrefix(t, "VERTEX") {
				msg += fmt.Sprintf("; %d %s record(s) were skipped as unsupported", p.skipped[t], printable(t))
			}
		}
		return p.errorf("%s", msg)
	}
	return nil
}

func (p *parser) warn() {
	if p.opts.Warn == nil {
		return
	}
	for _, t := range p.skippedOrder {
		p.opts.Warn(fmt.Sprintf("%s: skipped %d %s record(s): %s", p.fileName(), p.skipped[t], printable(t), unsupportedReason(t)))
	}
	if p.notPD > 0 {
		p.opts.Warn(fmt.Sprintf("%s:%d: %d edge(s) have an information matrix made indefinite by its cross terms "+
			"(the first here: %s); read anyway, as kappa and tau use only the diagonal blocks",
			p.fileName(), p.notPDFirst, p.notPD, p.notPDMsg))
	}
}

// sortVertices sorts vs by id, keeping file order among equal ids. Files
// usually declare their vertices in ascending order, and a stable sort of
// 112-byte records took a tenth of reading such a file, so that order is
// checked first.
func sortVertices(vs []vertex) {
	for k := 1; k < len(vs); k++ {
		if vs[k].id <= vs[k-1].id {
			slices.SortStableFunc(vs, func(a, b vertex) int { return cmpInt(a.id, b.id) })
			return
		}
	}
}

func cmpInt(a, b int) int {
	switch {
	case a < b:
		return -1
	case a > b:
		return 1
	}
	return 0
}

// indexer maps file ids to pose indices. Ids that span a range not much
// larger than their number (the usual 0..n-1) use a dense table; sparse
// ids fall back to binary search in the sorted list.
type indexer struct {
	ids   []int
	min   int
	table []int32 // index+1 of id min+k, 0 if absent; nil when sparse
}

func (p *parser) indexer() *indexer {
	count := len(p.verts) + 2*len(p.edges)
	x := &indexer{min: p.minID}
	// minID and maxID are within +-2^60, so the difference cannot overflow.
	span := p.maxID - p.minID + 1
	if span <= 4*count+1<<16 {
		x.table = make([]int32, span)
		for k := range p.verts {
			v := &p.verts[k]
			x.table[v.id-x.min] = 1
		}
		for k := range p.edges {
			e := &p.edges[k]
			x.table[e.I-x.min] = 1
			x.table[e.J-x.min] = 1
		}
		for k, t := range x.table {
			if t != 0 {
				x.ids = append(x.ids, x.min+k)
				x.table[k] = int32(len(x.ids))
			}
		}
		return x
	}
	all := make([]int, 0, count)
	for k := range p.verts {
		v := &p.verts[k]
		all = append(all, v.id)
	}
	for k := range p.edges {
		e := &p.edges[k]
		all = append(all, e.I, e.J)
	}
	slices.Sort(all)
	x.ids = slices.Compact(all)
	return x
}

// index returns the pose index of id, or -1 if no record mentions it.
func (x *indexer) index(id int) int {
	if x.table != nil {
		k := id - x.min
		if k < 0 || k >= len(x.table) {
			return -1
		}
		return int(x.table[k]) - 1
	}
	if k, ok := slices.BinarySearch(x.ids, id); ok {
		return k
	}
	return -1
}

var newline = []byte{'\n'}
