package distributed

import (
	"errors"
	"fmt"
	stdsync "sync"

	"github.com/bcmsync/bcmsync/posegraph"
	"github.com/bcmsync/bcmsync/posegraph/blockmat"
	"github.com/bcmsync/bcmsync/rounding"
	bsync "github.com/bcmsync/bcmsync/sync"
)

// The rounding by parts (issue 30, item 2; rounding.RoundByParts is the
// same arithmetic in one process). Each agent adds its blocks' share of
// Y Y^T; the coordinator takes U_d of the sum and sends it; each agent
// projects its blocks and reports its reflection votes; the coordinator
// decides the reflection; each agent finishes its rotations (and those of
// its neighbours' public poses, from the same U_d, to the same bits as
// their owners), factors the interior block of its translation system and
// sends the Schur complement and its reduced right-hand sides; the
// coordinator solves the boundary system and sends each agent its
// boundary translations; each agent solves for its interior and returns
// its poses, which make the run's output.

// roundState is an agent's rounding in progress.
type roundState struct {
	ud   []float64
	proj []posegraph.Pose // the own poses, projected
	// own is proj finished: made afresh from proj by each reduce, so that
	// a resent reduce (its reply lost or late) does not reflect twice.
	own   []posegraph.Pose
	rot   map[int][9]float64
	trans *rounding.PartTranslations
}

// partTranslations returns the agent's share of the translation recovery,
// made on first use.
func (a *agent) partTranslations(anchor int) (*rounding.PartTranslations, error) {
	if a.round.trans != nil {
		return a.round.trans, nil
	}
	l := a.l
	pt, err := rounding.NewPartTranslations(l.own, a.edges, anchor, l.d)
	if err != nil {
		return nil, err
	}
	a.round.trans = pt
	return pt, nil
}

// ownBlocks returns the agent's own blocks (its first len(own) blocks of
// l.x) as a Blocks.
func (l *local) ownBlocks() *blockmat.Blocks {
	n := len(l.own)
	return &blockmat.Blocks{R: l.x.R, B: l.x.B, N: n, Data: l.x.Data[:n*l.x.R*l.x.B]}
}

