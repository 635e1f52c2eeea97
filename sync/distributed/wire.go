package distributed

import (
	"encoding/binary"
	"errors"
	"fmt"
	"hash/crc32"
	"math"
	"slices"
)

// The wire format. Every message, on any transport, is one binary record:
//
//	magic "BCMD" | version | kind | op | status | part int32 | run u64 |
//	seq u64 | rank u16 | b u16 | round u32 | f, grad2, norm2 f64 |
//	mem, sent u64 | dot f64 |
//	needs u32 + (part u32, seq u64)* | poses u32 + index u32* |
//	values f64 (poses * rank * b) | ints u32 + u32* | extra u32 + f64* |
//	text u32 + bytes | CRC-32 (IEEE) of all before
//
// little-endian. decode checks the magic, the version, the checksum, every
// count against the bytes that remain and every value for finiteness, so a
// truncated, corrupted or foreign message is rejected before anything of it
// is used. Whether a well-formed message is current (its run, rank and
// sequence number) is the receiver's check.
const (
	wireMagic   = 0x444d4342 // "BCMD" little-endian
	wireVersion = 5          // 2: the replies' mem, sent and dot; 3: ints and extra (the certificate by parts); 4: the escape by parts (opEig*, a command's dot); 5: opInit carries the partition
	headerSize  = 4 + 4 + 4 + 8 + 8 + 2 + 2 + 4 + 3*8 + 2*8 + 8
	maxRank     = 64
)

// Message kinds.
const (
	kindPoses = 1 + iota // an agent's public poses, published on its subject
	kindCmd              // a coordinator's request to one agent
	kindReply            // an agent's reply to a command
)

// Commands (kindCmd's op).
const (
	opInit         = 1 + iota // join a run: reset to the local chordal estimate at a rank (Ints: the partition, K then each pose's part)
	opAlign                   // align the local chordal estimate to the parts in needs, publish
	opUpdate                  // improve the own block given the public poses in needs, publish
	opStats                   // report the shares of F, ||grad||^2, ||2XQ||^2
	opGather                  // send every own block (for the central certificate)
	opSet                     // replace the own blocks (a staircase step) and publish
	opStop                    // end the agent
	opPublish                 // publish the own public poses again (for a rejoining neighbour)
	opExtrapolate             // momentum: X <- R(X + beta (X - X_last)), publish (beta in F)
	opProveSetup              // the certificate by parts: boundary poses, their weights, cross blocks of Q
	opProveLambda             // Lambda blocks at the held point; reply F = the part's tr(Lambda)
	opProveFactor             // factor the rows of D S D + shift (F sigma, Grad2 mu, Norm2 1: anchor only, Ints anchor)
	opRoundSetup              // the rounding by parts: boundary poses and couplings of the translation system
	opRoundGram               // the own blocks' share of Y Y^T (Extra)
	opRoundProject            // project the own blocks on U_d (Extra); reply F positive, Grad2 voters
	opRoundReduce             // finish the rotations (Norm2 1: flip), reduce the translation system to the boundary
	opRoundBack               // the boundary translations (Extra); reply the own poses (Ints, Extra R and T)
	opEigReduce               // the escape by parts: scale the vector by F (Norm2 1: from the start), reduce its solve to the boundary (reply Extra)
	opEigBack                 // the boundary solution (Ints poses, Extra values): finish the solve; reply F, Grad2, Norm2 the shares of |v|^2, v^T S v, |S v|^2
	opEigScale                // scale the vector by F; reply as opEigBack
	opEigLift                 // F at the blocks lifted along F v (reply F); Norm2 1: keep them, reply the own blocks (Index, Values)
)

// Reply statuses.
const (
	statusOK    = 1 + iota
	statusStale // the public poses named in needs did not arrive in time: nothing changed
	statusError // text says what went wrong
	statusNoRun // the agent is not in the command's run: it restarted
)

const coordinatorPart = -1

// need asks that the receiver hold part Part's public poses at sequence
// number Seq or later before it acts.
type need struct {
	Part int
	Seq  uint64
}

