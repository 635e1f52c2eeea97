package sync

import (
	"errors"
	"fmt"
	"math"

	"github.com/bcmsync/bcmsync/internal/sparse"
	"github.com/bcmsync/bcmsync/posegraph"
	"github.com/bcmsync/bcmsync/posegraph/blockmat"
)

// The saddle escape by parts (issue 30, item 2). When the certificate by
// parts fails, the staircase needs S's eigenvector of its most negative
// eigenvalue. Inverse iteration finds it with solves by S + tau I, tau
// just above -lambda_min(S), and those solves go through the same
// domain-decomposition factorization as the proof: each part factors the
// interior block of its rows of D (S + tau I) D and reduces its piece of
// the right-hand side to its boundary poses, the coordinator solves the
// boundary system, and each part solves for its interior. Every part
// holds its own piece of the vector (and copies of its neighbours'
// boundary values, which the coordinator sends with the boundary
// solution); norms, S's Rayleigh quotient and residual are sums of the
// parts' shares. The escape then lifts every part's blocks along its
// piece, and the line search's F is a sum of the parts' shares too.
//
// Why inverse iteration and not LOBPCG: its one operation is a solve,
// which the parts already know how to make from the proof's factors, and
// each step costs two message rounds (reduce, back). With tau within a
// third of |lambda_min| (a ladder of tenfold shifts, then geometric
// bisection, each a factorization by parts) its rate is
// (tau + lambda_1) / (tau + lambda_2) <= 1/4 against S's null space
// (lambda_2 <= 0 at a critical point): at intel's rank-2 saddle 19 solves
// reach a residual of 1e-9 ||S||, finer than the central eigensolver's
// 1e-6.

// PartsEigen is implemented by a PartsProver whose parts can also find
// S's most negative eigenpair and take the saddle escape without the
// point gathered. Each method acts on the point of the last ProveLambda
// and, for EigStep's solve, the factor of the last ProveFactor, which
// must have been made with a positive Tau.
type PartsEigen interface {
	// EigStep has every part set its piece of the vector to s times the
	// last one the parts computed (the first call, with start set, to s
	// times the fixed start vector), so that a step resent is harmless,
	// then, if solve, replace it by (S + tau I)^-1 times it by parts. It returns the sums over the parts of ||v||^2, v^T S v and
	// ||S v||^2 at the new vector.
	EigStep(s float64, start, solve bool) (EigSums, error)
	// EigLift has every part lift its blocks (own and bordering) to rank
	// r+1 along alpha v, [X_i; alpha v_i^T] with the Stiefel part
	// retracted, and returns the sum of the parts' shares of F there.
	// With commit the parts keep the lifted blocks as their point and
	// return it whole (the staircase holds the point); otherwise they
	// keep their own and the returned point is nil.
	EigLift(alpha float64, commit bool) (float64, *blockmat.Blocks, error)
}

// EigSums are the sums of the parts' shares in inverse iteration.
type EigSums struct {
	Norm2, VSV, SV2 float64
}

// eigState is a PartCertifier's piece of the inverse iteration: the
// vector at its own and bordering poses (unscaled coordinates, q's order)
// and the interior right-hand side of the last reduction.
type eigState struct {
	v, sv, y, xb []float64
	// raw is v as EigStart or EigBack left it, before any scaling:
	// EigReduce and EigScale set v to a multiple of it rather than
	// scaling v in place, so that a command a coordinator resends (its
	// reply lost or late) leaves the vector as one would.
	raw []float64
	at  map[int]int // global pose -> block of q
}

// eigAlloc makes the vectors, once.
func (p *PartCertifier) eigAlloc() {
	if p.eig != nil {
		return
	}
	b := p.b
	e := &eigState{v: make([]float64, p.q.N*b), raw: make([]float64, p.q.N*b), sv: make([]float64, p.nOwn*b), y: make([]float64, p.nI*b),
		xb: make([]float64, (p.nOwn-p.nI)*b), at: make(map[int]int, len(p.ids))}
	for x, i := range p.ids {
		e.at[i] = x
	}
	p.eig = e
}

