package distributed

import (
	"context"
	"errors"
	"fmt"
	"math"
	"slices"
	stdsync "sync"

	"github.com/bcmsync/bcmsync/posegraph/blockmat"
	bsync "github.com/bcmsync/bcmsync/sync"
)

// The certificate by parts (issue 30, item 2). Each agent computes its own
// Lambda blocks from its blocks of the point and its neighbours' public
// poses, builds its rows of the scaled, shifted S the certificate factors,
// factors their interior block and sends the Schur complement on its
// boundary poses (sync.PartCertifier); the coordinator sums the
// complements with the blocks of Q between parts and factors the sum
// (sync.BoundaryProof). The pivots of those factors are a Cholesky
// factorization of the whole matrix in the order interiors first, tested
// against the whole matrix's largest diagonal entry: the central proof in
// another order. The coordinator holds the boundary system only.

// partCertifier returns the agent's share of the certificate, made on
// first use (and again after a restart, which loses it).
func (a *agent) partCertifier() (*bsync.PartCertifier, error) {
	if a.proof != nil {
		return a.proof, nil
	}
	l := a.l
	ids := append(slices.Clone(l.own), l.pub...)
	pc, err := bsync.NewPartCertifier(l.q, ids, len(l.own), l.d, -1)
	if err != nil {
		return nil, err
	}
	a.proof = pc
	return pc, nil
}

// prove serves the certificate's commands (mu held).
func (a *agent) prove(m, rep *message) error {
	pc, err := a.partCertifier()
	if err != nil {
		return err
	}
	l := a.l
	// The steps' factor is idle until the next rounds, which make it
	// again, bit for bit: without it the certificate's interior factor
	// and Schur complement, the agent's peak, do not stack on it.
	l.releaseStepsFactor()
	switch m.Op {
	case opProveSetup:
		// The boundary poses, their weights, and the blocks of Q to other
		// parts' poses whose larger index is the agent's own.
		bnd := pc.Boundary()
		cross := pc.CrossBlocks()
		rep.Ints = make([]uint32, 0, 1+len(bnd)+2*len(cross))
		rep.Ints = append(rep.Ints, uint32(len(bnd)))
		for _, i := range bnd {
			rep.Ints = append(rep.Ints, uint32(i))
		}
		rep.Extra = pc.BoundaryWeights()
		for _, c := range cross {
			rep.Ints = append(rep.Ints, uint32(c.I), uint32(c.J))
			rep.Extra = append(rep.Extra, c.Block...)
		}
	case opProveLambda:
		if m.Rank != l.x.R {
			return fmt.Errorf("certificate at rank %d, agent at %d", m.Rank, l.x.R)
		}
		rep.F = pc.Lambda(l.x)
	case opProveFactor:
		if len(m.Ints) != 1 {
			return errors.New("certificate: no anchor")
		}
		stored0, _ := pc.WSize()
		pr, err := pc.Factor(bsync.ProofShift{Sigma: m.F, Mu: m.Grad2, AnchorOnly: m.Norm2 == 1, Anchor: int(m.Ints[0]), Tau: m.Dot})
		if err != nil {
			return err
		}
		if stored, dense := pc.WSize(); stored0 == 0 && dense > 0 {
			// W's size at the first factorization of each certificate
			// test (the rounds in between let the rows go): the reach
			// that keeps it small.
			a.opts.Logger.Info("certificate's W", "part", a.k, "boundary_poses", len(pr.Boundary),
				"w_mb", 8*float64(stored)/1e6, "dense_w_mb", 8*float64(dense)/1e6, "reach", float64(stored)/float64(dense))
		}
		if pr.Failed || math.IsNaN(pr.MaxDiag) || math.IsInf(pr.MaxDiag, 0) {
			rep.Norm2 = 1
			return nil
		}
		rep.Grad2 = pr.MaxDiag
		if math.IsInf(pr.MinPivot, 1) {
			rep.Dot = 1 // no interior: no pivot
		} else {
			rep.F = pr.MinPivot
		}
		rep.Ints = make([]uint32, len(pr.Boundary))
		for x, i := range pr.Boundary {
			rep.Ints[x] = uint32(i)
		}
		rep.Extra, rep.extraTail = pr.Scale, pr.Schur
	}
	return nil
}