// roundCmd serves the rounding's commands (mu held).
func (a *agent) roundCmd(m, rep *message) error {
	l := a.l
	d := l.d
	// The rounding uses neither the certificate's rows and interior
	// factor (its Lambda blocks stay) nor the steps' factor: held, they
	// sat under the rounding's translation factor, the agent's peak at
	// the end of a run. The next test or update makes them again, bit for
	// bit (an escape follows a test, never a rounding).
	if a.proof != nil {
		a.proof.Release()
	}
	l.releaseStepsFactor()
	switch m.Op {
	case opRoundSetup:
		if len(m.Ints) != 1 {
			return errors.New("rounding: no anchor")
		}
		a.round.trans = nil
		pt, err := a.partTranslations(int(m.Ints[0]))
		if err != nil {
			return err
		}
		bnd := pt.Boundary()
		cross, vals := pt.Cross()
		rep.Ints = append(rep.Ints, uint32(len(bnd)))
		for _, i := range bnd {
			rep.Ints = append(rep.Ints, uint32(i))
		}
		for _, c := range cross {
			rep.Ints = append(rep.Ints, uint32(c[0]), uint32(c[1]))
		}
		rep.Extra = append([]float64(nil), vals...)
	case opRoundGram:
		if m.Rank != l.x.R || m.Rank < d {
			return fmt.Errorf("rounding at rank %d, agent at %d", m.Rank, l.x.R)
		}
		rep.Extra = make([]float64, l.x.R*l.x.R)
		rounding.Gram(rep.Extra, l.ownBlocks(), d, nil)
	case opRoundProject:
		if len(m.Extra) != l.x.R*d {
			return fmt.Errorf("rounding: U_d of %d values at rank %d", len(m.Extra), l.x.R)
		}
		a.round.ud = m.Extra
		var pos, voters int
		a.round.proj, pos, voters = rounding.Project(l.ownBlocks(), d, m.Extra, nil)
		a.round.own = nil
		rep.F, rep.Grad2 = float64(pos), float64(voters)
	case opRoundReduce:
		if a.round.proj == nil || len(m.Ints) != 1 {
			return errors.New("rounding: reduce before project, or no anchor")
		}
		flip := m.Norm2 == 1
		x := l.ownBlocks()
		a.round.own = append(a.round.own[:0], a.round.proj...)
		rounding.Finish(a.round.own, x, d, a.round.ud, nil, flip, false)
		// The public poses' rotations, for the right-hand sides of the
		// shared edges: the same projection and finish as their owners'.
		pub := &blockmat.Blocks{R: l.x.R, B: l.x.B, N: len(l.pub), Data: l.x.Data[len(l.own)*l.x.R*l.x.B:]}
		pp, _, _ := rounding.Project(pub, d, a.round.ud, nil)
		rounding.Finish(pp, pub, d, a.round.ud, nil, flip, false)
		a.round.rot = make(map[int][9]float64, len(l.own)+len(l.pub))
		for li, gi := range l.own {
			a.round.rot[gi] = a.round.own[li].R
		}
		for j, gi := range l.pub {
			a.round.rot[gi] = pp[j].R
		}
		if l.b == d {
			return nil // rotations: no translations
		}
		pt, err := a.partTranslations(int(m.Ints[0]))
		if err != nil {
			return err
		}
		rot := func(i int) [9]float64 { return a.round.rot[i] }
		schur, z, err := pt.Reduce(rot, [3]float64{}) // the anchor's rounded T is 0, as rounding.Round leaves it
		if err != nil {
			return err
		}
		rep.Extra, rep.extraTail = schur, z // one record, without a copy of the complement
	case opRoundBack:
		if a.round.rot == nil || a.round.own == nil {
			return errors.New("rounding: back before reduce")
		}
		if l.b > d {
			pt := a.round.trans
			if pt == nil || len(m.Extra) != len(pt.Boundary())*d {
				return errors.New("rounding: boundary translations that do not fit")
			}
			for gi, t := range pt.Back(m.Extra) {
				a.round.own[l.globalToLocal[gi]].T = t
			}
		}
		sz := d*d + d
		rep.Ints = make([]uint32, len(l.own))
		rep.Extra = make([]float64, 0, len(l.own)*sz)
		for li, gi := range l.own {
			rep.Ints[li] = uint32(gi)
			p := a.round.own[li]
			rep.Extra = append(append(rep.Extra, p.R[:d*d]...), p.T[:d]...)
		}
	}
	return nil
}

// PartsRounder rounds by parts unless Options.Central.
func (c *coordinator) PartsRounder(*bsync.Run) bsync.PartsRounder {
	if c.opts.Central {
		return nil
	}
	return c
}