// EigStart sets the part's piece of the vector to the fixed start, a
// function of each coordinate's global index (the same vector however
// the poses are split).
func (p *PartCertifier) EigStart() {
	p.eigAlloc()
	b := p.b
	clear(p.eig.v)
	for i := 0; i < p.nOwn; i++ {
		for a := 0; a < b; a++ {
			k := p.ids[i]*b + a
			p.eig.v[i*b+a] = 1 + math.Sin(float64(k)*1.618033988749895)
		}
	}
	copy(p.eig.raw, p.eig.v)
}

// EigReduce sets the own piece of the vector to s times what EigStart or
// EigBack left (so a repeated call is harmless) and returns its
// solve's right-hand side reduced to the boundary poses (the order of
// Boundary), in the scaled coordinates of the last Factor, which must
// have been made with a positive Tau: y_B - A_BI A_II^-1 y_I with
// y = D v.
func (p *PartCertifier) EigReduce(s float64) ([]float64, error) {
	if !p.tauFactor {
		return nil, errors.New("sync: PartCertifier.EigReduce without a factor of S + tau I")
	}
	p.eigAlloc()
	b, e := p.b, p.eig
	for k := range e.v[:p.nOwn*b] {
		e.v[k] = s * e.raw[k]
	}
	out := make([]float64, (p.nOwn-p.nI)*b)
	for x, i := range p.order {
		for a := 0; a < b; a++ {
			c := i*b + a
			yv := e.v[c] * p.scale[c]
			if x < p.nI {
				e.y[x*b+a] = yv
			} else {
				out[(x-p.nI)*b+a] = yv
			}
		}
	}
	xi := make([]float64, p.nI*b)
	p.part.SolveInterior(xi, e.y)
	p.part.SubCoupling(out, xi)
	return out, nil
}

// EigBack finishes the part's solve from the boundary solution: vals
// holds, for each global pose of ids, its b values of the solution in
// unscaled coordinates (D x_B; the coordinator's BoundaryProof.EigSolve);
// ids must cover the part's boundary poses, and may name bordering poses
// of other parts, whose values the part keeps for its products with S.
// It returns the part's shares at the new vector.
func (p *PartCertifier) EigBack(ids []int, vals []float64) (EigSums, error) {
	if !p.tauFactor || p.eig == nil {
		return EigSums{}, errors.New("sync: PartCertifier.EigBack before EigReduce")
	}
	b, e := p.b, p.eig
	if len(vals) != len(ids)*b {
		return EigSums{}, fmt.Errorf("sync: EigBack: %d values for %d poses", len(vals), len(ids))
	}
	for t := p.nOwn; t < p.q.N; t++ {
		clear(e.v[t*b : (t+1)*b])
	}
	seen := 0
	for t, i := range ids {
		x, ok := e.at[i]
		if !ok {
			return EigSums{}, fmt.Errorf("sync: EigBack: pose %d is not the part's", i)
		}
		copy(e.v[x*b:(x+1)*b], vals[t*b:(t+1)*b])
		if x < p.nOwn {
			seen++
		}
	}
	// The boundary solution in the scaled coordinates (D is a power of
	// two: the division is exact), then the interior.
	for x, i := range p.order[p.nI:] {
		for a := 0; a < b; a++ {
			e.xb[x*b+a] = e.v[i*b+a] / p.scale[i*b+a]
		}
	}
	if seen != p.nOwn-p.nI {
		return EigSums{}, fmt.Errorf("sync: EigBack: %d of the part's %d boundary poses given", seen, p.nOwn-p.nI)
	}
	rhs := append([]float64(nil), e.y...)
	p.part.SubCouplingT(rhs, e.xb)
	xi := make([]float64, p.nI*b)
	p.part.SolveInterior(xi, rhs)
	for x, i := range p.order[:p.nI] {
		for a := 0; a < b; a++ {
			e.v[i*b+a] = xi[x*b+a] * p.scale[i*b+a]
		}
	}
	copy(e.raw, e.v)
	return p.eigSums(), nil
}

