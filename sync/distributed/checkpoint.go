package distributed

import (
	"bufio"
	"encoding/binary"
	"errors"
	"fmt"
	"hash/crc32"
	"io"
	"math"
)

// A Checkpoint is a distributed run's state, enough for a coordinator
// started again to go on where the last one stopped (Options.Resume): the
// point the agents held at the last gather, its rank, and the rounds done.
// The coordinator hands one to Options.Checkpoint after each Optimize (a
// level, a proof refinement, a rank-d refinement) and every
// Options.CheckpointRounds rounds within one; `bcmsync distributed
// --checkpoint FILE` writes them (WriteTo), atomically, and `--resume
// FILE` reads one (ReadCheckpoint).
//
// What a resumed run does not keep: the levels before the checkpoint's
// rank and their history, the momentum (it restarts), and the traffic
// counts. Its staircase starts at Rank from X, which is as good a start as
// the staircase can have (every level below was a saddle the run escaped,
// or X is at rank d), so the certificate that ends it means what any other
// means.
type Checkpoint struct {
	// Fingerprint identifies the problem and the partition (the problem
	// kind, the graph's size, edges and weights, and each pose's part); a
	// run of another refuses to resume from it.
	Fingerprint string
	// Rank, B and N shape X: N blocks of Rank x B, row-major, as
	// blockmat.Blocks holds them.
	Rank, B, N int
	// Rounds is the run's rounds up to the checkpoint (all levels).
	Rounds int
	X      []float64
}

// The checkpoint file: magic "BCMSCKP1" | fingerprint u32 + bytes |
// rank, b, n u32 | rounds u64 | X f64 (n rank b) | CRC-32 (IEEE) of all
// before, little-endian.
const (
	checkpointMagic = "BCMSCKP1"
	// maxCheckpointPoses bounds the poses a checkpoint may claim before
	// its values are read (a corrupted count must not allocate terabytes).
	maxCheckpointPoses = 1 << 28
)

// WriteTo writes the checkpoint in its binary format.
func (c *Checkpoint) WriteTo(w io.Writer) (int64, error) {
	if len(c.X) != c.N*c.Rank*c.B {
		return 0, fmt.Errorf("checkpoint: %d values for %d blocks of %d x %d", len(c.X), c.N, c.Rank, c.B)
	}
	le := binary.LittleEndian
	buf := make([]byte, 0, 64+len(c.Fingerprint))
	buf = append(buf, checkpointMagic...)
	buf = le.AppendUint32(buf, uint32(len(c.Fingerprint)))
	buf = append(buf, c.Fingerprint...)
	for _, v := range []int{c.Rank, c.B, c.N} {
		buf = le.AppendUint32(buf, uint32(v))
	}
	buf = le.AppendUint64(buf, uint64(c.Rounds))
	crc := crc32.NewIEEE()
	bw := bufio.NewWriter(io.MultiWriter(w, crc))
	n, err := bw.Write(buf)
	total := int64(n)
	if err != nil {
		return total, err
	}
	var v [8]byte
	for _, x := range c.X {
		le.PutUint64(v[:], math.Float64bits(x))
		n, err := bw.Write(v[:])
		total += int64(n)
		if err != nil {
			return total, err
		}
	}
	if err := bw.Flush(); err != nil {
		return total, err
	}
	n, err = w.Write(le.AppendUint32(nil, crc.Sum32()))
	return total + int64(n), err
}

// ReadCheckpoint reads a checkpoint written by WriteTo from r; name (the
// file's) prefixes every error. It checks the format, the checksum, the
// shape and that every value is finite; whether the checkpoint is of the
// run's problem is Solve's check (its Fingerprint).
func ReadCheckpoint(r io.Reader, name string) (*Checkpoint, error) {
	fail := func(format string, args ...any) (*Checkpoint, error) {
		return nil, fmt.Errorf("%s: "+format, append([]any{name}, args...)...)
	}
	crc := crc32.NewIEEE()
	br := bufio.NewReader(r)
	tr := io.TeeReader(br, crc)
	read := func(n int) ([]byte, error) {
		b := make([]byte, n)
		_, err := io.ReadFull(tr, b)
		return b, err
	}
	le := binary.LittleEndian
	head, err := read(len(checkpointMagic) + 4)
	if err != nil {
		return fail("not a checkpoint (%v)", short(err))
	}
	if string(head[:len(checkpointMagic)]) != checkpointMagic {
		return fail("not a bcmsync checkpoint (bad magic)")
	}
	nf := le.Uint32(head[len(checkpointMagic):])
	if nf > 256 {
		return fail("fingerprint of %d bytes: corrupted", nf)
	}
	fp, err := read(int(nf) + 3*4 + 8)
	if err != nil {
		return fail("truncated header (%v)", short(err))
	}
	c := &Checkpoint{Fingerprint: string(fp[:nf])}
	p := fp[nf:]
	c.Rank, c.B, c.N = int(le.Uint32(p)), int(le.Uint32(p[4:])), int(le.Uint32(p[8:]))
	rounds := le.Uint64(p[12:])
	if c.Rank < 2 || c.Rank > maxRank || c.B < 2 || c.B > 4 || c.N < 1 || c.N > maxCheckpointPoses || rounds > math.MaxInt32 {
		return fail("rank %d, block size %d, %d poses, %d rounds: corrupted", c.Rank, c.B, c.N, rounds)
	}
	c.Rounds = int(rounds)
	c.X = make([]float64, c.N*c.Rank*c.B)
	var v [8]byte
	for k := range c.X {
		if _, err := io.ReadFull(tr, v[:]); err != nil {
			return fail("truncated after %d of %d values (%v)", k, len(c.X), short(err))
		}
		c.X[k] = math.Float64frombits(le.Uint64(v[:]))
	}
	want := crc.Sum32()
	var sum [4]byte
	if _, err := io.ReadFull(br, sum[:]); err != nil {
		return fail("truncated checksum (%v)", short(err))
	}
	if le.Uint32(sum[:]) != want {
		return fail("checksum mismatch: the file is corrupted")
	}
	if _, err := br.ReadByte(); err != io.EOF {
		return fail("data after the checkpoint")
	}
	if !finite(c.X) {
		return fail("non-finite values")
	}
	return c, nil
}

// short names an unexpected end of file as such.
func short(err error) error {
	if errors.Is(err, io.ErrUnexpectedEOF) || errors.Is(err, io.EOF) {
		return errShort
	}
	return err
}