// partsProver is the coordinator's side: it asks the agents for their
// shares and factors the boundary system.
type partsProver struct {
	c      *coordinator
	ctx    context.Context
	part   []int
	anchor int
	bnd    [][]int // each agent's boundary poses, in the order of its proofs
	// eigPoses lists, for each agent, its boundary poses and then the
	// other agents' poses it borders: where it needs the boundary
	// solution of the escape's solves (parteig.go).
	eigPoses [][]int
	bp       *bsync.BoundaryProof
	b        int
}

// PartsProver makes the certificate by parts for the staircase (see
// prove.go): the agents report their boundary poses and the blocks of Q
// between parts once, and the coordinator anchors the gauge at the
// lightest boundary pose. Nil (the driver's test on the gathered point)
// when that fails or the partition has no boundary (one agent).
func (c *coordinator) PartsProver(r *bsync.Run) bsync.PartsProver {
	if c.opts.Central {
		return nil
	}
	ctx := c.context()
	pp := &partsProver{c: c, ctx: ctx, part: c.p.Part, anchor: -1, bnd: make([][]int, c.p.K), b: c.b}
	var mu stdsync.Mutex
	var cross []bsync.CrossBlock
	best := math.Inf(1)
	b := c.b
	err := parallel(allParts(c.p.K), func(k int) error {
		rep, err := c.request(ctx, k, &message{Op: opProveSetup, Rank: c.rank})
		if err != nil {
			return fmt.Errorf("certificate set-up at agent %d: %w", k, err)
		}
		if len(rep.Ints) < 1 {
			return fmt.Errorf("certificate set-up at agent %d: an empty reply", k)
		}
		nb := int(rep.Ints[0])
		if nb < 0 || 1+nb > len(rep.Ints) || (len(rep.Ints)-1-nb)%2 != 0 || len(rep.Extra) != nb+(len(rep.Ints)-1-nb)/2*b*b {
			return fmt.Errorf("certificate set-up at agent %d: a malformed reply", k)
		}
		mu.Lock()
		defer mu.Unlock()
		for x := 0; x < nb; x++ {
			i := int(rep.Ints[1+x])
			if i >= len(c.p.Part) || c.p.Part[i] != k {
				return fmt.Errorf("certificate set-up at agent %d: pose %d is not its own", k, i)
			}
			pp.bnd[k] = append(pp.bnd[k], i)
			if w := rep.Extra[x]; w > 0 && (w < best || (w == best && i < pp.anchor)) {
				best, pp.anchor = w, i
			}
		}
		pairs := rep.Ints[1+nb:]
		vals := rep.Extra[nb:]
		for t := 0; t+1 < len(pairs); t += 2 {
			i, j := int(pairs[t]), int(pairs[t+1])
			if i >= len(c.p.Part) || j >= len(c.p.Part) || c.p.Part[i] != k || c.p.Part[j] == k || i <= j {
				return fmt.Errorf("certificate set-up at agent %d: cross block (%d, %d)", k, i, j)
			}
			cross = append(cross, bsync.CrossBlock{I: i, J: j, Block: vals[t/2*b*b : (t/2+1)*b*b]})
		}
		return nil
	})
	if err == nil && pp.anchor < 0 {
		// One part (or parts that share no edge): nothing to split.
		r.Options().Logger.Info("no boundary pose: the coordinator certifies the gathered point")
		return nil
	}
	if err == nil {
		pp.bp, err = bsync.NewBoundaryProof(b, pp.bnd, cross, pp.anchor)
	}
	if err == nil {
		pp.eigPoses = eigPoses(pp.bnd, cross, c.p.Part)
	}
	if err != nil {
		r.Options().Logger.Warn("certificate by parts unavailable; the coordinator certifies the gathered point", "err", err)
		return nil
	}
	c.stats.Certificate = "parts"
	c.stats.ProofBoundaryPoses = pp.bp.Blocks()
	return pp
}