// EigScale sets the part's piece of the vector (own and bordering
// values) to s times what EigStart or EigBack left (so a repeated call is
// harmless) and returns its shares there.
func (p *PartCertifier) EigScale(s float64) EigSums {
	p.eigAlloc()
	for k := range p.eig.v {
		p.eig.v[k] = s * p.eig.raw[k]
	}
	return p.eigSums()
}

// eigSums computes (S v) at the own poses, from the own rows of Q and the
// own Lambda blocks, and the part's shares of ||v||^2, v^T S v, ||S v||^2.
func (p *PartCertifier) eigSums() EigSums {
	b, d, e := p.b, p.d, p.eig
	var s EigSums
	v := &blockmat.Blocks{R: 1, B: b, N: p.q.N, Data: e.v} // v as a rank-1 point: (v Q)_i is (Q v)_i
	for i := 0; i < p.nOwn; i++ {
		out := e.sv[i*b : (i+1)*b]
		p.q.MulBlockRow(out, v, i)
		l := p.lam[i*d*d : (i+1)*d*d]
		vi := e.v[i*b : (i+1)*b]
		for r := 0; r < d; r++ {
			for f := 0; f < d; f++ {
				out[r] -= l[r*d+f] * vi[f]
			}
		}
		for r := 0; r < b; r++ {
			s.Norm2 += vi[r] * vi[r]
			s.VSV += vi[r] * out[r]
			s.SV2 += out[r] * out[r]
		}
	}
	return s
}

// EigVector copies the own piece of the vector into dst (nOwn*b values,
// the own poses' order).
func (p *PartCertifier) EigVector(dst []float64) {
	if p.eig != nil {
		copy(dst, p.eig.v[:p.nOwn*p.b])
	}
}

// EigLift sets xn (rank x.R+1, every block of the part: own and
// bordering, q's order) to x lifted along alpha v, [X_i; alpha v_i^T]
// with each Stiefel part retracted (the staircase's escape, pose by
// pose), and returns the part's share of F at xn, sum over its own poses
// of <X_i, (X Q)_i>.
func (p *PartCertifier) EigLift(xn, x *blockmat.Blocks, alpha float64) float64 {
	p.eigAlloc()
	r, b, d := x.R, p.b, p.d
	liftBlocks(xn, x, p.eig.v, alpha, d, p.q.N, make([]float64, (r+1)*d), make([]float64, (r+1)*d))
	nq := make([]float64, (r+1)*b)
	f := 0.0
	for i := 0; i < p.nOwn; i++ {
		p.q.MulBlockRow(nq, xn, i)
		for k, v := range xn.Block(i) {
			f += v * nq[k]
		}
	}
	return f
}

// EigSolve solves the boundary system of the last Factor (made with a
// positive Tau) for the parts' reduced right-hand sides (EigReduce, in
// the parts' order) and returns the solution at the boundary poses in
// unscaled coordinates (D x_B), in the boundary system's numbering
// (EigValues reads it out by pose).
func (bp *BoundaryProof) EigSolve(reduced [][]float64) ([]float64, error) {
	b := bp.b
	if len(reduced) != len(bp.parts) {
		return nil, fmt.Errorf("sync: %d reduced right-hand sides for %d parts", len(reduced), len(bp.parts))
	}
	y := make([]float64, len(bp.index)*b)
	for k, rk := range reduced {
		if len(rk) != len(bp.parts[k])*b {
			return nil, fmt.Errorf("sync: part %d's reduced right-hand side has %d values, want %d", k, len(rk), len(bp.parts[k])*b)
		}
		for t, j := range bp.parts[k] {
			for a := 0; a < b; a++ {
				y[j*b+a] += rk[t*b+a]
			}
		}
	}
	w := make([]float64, len(y))
	bp.sys.Solve(w, y)
	for k := range w {
		w[k] *= bp.scale[k]
	}
	return w, nil
}