// RoundByParts rounds x by parts (see above): the agents hold x first
// (a set when they hold another point), and the coordinator receives U_d's
// inputs, the votes, the boundary system and, for the output, the rounded
// poses; never the point.
func (c *coordinator) RoundByParts(x *blockmat.Blocks) ([]posegraph.Pose, error) {
	ctx := c.context()
	d, K := c.g.D, c.p.K
	if !c.held.is(x) {
		c.rank = x.R
		if err := c.set(ctx, x); err != nil {
			return nil, err
		}
		c.held = markOf(x)
	}
	anchor := c.g.Anchor()
	var mu stdsync.Mutex
	each := func(f func(k int) error) error { return parallel(allParts(K), f) }
	r := x.R
	gram := make([]float64, r*r)
	grams := make([][]float64, K)
	if err := each(func(k int) error {
		rep, err := c.request(ctx, k, &message{Op: opRoundGram, Rank: r})
		if err != nil {
			return err // rep is nil: an agent that did not answer
		}
		if len(rep.Extra) != r*r {
			return fmt.Errorf("agent %d: a Gram matrix of %d values", k, len(rep.Extra))
		}
		grams[k] = rep.Extra
		return nil
	}); err != nil {
		return nil, err
	}
	for _, gk := range grams { // in the parts' order, as rounding.RoundByParts
		for t, v := range gk {
			gram[t] += v
		}
	}
	ud := rounding.TopLeft(gram, r, d)
	positive, voters := 0, 0
	if err := each(func(k int) error {
		rep, err := c.request(ctx, k, &message{Op: opRoundProject, Rank: r, Extra: ud})
		if err != nil {
			return err
		}
		mu.Lock()
		positive, voters = positive+int(rep.F), voters+int(rep.Grad2)
		mu.Unlock()
		return nil
	}); err != nil {
		return nil, err
	}
	flip := 0.0
	if 2*positive < voters {
		flip = 1
	}
	xb := make([][]float64, K)
	if c.b > d {
		if c.roundBT == nil {
			bnd := make([][]int, K)
			var cross [][2]int
			var vals []float64
			if err := each(func(k int) error {
				rep, err := c.request(ctx, k, &message{Op: opRoundSetup, Rank: r, Ints: []uint32{uint32(anchor)}})
				if err != nil {
					return err
				}
				if len(rep.Ints) < 1 || int(rep.Ints[0]) > len(rep.Ints)-1 || (len(rep.Ints)-1-int(rep.Ints[0]))%2 != 0 ||
					len(rep.Extra) != (len(rep.Ints)-1-int(rep.Ints[0]))/2 {
					return fmt.Errorf("rounding set-up at agent %d: a malformed reply", k)
				}
				nb := int(rep.Ints[0])
				mu.Lock()
				defer mu.Unlock()
				for _, i := range rep.Ints[1 : 1+nb] {
					bnd[k] = append(bnd[k], int(i))
				}
				for t := 1 + nb; t+1 < len(rep.Ints); t += 2 {
					cross = append(cross, [2]int{int(rep.Ints[t]), int(rep.Ints[t+1])})
				}
				vals = append(vals, rep.Extra...)
				return nil
			}); err != nil {
				return nil, err
			}
			bt, err := rounding.NewBoundaryTranslations(bnd, cross, vals, d)
			if err != nil {
				return nil, err
			}
			c.roundBT, c.roundBnd = bt, bnd
		}
		schurs, zs := make([][]float64, K), make([][]float64, K)
		if err := each(func(k int) error {
			rep, err := c.request(ctx, k, &message{Op: opRoundReduce, Rank: r, Norm2: flip, Ints: []uint32{uint32(anchor)}})
			if err != nil {
				return err
			}
			nb := len(c.roundBnd[k])
			if len(rep.Extra) != nb*nb+nb*d {
				return fmt.Errorf("agent %d: a reduction of %d values for %d boundary poses", k, len(rep.Extra), nb)
			}
			schurs[k], zs[k] = rep.Extra[:nb*nb], rep.Extra[nb*nb:]
			return nil
		}); err != nil {
			return nil, err
		}
		var err error
		if xb, err = c.roundBT.Solve(schurs, zs); err != nil {
			return nil, err
		}
	} else if err := each(func(k int) error {
		_, err := c.request(ctx, k, &message{Op: opRoundReduce, Rank: r, Norm2: flip, Ints: []uint32{uint32(anchor)}})
		return err
	}); err != nil {
		return nil, err
	}
	poses := make([]posegraph.Pose, c.g.N())
	sz := d*d + d
	err := each(func(k int) error {
		rep, err := c.request(ctx, k, &message{Op: opRoundBack, Rank: r, Extra: xb[k]})
		if err != nil {
			return err
		}
		if len(rep.Extra) != len(rep.Ints)*sz {
			return fmt.Errorf("agent %d: %d poses in %d values", k, len(rep.Ints), len(rep.Extra))
		}
		for t, gi := range rep.Ints {
			if int(gi) >= len(poses) || c.p.Part[gi] != k {
				return fmt.Errorf("agent %d: pose %d is not its own", k, gi)
			}
			v := rep.Extra[t*sz : (t+1)*sz]
			p := &poses[gi]
			copy(p.R[:d*d], v[:d*d])
			copy(p.T[:d], v[d*d:])
		}
		return nil
	})
	if err != nil {
		return nil, err
	}
	c.stats.Roundings++
	return poses, nil
}