// context is the solve's context (Background for a coordinator made
// without Solve, as the conformance suite makes it).
func (c *coordinator) context() context.Context {
	if c.ctx == nil {
		return context.Background()
	}
	return c.ctx
}

func allParts(k int) []int {
	all := make([]int, k)
	for i := range all {
		all[i] = i
	}
	return all
}

func (pp *partsProver) ProofPartition() ([]int, int) { return pp.part, pp.anchor }

// ProveLambda has the agents hold x (the staircase's point, whose
// translations the coordinator made exact after the gather) and compute
// their Lambda blocks there.
func (pp *partsProver) ProveLambda(x *blockmat.Blocks) (float64, error) {
	c := pp.c
	if !c.held.is(x) {
		c.rank = x.R
		if err := c.set(pp.ctx, x); err != nil {
			return 0, err
		}
		c.held = markOf(x)
	}
	parts := make([]float64, c.p.K)
	err := parallel(allParts(c.p.K), func(k int) error {
		rep, err := c.request(pp.ctx, k, &message{Op: opProveLambda, Rank: x.R})
		if err != nil {
			return err
		}
		parts[k] = rep.F
		return nil
	})
	if err != nil {
		c.stats.ProofFallbacks++
	}
	// Summed in the parts' order, not the replies': the same bits in
	// every run.
	tr := 0.0
	for _, v := range parts {
		tr += v
	}
	return tr, err
}

// ProveFactor has every agent factor its rows for sh and factors the
// boundary system.
func (pp *partsProver) ProveFactor(sh bsync.ProofShift) (bool, error) {
	c := pp.c
	b := pp.b
	proofs := make([]*bsync.PartProof, c.p.K)
	anchorOnly := 0.0
	if sh.AnchorOnly {
		anchorOnly = 1
	}
	if sh.Tau > 0 {
		c.stats.EscapeFactorizations++
	} else {
		c.stats.ProofFactorizations++
		// A certificate's test: no solve uses its factor (the escape's
		// solves use the factors of S + tau I, Tau > 0), and held, the
		// boundary system (44 MB at the 10^5 lattice's 1007 boundary
		// poses) sat under the coordinator's rounding and outputs. It
		// goes on every return: an agent's failed pivot or error leaves
		// the last escape's system (S + tau I) behind too.
		defer pp.bp.Release()
	}
	err := parallel(allParts(c.p.K), func(k int) error {
		rep, err := c.request(pp.ctx, k, &message{Op: opProveFactor, Rank: c.rank, F: sh.Sigma, Grad2: sh.Mu, Norm2: anchorOnly,
			Dot: sh.Tau, Ints: []uint32{uint32(sh.Anchor)}})
		if err != nil {
			return err
		}
		pr := &bsync.PartProof{MaxDiag: rep.Grad2, MinPivot: rep.F, Failed: rep.Norm2 == 1}
		if rep.Dot == 1 {
			pr.MinPivot = math.Inf(1)
		}
		if !pr.Failed {
			nb := len(rep.Ints)
			if nb != len(pp.bnd[k]) || len(rep.Extra) != nb*b+nb*b*nb*b {
				return fmt.Errorf("certificate: agent %d's proof has %d boundary poses and %d values, want %d poses", k, nb, len(rep.Extra), len(pp.bnd[k]))
			}
			for _, i := range rep.Ints {
				pr.Boundary = append(pr.Boundary, int(i))
			}
			pr.Scale, pr.Schur = rep.Extra[:nb*b], rep.Extra[nb*b:]
		}
		proofs[k] = pr
		return nil
	})
	if err != nil {
		c.stats.ProofFallbacks++
		return false, err
	}
	for _, pr := range proofs {
		if pr.Failed {
			return false, nil
		}
	}
	return pp.bp.Factor(proofs)
}