// EigValues returns w's values (EigSolve's numbering) at the given poses,
// which must be boundary poses.
func (bp *BoundaryProof) EigValues(w []float64, poses []int) ([]float64, error) {
	b := bp.b
	out := make([]float64, 0, len(poses)*b)
	for _, i := range poses {
		j, ok := bp.index[i]
		if !ok {
			return nil, fmt.Errorf("sync: pose %d is not a boundary pose", i)
		}
		out = append(out, w[j*b:(j+1)*b]...)
	}
	return out, nil
}

// eigByParts finds S's most negative eigenpair by parts (see above) at
// the point of the prover's last ProveLambda, and leaves the parts
// holding the unit eigenvector. tau0 is the first shift tried. ok is
// false when no shift of the ladder factored, or the iteration found no
// negative curvature; the value is then NaN.
func (c *certifier) eigByParts(pe PartsEigen, tau0, normS float64) (val float64, ok bool, err error) {
	val = math.NaN()
	factors := func(tau float64) (bool, error) {
		return c.prover.ProveFactor(ProofShift{Tau: tau, Anchor: c.anchor})
	}
	lo, tau := 0.0, tau0
	found := false
	for k := 0; k < eigLadder && !found; k++ {
		if c.pastDeadline() {
			return val, false, nil
		}
		if found, err = factors(tau); err != nil {
			return val, false, err
		}
		if !found {
			lo, tau = tau, tau*10
		}
	}
	if !found {
		return val, false, nil
	}
	// Geometric bisection between the last shift that failed and the
	// first that factored: tau ends within a factor 10^(1/8) of the
	// smallest that factors, which is about -lambda_min.
	if lo > 0 {
		last := false // the last factorization was tau's
		for k := 0; k < eigBisections; k++ {
			mid := math.Sqrt(lo * tau)
			ok, err := factors(mid)
			if err != nil {
				return val, false, err
			}
			if ok {
				tau = mid
			} else {
				lo = mid
			}
			last = ok
		}
		// The solves use the last factor: it must be tau's.
		if !last {
			if ok, err := factors(tau); err != nil || !ok {
				return val, false, err
			}
		}
	}
	s, err := pe.EigStep(1, true, true)
	if err != nil {
		return val, false, err
	}
	prev := math.Inf(1)
	for it := 1; ; it++ {
		if !(s.Norm2 > 0) || math.IsInf(s.Norm2, 0) {
			return val, false, nil
		}
		rho := s.VSV / s.Norm2
		res := math.Sqrt(math.Max(s.SV2/s.Norm2-rho*rho, 0))
		if res <= eigResTol*normS || it >= eigMaxSteps || c.pastDeadline() || math.Abs(rho-prev) <= 1e-15*normS {
			break
		}
		prev = rho
		if s, err = pe.EigStep(1/math.Sqrt(s.Norm2), false, true); err != nil {
			return val, false, err
		}
	}
	s, err = pe.EigStep(1/math.Sqrt(s.Norm2), false, false)
	if err != nil {
		return val, false, err
	}
	val = s.VSV / s.Norm2
	return val, val < 0, nil
}

// The inverse iteration by parts: at most eigLadder tenfold shifts, then
// eigBisections halvings of the exponent, then steps until the residual
// ||S v - rho v|| is eigResTol times ||S|| (the central eigensolver's
// tolerance is 1e-6: this is finer, as each step is cheap next to a
// factorization), at most eigMaxSteps.
const (
	eigLadder     = 16
	eigBisections = 3
	eigResTol     = 1e-9
	eigMaxSteps   = 200
)

// MethodEigParts is Level.EigMethod of a failed certificate whose
// eigenvector was found by parts (inverse iteration through the parts'
// factors), without the point gathered.
const MethodEigParts = "inverse-iteration-parts"

