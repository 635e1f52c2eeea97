package distributed

import (
	"errors"
	"fmt"
	"math"
	"slices"

	"github.com/bcmsync/bcmsync/internal/sparse"
	"github.com/bcmsync/bcmsync/posegraph/blockmat"
	bsync "github.com/bcmsync/bcmsync/sync"
)

// The saddle escape by parts (sync/parteig.go has the method). When the
// certificate by parts fails, the staircase finds S's most negative
// eigenpair by inverse iteration whose solves with S + tau I go through
// the agents' interior factors and the coordinator's boundary system: the
// coordinator asks each agent to reduce its piece of the vector to its
// boundary (opEigReduce), solves the boundary system, and sends each agent
// the solution at its boundary poses and at the other agents' poses it
// borders (opEigBack); the agent finishes its interior and reports its
// shares of |v|^2, v^T S v and |S v|^2. The escape's line search asks
// every agent for its share of F at its blocks lifted along the vector
// (opEigLift), and the accepted step is kept by the agents, which then
// hold the point at the next rank. The coordinator holds the boundary
// values of the vector only.

// eigPoses returns, for each part, its boundary poses (bnd[k]) and then
// the other parts' poses it borders, which the cross blocks name.
func eigPoses(bnd [][]int, cross []bsync.CrossBlock, part []int) [][]int {
	out := make([][]int, len(bnd))
	seen := make([]map[int]bool, len(bnd))
	for k := range bnd {
		out[k] = slices.Clone(bnd[k])
		seen[k] = map[int]bool{}
	}
	for _, c := range cross {
		for _, e := range [][2]int{{c.I, c.J}, {c.J, c.I}} {
			k, j := part[e[0]], e[1]
			if !seen[k][j] {
				seen[k][j] = true
				out[k] = append(out[k], j)
			}
		}
	}
	return out
}

// eigCmd serves the escape's commands (mu held).
func (a *agent) eigCmd(m, rep *message) error {
	pc := a.proof
	if pc == nil {
		return errors.New("escape by parts without a certificate by parts (the agent restarted?)")
	}
	l := a.l
	sums := func(s bsync.EigSums) { rep.F, rep.Grad2, rep.Norm2 = s.Norm2, s.VSV, s.SV2 }
	switch m.Op {
	case opEigReduce:
		if m.Norm2 == 1 {
			pc.EigStart()
			a.lifted = nil // a new escape: no commit of the last to answer again
		}
		out, err := pc.EigReduce(m.F)
		if err != nil {
			return err
		}
		rep.Extra = out
	case opEigBack:
		ids := make([]int, len(m.Ints))
		for t, i := range m.Ints {
			ids[t] = int(i)
		}
		s, err := pc.EigBack(ids, m.Extra)
		if err != nil {
			return err
		}
		sums(s)
	case opEigScale:
		sums(pc.EigScale(m.F))
	case opEigLift:
		if m.Norm2 == 1 && l.x.R == m.Rank+1 && a.lifted != nil && a.lifted.Rank == l.x.R {
			// A resent commit (its reply lost or late): the step is
			// taken already, so answer as the first time.
			rep.F, rep.Rank, rep.B, rep.Index, rep.Values = a.lifted.F, a.lifted.Rank, a.lifted.B, a.lifted.Index, a.lifted.Values
			return nil
		}
		if m.Rank != l.x.R || l.x.R+1 > maxRank {
			return fmt.Errorf("escape at rank %d, agent at %d", m.Rank, l.x.R)
		}
		xn := sparse.NewBlocks(l.x.R+1, l.b, l.x.N)
		rep.F = pc.EigLift(xn, l.x, m.F)
		if m.Norm2 == 1 {
			l.setRank(xn.R)
			copy(l.x.Data, xn.Data)
			rep.Rank, rep.B = l.x.R, l.b
			rep.Index = make([]uint32, len(l.own))
			for li, gi := range l.own {
				rep.Index[li] = uint32(gi)
			}
			rep.Values = append([]float64(nil), l.x.Data[:len(l.own)*l.x.R*l.b]...)
			a.lifted = &message{F: rep.F, Rank: rep.Rank, B: rep.B, Index: rep.Index, Values: rep.Values}
		}
	}
	return nil
}