// message is every record of the protocol; which fields count depends on
// Kind and Op.
type message struct {
	Kind, Op, Status uint8
	Part             int // sender's part, coordinatorPart for the coordinator
	Run              uint64
	Seq              uint64 // sender's state version (poses, replies); command number (cmd)
	Rank, B          int
	Round            uint32
	F, Grad2, Norm2  float64
	Needs            []need
	Index            []uint32  // global pose indices
	Values           []float64 // len(Index) blocks of Rank x B, row-major
	Text             string
	// Mem is an agent's peak resident set in bytes as it replies (0: not
	// measured; AgentOptions.PeakRSS), Sent the bytes of the publications
	// the command made it send (their records, without an authentication
	// trailer): the run's report counts both (Stats).
	Mem, Sent uint64
	// Dot is a stats reply's share of the momentum restart test,
	// <grad F, X - X_prev> over the agent's poses (sync.BlockProblem's
	// MomentumInner).
	Dot float64
	// Ints and Extra carry the certificate by parts (opProve*): pose
	// indices and numbers that are not pose blocks (boundary poses, cross
	// blocks of Q, a Schur complement).
	Ints  []uint32
	Extra []float64
	// extraTail, if set, is sent after Extra as its continuation: the
	// same record as Extra holding both, without a copy of the two (a
	// reply's Schur complement after its scale, 3 MB at the 10^5 lattice's
	// parts, at an agent's peak; with --key the seal still copies the
	// encoded record once). A decoded message has it all in Extra.
	extraTail []float64
}

// encode appends m's record to buf[:0].
func encode(buf []byte, m *message) []byte {
	le := binary.LittleEndian
	buf = slices.Grow(buf[:0], encodedSize(m))
	buf = le.AppendUint32(buf, wireMagic)
	buf = append(buf, wireVersion, m.Kind, m.Op, m.Status)
	buf = le.AppendUint32(buf, uint32(int32(m.Part)))
	buf = le.AppendUint64(buf, m.Run)
	buf = le.AppendUint64(buf, m.Seq)
	buf = le.AppendUint16(buf, uint16(m.Rank))
	buf = le.AppendUint16(buf, uint16(m.B))
	buf = le.AppendUint32(buf, m.Round)
	for _, v := range [3]float64{m.F, m.Grad2, m.Norm2} {
		buf = le.AppendUint64(buf, math.Float64bits(v))
	}
	buf = le.AppendUint64(buf, m.Mem)
	buf = le.AppendUint64(buf, m.Sent)
	buf = le.AppendUint64(buf, math.Float64bits(m.Dot))
	buf = le.AppendUint32(buf, uint32(len(m.Needs)))
	for _, n := range m.Needs {
		buf = le.AppendUint32(buf, uint32(n.Part))
		buf = le.AppendUint64(buf, n.Seq)
	}
	buf = le.AppendUint32(buf, uint32(len(m.Index)))
	for _, i := range m.Index {
		buf = le.AppendUint32(buf, i)
	}
	for _, v := range m.Values {
		buf = le.AppendUint64(buf, math.Float64bits(v))
	}
	buf = le.AppendUint32(buf, uint32(len(m.Ints)))
	for _, i := range m.Ints {
		buf = le.AppendUint32(buf, i)
	}
	buf = le.AppendUint32(buf, uint32(len(m.Extra)+len(m.extraTail)))
	for _, v := range m.Extra {
		buf = le.AppendUint64(buf, math.Float64bits(v))
	}
	for _, v := range m.extraTail {
		buf = le.AppendUint64(buf, math.Float64bits(v))
	}
	buf = le.AppendUint32(buf, uint32(len(m.Text)))
	buf = append(buf, m.Text...)
	return le.AppendUint32(buf, crc32.ChecksumIEEE(buf))
}

// encodedSize is the length of m's record, which encode makes room for
// at once: grown by appending, the buffer of an agent's largest reply (its
// Schur complement, 3 MB at the 10^5 lattice's parts) was reallocated at
// each doubling, its copies garbage and its last up to twice the record,
// at the certificate's peak.
func encodedSize(m *message) int {
	return headerSize + 4 + 12*len(m.Needs) + 4 + 4*len(m.Index) + 8*len(m.Values) + 4 + 4*len(m.Ints) +
		4 + 8*(len(m.Extra)+len(m.extraTail)) + 4 + len(m.Text) + 4
}

var errShort = errors.New("truncated")