// escapeByParts is escape made by the parts along their pieces of the
// eigenvector (the last eigByParts): the same line search, F summed from
// the parts' shares. It returns the lifted point, which the parts then
// hold, and F's decrease (0: none, and the point is x embedded).
func escapeByParts(pe PartsEigen, n int) (*sparse.Blocks, float64, error) {
	alpha, dec, err := escapeSearch(n, func(alpha float64) (float64, error) {
		f, _, err := pe.EigLift(alpha, false)
		return f, err
	})
	if err != nil {
		return nil, 0, err
	}
	_, xn, err := pe.EigLift(alpha, true) // alpha 0 when there is no decrease
	return xn, dec, err
}

// checkEscaped tests the point the parts escaped to while the driver
// holds it, as certifyByParts tests their tr(Lambda): of the next rank
// and x's shape, finite, its Stiefel parts on the manifold to 1e-9, and,
// when lower, F lower than at x. It returns F's decrease computed here,
// which the level records (the parts' sum differs from it by rounding),
// or 0 when not lower.
func (r *Run) checkEscaped(x, xn *sparse.Blocks, lower bool) (float64, error) {
	if xn == nil || xn.R != x.R+1 || xn.N != x.N || xn.B != x.B {
		return 0, errors.New("the parts returned a point of another shape")
	}
	d, b := r.g.D, xn.B
	for i := 0; i < xn.N; i++ {
		blk := xn.Block(i)
		for _, v := range blk {
			if math.IsNaN(v) || math.IsInf(v, 0) {
				return 0, fmt.Errorf("pose %d of the escaped point is not finite", i)
			}
		}
		for a := 0; a < d; a++ {
			for c := 0; c < d; c++ {
				s := 0.0
				for k := 0; k < xn.R; k++ {
					s += blk[k*b+a] * blk[k*b+c]
				}
				if a == c {
					s--
				}
				if !(math.Abs(s) <= 1e-9) {
					return 0, fmt.Errorf("pose %d of the escaped point is off the manifold (Y^T Y - I has %.3g)", i, s)
				}
			}
		}
	}
	if !lower {
		return 0, nil
	}
	var rows *posegraph.LaplacianRows
	cost := func(x *sparse.Blocks) float64 {
		n := sparse.NewBlocks(x.R, x.B, x.N)
		if r.q != nil {
			return posegraph.TraceCost(r.q, x, n)
		}
		// The same bits, with Q's rows made a chunk at a time.
		if rows == nil {
			rows = r.g.NewLaplacianRows(r.opts.Problem)
		}
		return rows.TraceCost(x, n)
	}
	f0, f := cost(x), cost(xn)
	if !(f < f0) {
		return 0, fmt.Errorf("F %.17g at the escaped point is not below %.17g", f, f0)
	}
	return f0 - f, nil
}

// escape steps x along the failed certificate c's eigenvector into rank
// rank+1 and returns the new point and F's decrease (0: none): by the
// parts that hold the eigenvector, or here. A failure of the parts
// falls back to the eigenvector of the point at hand.
func (r *Run) escape(x *sparse.Blocks, c certificate, rank int) (*sparse.Blocks, float64) {
	v := c.vector
	if c.partsVector {
		if pe, ok := r.cert.prover.(PartsEigen); ok {
			xn, pdec, err := escapeByParts(pe, x.N)
			if err == nil {
				// No decrease along the eigenvector (the parts hold x
				// embedded): the central escape would find none either,
				// so the point at the next rank is taken as it is.
				var dec float64
				if dec, err = r.checkEscaped(x, xn, pdec > 0); err == nil {
					return xn, dec
				}
			}
			r.opts.Logger.Warn("escape by parts failed; escaping from the point at hand", "err", err)
		}
		cc, err := r.cert.certifyCentral(r.cert.manifold(rank, r.opts.Threads), x, true)
		if err != nil || cc.vector == nil {
			xn := sparse.NewBlocks(rank+1, x.B, x.N)
			for i := 0; i < x.N; i++ {
				copy(xn.Block(i), x.Block(i))
			}
			return xn, 0
		}
		v = cc.vector
	}
	m := r.cert.manifold(rank+1, r.opts.Threads)
	defer m.hold()() // the line search multiplies by Q at every step
	return escape(m, x, v)
}