// EigStep is sync.PartsEigen's step by the agents.
func (pp *partsProver) EigStep(s float64, start, solve bool) (bsync.EigSums, error) {
	c := pp.c
	K := c.p.K
	parts := make([]bsync.EigSums, K)
	reply := func(k int, rep *message) { parts[k] = bsync.EigSums{Norm2: rep.F, VSV: rep.Grad2, SV2: rep.Norm2} }
	if !solve {
		if err := parallel(allParts(K), func(k int) error {
			rep, err := c.request(pp.ctx, k, &message{Op: opEigScale, Rank: c.rank, F: s})
			if err == nil {
				reply(k, rep)
			}
			return err
		}); err != nil {
			return bsync.EigSums{}, err
		}
		return sumParts(parts), nil
	}
	start1 := 0.0
	if start {
		start1 = 1
	}
	reduced := make([][]float64, K)
	if err := parallel(allParts(K), func(k int) error {
		rep, err := c.request(pp.ctx, k, &message{Op: opEigReduce, Rank: c.rank, F: s, Norm2: start1})
		if err != nil {
			return err
		}
		if len(rep.Extra) != len(pp.bnd[k])*pp.b {
			return fmt.Errorf("escape: agent %d reduced to %d values for %d boundary poses", k, len(rep.Extra), len(pp.bnd[k]))
		}
		reduced[k] = rep.Extra
		return nil
	}); err != nil {
		return bsync.EigSums{}, err
	}
	w, err := pp.bp.EigSolve(reduced)
	if err != nil {
		return bsync.EigSums{}, err
	}
	if err := parallel(allParts(K), func(k int) error {
		vals, err := pp.bp.EigValues(w, pp.eigPoses[k])
		if err != nil {
			return err
		}
		ids := make([]uint32, len(pp.eigPoses[k]))
		for t, i := range pp.eigPoses[k] {
			ids[t] = uint32(i)
		}
		rep, err := c.request(pp.ctx, k, &message{Op: opEigBack, Rank: c.rank, Ints: ids, Extra: vals})
		if err == nil {
			reply(k, rep)
		}
		return err
	}); err != nil {
		return bsync.EigSums{}, err
	}
	return sumParts(parts), nil
}

// sumParts adds the parts' shares in the parts' order (the same sums
// whatever order the replies came in).
func sumParts(parts []bsync.EigSums) bsync.EigSums {
	var s bsync.EigSums
	for _, p := range parts {
		s.Norm2, s.VSV, s.SV2 = s.Norm2+p.Norm2, s.VSV+p.VSV, s.SV2+p.SV2
	}
	return s
}

// EigLift is sync.PartsEigen's lift by the agents. With commit they keep
// the lifted blocks and send their own (the staircase holds the point),
// which the coordinator then counts as held by them.
func (pp *partsProver) EigLift(alpha float64, commit bool) (float64, *blockmat.Blocks, error) {
	c := pp.c
	K := c.p.K
	commit1 := 0.0
	if commit {
		commit1 = 1
	}
	fs := make([]float64, K)
	var x *sparse.Blocks
	if commit {
		// The lifted point comes back whole: the staircase holds it.
		x = sparse.NewBlocks(c.rank+1, c.b, c.g.N())
		c.stats.Gathers++
	}
	sz := (c.rank + 1) * c.b
	each := parallel
	if commit {
		each = oneByOne // whole blocks come back (gather)
	}
	err := each(allParts(K), func(k int) error {
		rep, err := c.request(pp.ctx, k, &message{Op: opEigLift, Rank: c.rank, F: alpha, Norm2: commit1})
		if err != nil {
			return err
		}
		fs[k] = rep.F
		if !commit {
			return nil
		}
		if rep.Rank != c.rank+1 || rep.B != c.b || len(rep.Values) != len(rep.Index)*sz {
			return fmt.Errorf("escape: agent %d lifted blocks %d x %d, want %d x %d", k, rep.Rank, rep.B, c.rank+1, c.b)
		}
		for n, gi := range rep.Index {
			if int(gi) >= c.g.N() || c.p.Part[gi] != k {
				return fmt.Errorf("escape: pose %d is not agent %d's", gi, k)
			}
			copy(x.Block(int(gi)), rep.Values[n*sz:(n+1)*sz])
		}
		return nil
	})
	if err != nil {
		if commit {
			// Some agents may hold the lifted point, others not: the next
			// Optimize sets the staircase's point.
			c.held = nil
		}
		return 0, nil, err
	}
	f := 0.0
	for _, v := range fs {
		f += v
	}
	if math.IsNaN(f) {
		return 0, nil, errors.New("escape: F is not a number")
	}
	if commit {
		c.rank = x.R
		c.held = markOf(x)
		c.stats.Escapes++
	}
	return f, x, nil
}