// decode parses and checks one record.
func decode(data []byte) (*message, error) {
	le := binary.LittleEndian
	if len(data) < headerSize+4+4+4+4+4+4 {
		return nil, fmt.Errorf("message of %d bytes: %w", len(data), errShort)
	}
	body, sum := data[:len(data)-4], le.Uint32(data[len(data)-4:])
	if le.Uint32(body) != wireMagic {
		return nil, errors.New("not a bcmsync message (bad magic)")
	}
	if body[4] != wireVersion {
		return nil, fmt.Errorf("wire version %d, want %d", body[4], wireVersion)
	}
	if crc32.ChecksumIEEE(body) != sum {
		return nil, errors.New("checksum mismatch")
	}
	m := &message{Kind: body[5], Op: body[6], Status: body[7]}
	p := body[8:]
	m.Part = int(int32(le.Uint32(p)))
	m.Run = le.Uint64(p[4:])
	m.Seq = le.Uint64(p[12:])
	m.Rank = int(le.Uint16(p[20:]))
	m.B = int(le.Uint16(p[22:]))
	m.Round = le.Uint32(p[24:])
	m.F = math.Float64frombits(le.Uint64(p[28:]))
	m.Grad2 = math.Float64frombits(le.Uint64(p[36:]))
	m.Norm2 = math.Float64frombits(le.Uint64(p[44:]))
	m.Mem = le.Uint64(p[52:])
	m.Sent = le.Uint64(p[60:])
	m.Dot = math.Float64frombits(le.Uint64(p[68:]))
	p = p[76:]
	if m.Kind < kindPoses || m.Kind > kindReply {
		return nil, fmt.Errorf("unknown message kind %d", m.Kind)
	}
	if m.Rank > maxRank || m.B > 4 {
		return nil, fmt.Errorf("rank %d, block size %d out of range", m.Rank, m.B)
	}
	if !finite([]float64{m.F, m.Grad2, m.Norm2, m.Dot}) {
		return nil, errors.New("non-finite statistics")
	}
	count := func(unit int) (int, error) {
		if len(p) < 4 {
			return 0, errShort
		}
		n := int(le.Uint32(p))
		p = p[4:]
		if unit > 0 && n > len(p)/unit {
			return 0, fmt.Errorf("count %d exceeds the %d bytes left: %w", n, len(p), errShort)
		}
		return n, nil
	}
	nNeed, err := count(12)
	if err != nil {
		return nil, err
	}
	if nNeed > 0 {
		m.Needs = make([]need, nNeed)
		for k := range m.Needs {
			m.Needs[k] = need{Part: int(le.Uint32(p)), Seq: le.Uint64(p[4:])}
			p = p[12:]
		}
	}
	nIdx, err := count(4)
	if err != nil {
		return nil, err
	}
	if nIdx > 0 {
		m.Index = make([]uint32, nIdx)
		for k := range m.Index {
			m.Index[k] = le.Uint32(p)
			p = p[4:]
		}
		nv := nIdx * m.Rank * m.B
		if nv == 0 || nv > len(p)/8 {
			return nil, fmt.Errorf("%d poses of %d x %d values in %d bytes: %w", nIdx, m.Rank, m.B, len(p), errShort)
		}
		m.Values = make([]float64, nv)
		for k := range m.Values {
			m.Values[k] = math.Float64frombits(le.Uint64(p))
			p = p[8:]
		}
		if !finite(m.Values) {
			return nil, errors.New("non-finite pose values")
		}
	}
	nInts, err := count(4)
	if err != nil {
		return nil, err
	}
	if nInts > 0 {
		m.Ints = make([]uint32, nInts)
		for k := range m.Ints {
			m.Ints[k] = le.Uint32(p)
			p = p[4:]
		}
	}
	nExtra, err := count(8)
	if err != nil {
		return nil, err
	}
	if nExtra > 0 {
		m.Extra = make([]float64, nExtra)
		for k := range m.Extra {
			m.Extra[k] = math.Float64frombits(le.Uint64(p))
			p = p[8:]
		}
		if !finite(m.Extra) {
			return nil, errors.New("non-finite values")
		}
	}
	nText, err := count(1)
	if err != nil {
		return nil, err
	}
	m.Text = string(p[:nText])
	p = p[nText:]
	if len(p) != 0 {
		return nil, fmt.Errorf("%d bytes after the record", len(p))
	}
	return m, nil
}
