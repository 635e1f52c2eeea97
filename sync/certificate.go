package sync

import (
	"errors"
	"fmt"
	"math"
	"sort"
	"time"

	"github.com/bcmsync/bcmsync/internal/sparse"
	"github.com/bcmsync/bcmsync/posegraph/blockmat"
)

// certificate is the outcome of checking a point X (docs/design.md section 5):
// the multipliers Lambda_i = sym(Y_i^T (XQ)_Y,i), S = Q - Lambda, and either
// a proof that S is positive semidefinite up to a shift eta on the rotation
// coordinates, or an eigenvector of negative curvature for the staircase.
type certificate struct {
	lam      []float64
	trLambda float64
	// psd: S plus a diagonal shift E on rotation coordinates has a
	// Cholesky factor (scaled, with the common translation grounded; see
	// check), so v^T S v >= -v^T E v for every v. By weak duality every
	// feasible point then has F >= tr(Lambda) - tr(E), because the
	// relaxation's Z is 1 at every rotation coordinate's diagonal.
	psd bool
	// eta is the mean of E over the shiftPoses poses' d rotation
	// coordinates each: tr(E) = eta d shiftPoses. sigma and mu are the
	// shift that produced it (E = sigma/D_c^2 + mu at each shifted
	// coordinate c; mu only in a failing point's weak bound), for a proof
	// and for a weak bound alike.
	eta, sigma, mu float64
	// shiftPoses is the number of poses whose rotation coordinates carry
	// the shift: 1 (the anchor, see check) or n (every pose).
	shiftPoses int
	// dualBound is tr(Lambda) - eta d shiftPoses: a rigorous lower bound
	// on the optimum when psd, and no bound at all otherwise.
	dualBound float64
	// lowerBound, when hasLower, is a proven lower bound on the optimum
	// from a point that failed the test (see weakBound); when psd it is
	// dualBound.
	lowerBound float64
	hasLower   bool
	// minEig estimates lambda_min(S): from inverse iteration on the factor
	// when psd (an upper estimate), from the eigensolver otherwise.
	minEig float64
	vector []float64 // unit eigenvector of S when not psd
	// partsVector: the unit eigenvector is held by the parts of a
	// PartsEigen prover (vector is nil; the escape goes by parts).
	partsVector bool
	method      string
	// floorCost is the least any shift the check may try costs the bound
	// (the anchor's or every pose's at the rounding floor): no tolerance
	// below it can be proven at this point in double precision.
	floorCost float64
	// timedOut: the certifier's deadline passed before the check was
	// complete (no proof, and no eigenvector even if one was asked for).
	timedOut bool
}

// certifier checks points against one Q; it keeps S's storage and the
// symbolic factorization of its pattern across calls.
type certifier struct {
	q, s, sh *sparse.BlockSym // Q; S; S scaled, shifted and grounded for the Cholesky test
	d        int
	n, b     int // Q's blocks and their size
	// maxDiag is Q's largest diagonal entry (the eigensolvers' scale).
	maxDiag float64
	// makeQ makes Q again when the certifier holds none (q nil: letGo):
	// a test the parts leave to the gathered point makes it for that
	// test. mulRows is X Q without Q (the check of the parts' tr(Lambda)).
	makeQ   func() *sparse.BlockSym
	mulRows func(dst, x *sparse.Blocks)
	// scale holds the diagonal congruence D of the Cholesky test, one power
	// of two per coordinate (see buildShifted): the test factors D S D.
	scale []float64
	// The slack the shift may cost the bound is half the allowed gap,
	// gapAllowed(tr Lambda, unit, gapTol, gapAbs) / 2 (see fUnit).
	gapTol, gapAbs float64
	// floor is the least any shift the check tries costs the bound (the
	// anchor's at 10 eigTol or every pose's at eigTol, whichever is less):
	// a property of Q, set with the anchor (analyze).
	floor float64
	// eigTol is the smallest shift, in the scaled coordinates where every
	// diagonal entry is about 1: below it the factorization is rounding,
	// not proof.
	eigTol float64
	anchor int                   // the pose the factor eliminates last (see check)
	perm   []int                 // fill-reducing order of Q's pattern (nil: AMD)
	sym    *sparse.BlockSymbolic // the pattern's block analysis in perm's order (nil: none)
	chol   *sparse.Cholesky
	seed   uint64
	// nullStart starts the inverse iteration from the point's first row
	// (see inverseIteration) instead of a fixed vector.
	nullStart bool
	inv       []float64 // inverse-iteration vectors
	inv2      []float64
	sMulV     []float64
	// free marks landmark blocks (nil: none; see landmarks.go) and nposes
	// counts the others, whose Y parts the bound pays the shift for.
	free   []bool
	nposes int
	// weightAll is sum over the rotation coordinates c of every pose of
	// 1/D_c^2, what a unit shift in the scaled coordinates costs the bound
	// when it is on every pose; weightAnchor the same sum over the anchor's
	// rotation coordinates.
	weightAll, weightAnchor float64
	// deadline, when set, stops a check between its factorizations.
	deadline time.Time
	// ddPart, when set, assigns each block of Q to a part (a distributed
	// run's agents): the test then factors in the parts' order, every
	// part's interior first and the boundary system last
	// (sparse.DomainCholesky), the order in which agents that hold only
	// their own rows factor, and the anchor is a boundary pose, the
	// boundary system's last pivot (ddAnchor when >= 0, else the lightest
	// boundary pose). The proof is the same: a Cholesky factor of the
	// scaled, shifted, grounded S whose pivots pass the test relative to
	// its largest diagonal entry, in another order.
	ddPart   []int
	ddAnchor int
	dd       *sparse.DomainCholesky
	// prover, when set, makes the test by parts where the parts hold the
	// point (a level optimizer's PartsProver): ddPart and ddAnchor are
	// then its partition and anchor, so that a failed test, which the
	// driver repeats on the gathered point for the eigenvector, is made
	// in the same order with the same anchor and floor.
	prover      PartsProver
	domainReady bool // analyzeDomain has chosen the anchor
}

// newCertifier prepares the checks against q. S's storage is made when S
// is first built (buildS): until then the trust region holds the most
// memory, and two copies of Q and three vectors would add to its peak
// (docs/tuning.md, "Tuning figures": newCertifier).
func newCertifier(q *sparse.BlockSym, d int, gapTol, gapAbs, eigTol float64, perm []int, seed uint64) *certifier {
	return newCertifierOf(qFactsOf(q, d), q, d, gapTol, gapAbs, eigTol, perm, seed)
}

// qFacts is what a certifier takes from Q for the tests by parts: its
// size, the Jacobi scale, the landmark blocks and the largest diagonal
// entry. A run whose optimizer works by parts takes them before Init and
// lets Q go (Run.letQGo).
type qFacts struct {
	n, b    int
	scale   []float64
	free    []bool
	maxDiag float64
}

func qFactsOf(q *sparse.BlockSym, d int) qFacts {
	return qFacts{n: q.N, b: q.B, scale: jacobiScale(q), free: rotationFreeBlocks(q, d), maxDiag: q.MaxDiag()}
}

// newCertifierOf is newCertifier from Q's facts, with q itself or nil (the
// tests that need Q then make it: letGo's makeQ).
func newCertifierOf(f qFacts, q *sparse.BlockSym, d int, gapTol, gapAbs, eigTol float64, perm []int, seed uint64) *certifier {
	c := &certifier{q: q, d: d, n: f.n, b: f.b, maxDiag: f.maxDiag, scale: f.scale, gapTol: gapTol, gapAbs: gapAbs, eigTol: eigTol,
		perm: perm, seed: seed, free: f.free, nposes: f.n - countFree(f.free), ddAnchor: -1}
	c.weightAll = c.shiftWeight(-1)
	return c
}

// jacobiScale returns, for every coordinate c of q, a power of two near
// 1/sqrt(Q_cc) (1 where Q_cc is 0: a landmark's rotation coordinates):
// 2^(-e/2), Q_cc = f 2^e with f in [1/2, 1) and e/2 truncated toward zero,
// so D_c^2 Q_cc is f for an even e, 2f for an odd e > 0 and f/2 for an
// odd e < 0. D Q D then has every nonzero diagonal entry in [1/4, 2),
// and D S D, the matrix the certificate factors, has its rotation diagonal
// near 1 wherever Lambda is small next to Q. Powers of two make the
// scaling exact in floating point: the factor is of D S D itself, not of
// a rounded copy.
func jacobiScale(q *sparse.BlockSym) []float64 {
	b := q.B
	scale := make([]float64, q.Dim())
	for i := 0; i < q.N; i++ {
		blk := q.Block(q.Diag[i])
		for a := 0; a < b; a++ {
			scale[i*b+a] = 1
			if v := blk[a*b+a]; v > 0 && !math.IsInf(v, 0) {
				_, e := math.Frexp(v) // v = f 2^e, f in [1/2, 1)
				scale[i*b+a] = math.Ldexp(1, -e/2)
			}
		}
	}
	return scale
}

// shiftWeight returns sum over the rotation coordinates c of pose i (of
// every pose when i < 0) of 1/D_c^2: a shift sigma on those coordinates of
// D S D is a shift sigma/D_c^2 on each of S's, and costs the bound
// sigma times this sum (see check).
func (c *certifier) shiftWeight(i int) float64 {
	if i >= 0 {
		return c.poseWeight(i)
	}
	w := 0.0
	for k := 0; k < c.n; k++ {
		w += c.poseWeight(k)
	}
	return w
}

// poseWeight is shiftWeight of pose i alone (0 for a landmark).
func (c *certifier) poseWeight(i int) float64 {
	if c.free != nil && c.free[i] {
		return 0
	}
	b := c.b
	w := 0.0
	for a := 0; a < c.d; a++ {
		s := c.scale[i*b+a]
		w += 1 / (s * s)
	}
	return w
}

// alloc makes S's storage and the inverse iteration's vectors, once.
func (c *certifier) alloc() {
	if c.s != nil {
		return
	}
	n := c.q.Dim()
	c.s, c.sh = c.q.Clone(), c.q.Clone()
	c.inv, c.inv2, c.sMulV = make([]float64, n), make([]float64, n), make([]float64, n)
}

// buildS sets c.s = Q - Lambda (Lambda zero on the translation parts).
func (c *certifier) buildS(lam []float64, d int) {
	c.alloc()
	copy(c.s.Val, c.q.Val)
	b := c.q.B
	for i := 0; i < c.q.N; i++ {
		blk := c.s.Block(c.s.Diag[i])
		l := lam[i*d*d : (i+1)*d*d]
		for a := 0; a < d; a++ {
			for e := 0; e < d; e++ {
				blk[a*b+e] -= l[a*d+e]
			}
		}
	}
}

// shift is what buildShifted adds to the rotation diagonal of D S D:
// sigma on the anchor's coordinates only (anchor) or on every pose's, plus
// mu D_c^2 at every pose's coordinate c, which is a shift mu on S itself
// (a failing point's weak bound, from S's own eigenvalue).
type shift struct {
	anchor    bool
	sigma, mu float64
}

// cost is what the shift costs the dual bound: sum over the shifted
// coordinates c of the shift on S there, sigma/D_c^2 + mu, times the
// trace 1 the relaxation's Z has at every rotation coordinate.
func (c *certifier) cost(sh shift) float64 {
	w := c.weightAll
	if sh.anchor {
		w = c.weightAnchor
	}
	return sh.sigma*w + sh.mu*float64(c.d*c.nposes)
}

// buildShifted sets c.sh = D (S + mu E_a) D + the shift: D S D with D the
// diagonal congruence c.scale, the shift sh on its rotation diagonal, and
// mu E_a, mu > 0 on the anchor's translation diagonal. The common
// translation shift is an exact null vector of S with a nonzero component
// there, so S + mu E_a is positive semidefinite exactly when S is (write
// any v as w plus a shift with w zero at the anchor): adding mu grounds the
// gauge without dropping rows, and keeps one pattern for every call.
//
// The congruence preserves positive definiteness, and D S D + Sigma
// (Sigma diagonal, nonzero on rotation coordinates) has a factor exactly
// when S + D^-1 Sigma D^-1 has: the shift on S is Sigma_c / D_c^2, what
// cost adds up. The factorization's pivot test is relative to the largest
// diagonal entry, and the rounding it guards against is relative to each
// pivot's own row: with every diagonal entry near 1, one relative floor
// (eigTol) fits every coordinate, where weights spanning six decades made
// a floor relative to the largest entry of Q cost the light poses a shift
// a million times their own scale. The translation coordinates are scaled
// the same way, which balances them against the rotations (S's near-null
// vectors, the rows of X, are mostly translation when the map is large:
// kitti_00, translations over kilometres).
func (c *certifier) buildShifted(sh shift) {
	copy(c.sh.Val, c.s.Val)
	b := c.b
	sparse.ScaleCongruent(c.sh, c.scale)
	for i := 0; i < c.n; i++ {
		shiftDiagBlock(c.sh.Block(c.sh.Diag[i]), c.scale[i*b:(i+1)*b], sh, i == c.anchor, c.free != nil && c.free[i], c.d)
	}
}

// shiftDiagBlock applies buildShifted's shift and grounding to one pose's
// diagonal block of D S D (scale its D; anchor: the pose is the anchor;
// free: a landmark), the same for a whole matrix and for a part's rows.
func shiftDiagBlock(blk, scale []float64, sh shift, anchor, free bool, d int) {
	b := len(scale)
	if free {
		// A landmark's Y rows and columns of S are zero: any positive
		// diagonal leaves the test unchanged, and its translation
		// diagonal keeps the pivots in scale.
		for a := 0; a < d; a++ {
			blk[a*b+a] = blk[d*b+d]
		}
		return
	}
	if !sh.anchor || anchor {
		for a := 0; a < d; a++ {
			blk[a*b+a] += sh.sigma
		}
	}
	if sh.mu != 0 {
		for a := 0; a < d; a++ {
			s := scale[a]
			blk[a*b+a] += sh.mu * s * s
		}
	}
	if anchor && b > d {
		// mu = the diagonal itself: any mu > 0 grounds. A pose with no
		// edge (a graph of one pose) has a zero translation row, which
		// any mu > 0 leaves positive semidefinite too.
		if blk[d*b+d] == 0 {
			blk[d*b+d] = 1
		} else {
			blk[d*b+d] *= 2
		}
	}
}

// check certifies x: S plus a shift on rotation coordinates must have a
// Cholesky factor. Only when that fails is the smallest eigenpair computed,
// because then the staircase needs its eigenvector.
//
// The test factors D S D plus a shift sigma on rotation coordinates, D the
// power-of-two Jacobi scaling of buildShifted; that proves S plus the
// diagonal shift sigma/D_c^2 at each of those coordinates c positive
// semidefinite. Every feasible Z of the relaxation has Z_cc = 1 at every
// rotation coordinate (its diagonal blocks are I_d there), so
// tr(S Z) >= -sum_c sigma/D_c^2 and F* >= tr(Lambda) - cost (see cost and
// docs/certificate.md).
//
// Two shifts are tried, each first at a size costing the bound at most
// half the allowed gap (never below the rounding floor eigTol); their
// retries cost more, and a bound they prove is reported as it is (settle
// then demotes the status if it exceeds the allowance). First the anchor
// shift: sigma on the rotation coordinates of one pose only, the one the
// factor eliminates last, which costs sigma times that pose's weight
// (about d, in units of its own diagonal) whatever n is. At a minimum
// whose null space S X^T = 0 is no more than a pose block (rank d, the
// common case) the anchor's pivots are the Schur complement of everything
// else, zero up to rounding, so sigma only has to clear the pivot test. At
// a higher rank, or where S has a negative eigenvalue that the anchor
// cannot absorb, it fails, and the shift on every pose's rotation
// coordinates is tried: sigma times the weight of all of them.
func (c *certifier) check(m *manifold, x *sparse.Blocks) (certificate, error) {
	return c.certify(m, x, true)
}

// checkOnly is check without the eigenpair when the test fails (minEig is
// then NaN and vector nil): for a point the staircase will not leave.
func (c *certifier) checkOnly(m *manifold, x *sparse.Blocks) (certificate, error) {
	return c.certify(m, x, false)
}

// pastDeadline reports whether the certifier's deadline (zero: none) has
// passed: between its factorizations, and before the eigensolver, the
// check stops there (the factorization running may finish).
func (c *certifier) pastDeadline() bool {
	return !c.deadline.IsZero() && time.Now().After(c.deadline)
}

func (c *certifier) certify(m *manifold, x *sparse.Blocks, wantVector bool) (certificate, error) {
	if c.prover != nil {
		// A test the parts could not make (an agent gone) or that failed is
		// made on the gathered point, in the same order.
		cert, ok, err := c.certifyByParts(m, x)
		if err == nil && ok {
			return cert, nil
		}
		if err == nil && c.pastDeadline() {
			// The parts' tries ran out of time: no test starts after the
			// deadline, the gathered point's neither.
			cert.timedOut, cert.dualBound = true, cert.trLambda
			return cert, nil
		}
		if pe, isEig := c.prover.(PartsEigen); err == nil && isEig {
			// A saddle: its eigenvector by parts, unless that fails too.
			cert.dualBound = cert.trLambda
			if !wantVector {
				cert.minEig = math.NaN()
				return cert, nil
			}
			if done, err := c.eigenvectorByParts(&cert, pe); err != nil || done {
				return cert, err
			}
			if c.pastDeadline() {
				// The parts' inverse iteration ran out of time: the
				// gathered point's test would start after the deadline.
				cert.timedOut, cert.minEig = true, math.NaN()
				return cert, nil
			}
		}
	}
	return c.certifyCentral(m, x, wantVector)
}

// eigenvectorByParts finds, for a point that failed the test by parts,
// S's most negative eigenpair by parts (eigByParts) and the weak bound
// with factorizations by parts. done is false when it found no negative
// curvature, or the parts failed: the caller then tests the gathered
// point.
func (c *certifier) eigenvectorByParts(cert *certificate, pe PartsEigen) (done bool, err error) {
	d := c.d
	_, sigma := c.shifts(cert.trLambda)
	normS := c.maxDiag
	tau0 := math.Max(1000*sigma*c.weightAll/float64(d*c.nposes), 1e-12*normS)
	val, ok, err := c.eigByParts(pe, tau0, normS)
	if err != nil || !ok {
		return false, nil
	}
	cert.minEig, cert.partsVector, cert.method = val, true, MethodEigParts
	c.weakBoundWith(cert, shift{mu: -val}, func(sh shift) bool {
		ok, err := c.prover.ProveFactor(ProofShift{Sigma: sh.sigma, Mu: sh.mu, AnchorOnly: sh.anchor, Anchor: c.anchor})
		return err == nil && ok
	})
	return true, nil
}

// shifts returns the certificate's shifts for a point whose tr(Lambda) is
// trLambda: each spends half the allowance, on the anchor's block alone
// (sigmaA) or on every pose's (sigma), and none is below the rounding
// floor.
func (c *certifier) shifts(trLambda float64) (sigmaA, sigma float64) {
	slack := gapAllowed(trLambda, c.fUnit(), c.gapTol, c.gapAbs) / 2
	return math.Max(slack/c.weightAnchor, 10*c.eigTol), math.Max(slack/c.weightAll, c.eigTol)
}

// certifyCentral is certify on the point itself: S built and factored
// here. A certifier that let Q go (letGo) makes it again for this test
// and lets it go after, with S's storage and factor: the test is a
// fallback of a run whose parts certify, and what it holds would stay on
// the run's peak.
func (c *certifier) certifyCentral(m *manifold, x *sparse.Blocks, wantVector bool) (certificate, error) {
	if c.q == nil {
		release := m.hold()
		c.q = m.q
		defer func() {
			release()
			c.q, c.s, c.sh, c.dd = nil, nil, nil, nil
			c.inv, c.inv2, c.sMulV = nil, nil, nil
		}()
	}
	nq := m.newBlocks()
	m.mulQ(nq, x)
	d := m.d
	cert := certificate{lam: make([]float64, m.n*d*d)}
	m.lambda(cert.lam, x, nq)
	cert.trLambda = m.traceLambda(cert.lam)
	c.buildS(cert.lam, d)
	if !c.analyzed() {
		if err := c.analyze(); err != nil {
			return cert, err
		}
	}
	sigmaA, sigma := c.shifts(cert.trLambda)
	cert.floorCost = c.floor
	for k, t := range c.tries(sigmaA, sigma) {
		if k > 0 && c.pastDeadline() {
			cert.timedOut = true
			break
		}
		c.buildShifted(t)
		err := c.factor()
		if err == nil {
			cost := c.cost(t)
			cert.psd, cert.shiftPoses = true, c.nposes
			if t.anchor {
				cert.shiftPoses = 1
			}
			cert.eta, cert.sigma = cost/float64(d*cert.shiftPoses), t.sigma
			cert.dualBound = cert.trLambda - cost
			cert.lowerBound, cert.hasLower = cert.dualBound, true
			cert.minEig = c.inverseIteration(cert.eta, x)
			cert.method = c.methodName()
			return cert, nil
		}
		var npd *sparse.NotPositiveDefiniteError
		if !errors.As(err, &npd) {
			return cert, fmt.Errorf("certificate: factoring S + eta I: %w", err)
		}
	}
	cert.dualBound = cert.trLambda
	if !wantVector || cert.timedOut || c.pastDeadline() {
		cert.timedOut = cert.timedOut || wantVector
		cert.minEig = math.NaN()
		return cert, nil
	}
	// No factor: S has a direction of negative curvature, which the
	// staircase needs. A factor of S + tau I with tau just above
	// |lambda_min| preconditions LOBPCG well (the factor of Q is poor when
	// Lambda is large on Q's low modes).
	tau0 := math.Max(1000*sigma*c.weightAll/float64(d*c.nposes), 1e-12*c.s.MaxDiag())
	v, val, err := c.smallestEig(c.s, tau0)
	if err != nil {
		return cert, err
	}
	scaled := false
	if !(val < 0) {
		// The eigensolver's residual test is relative to ||S||: with one
		// weight 1e8 among 1s (||S|| ~ 1e9) it accepted a positive value
		// at a saddle of curvature -0.27. The scaled D S D (grounded) has
		// a spectrum the weights' spread does not stretch: a unit
		// eigenvector u of it with eigenvalue mu < 0 gives the direction
		// D u, along which (D u)^T S (D u) = mu < 0.
		c.buildShifted(shift{})
		u, mu, err := c.smallestEig(c.sh, math.Max(1000*sigma, 1e-12*c.sh.MaxDiag()))
		if err != nil {
			return cert, err
		}
		for k := range u {
			u[k] *= c.scale[k]
		}
		normalize(u)
		if mu < 0 {
			v, val, scaled = u, mu, true
		}
	}
	// The reported value is S's Rayleigh quotient at the unit direction v
	// (an upper bound on lambda_min(S); its eigenvalue when v came from S).
	c.s.MulVec(c.sMulV, v)
	cert.minEig = 0
	for k, x := range v {
		cert.minEig += x * c.sMulV[k]
	}
	cert.vector = v
	cert.method = "eigensolver"
	if scaled {
		c.weakBound(&cert, shift{sigma: -val})
	} else {
		c.weakBound(&cert, shift{mu: -val})
	}
	return cert, nil
}

// smallestEig returns a unit eigenvector of a's smallest eigenvalue and
// the eigenvalue, by LOBPCG preconditioned by a factor of a + tau I with
// tau the first of tau0, 10 tau0, ... (14 tries) that factors, or by
// Lanczos when none does. a has S's pattern, so the factor is the check's
// own (c.chol, free until the check factors again): a new one, with its
// own ordering and symbolic analysis, took more time than the
// eigensolver itself at 3,500 poses (M3500b's rank-2 saddle, whose check
// fails), and on a failing check every factorization of c.chol after the
// eigensolver starts over. A check by parts has no c.chol and makes one.
func (c *certifier) smallestEig(a *sparse.BlockSym, tau0 float64) ([]float64, float64, error) {
	var pre sparse.Preconditioner
	if c.chol == nil {
		// A check by parts (ddPart) has no whole factor of S's pattern
		// to lend: a shifted factor of its own.
		if sh, _, err := sparse.FactorShifted(a, tau0, 14); err == nil {
			pre = sh
		}
	}
	for k, tau := 0, tau0; c.chol != nil && k < 14 && tau0 > 0 && !math.IsInf(tau0, 0); k, tau = k+1, tau*10 {
		err := c.chol.FactorizeBlocks(a, tau)
		if err == nil {
			pre = c.chol
			break
		}
		if !sparse.IsNotPositiveDefinite(err) {
			break
		}
	}
	res, err := sparse.SmallestEig(a, sparse.EigOptions{
		Tol: 1e-6, MaxIter: 2000, BlockSize: 4, Seed: c.seed, Precond: pre,
	})
	if err != nil {
		return nil, 0, fmt.Errorf("certificate: smallest eigenpair of S: %w", err)
	}
	return res.Vector, res.Value, nil
}

// weakBound gives a point that failed the certificate a proven lower bound
// on the optimum all the same: if D S D plus a shift on the rotation
// coordinates factors, the argument of check gives F* >= tr(Lambda) -
// cost(shift) for any shift. The shift is a multiple of unit, the negative
// curvature found (mu on S itself, the eigenvalue of S, or sigma on D S D,
// that of the scaled matrix): a little above it (1.25 times, then up to
// twenty times: the negative eigenvector may be mostly translation, which
// the shift does not touch), on top of the rounding floor. The bound is
// usually far below F but not useless: with wrong loop closures it can
// prove F* hundreds of standard deviations above what consistent data
// give (see Result.ExpectedObjective; docs/tuning.md, "Tuning
// figures": weakBound). One or two factorizations, against the
// eigensolver's dozens of solves.
func (c *certifier) weakBound(cert *certificate, unit shift) {
	c.weakBoundWith(cert, unit, func(sh shift) bool {
		c.buildShifted(sh)
		return c.factor() == nil
	})
}

// weakBoundWith is weakBound with factors deciding whether D S D plus a
// shift factors (by parts, or here).
func (c *certifier) weakBoundWith(cert *certificate, unit shift, factors func(shift) bool) {
	if !(unit.sigma >= 0 && unit.mu >= 0) || math.IsInf(unit.sigma+unit.mu, 0) || unit.sigma+unit.mu == 0 {
		return
	}
	at := func(f float64) shift { return shift{sigma: c.eigTol + f*unit.sigma, mu: f * unit.mu} }
	f, ok := smallestTrue(weakMultiples, func(f float64) bool {
		if c.pastDeadline() {
			return false
		}
		return factors(at(f))
	})
	if ok {
		sh := at(f)
		cert.hasLower, cert.lowerBound, cert.sigma, cert.mu = true, cert.trLambda-c.cost(sh), sh.sigma, sh.mu
	}
}

// weakMultiples are the multiples of the negative curvature weakBound
// tries, ascending.
var weakMultiples = []float64{1.25, 2, 5, 20}

// smallestTrue returns the smallest of fs (ascending) at which ok holds,
// for an ok that holds at every f above one where it holds: weakBound's
// shifted matrices grow with f in the Loewner order, so where the largest
// does not factor none does. It tries the first (which usually factors),
// then the last, where a miss ends the search (at M3500b's rank-2 saddle
// none factors: two failed factorizations instead of four), then the
// others in order.
func smallestTrue(fs []float64, ok func(float64) bool) (float64, bool) {
	n := len(fs)
	if n == 0 {
		return 0, false
	}
	if ok(fs[0]) {
		return fs[0], true
	}
	if n == 1 || !ok(fs[n-1]) {
		return 0, false
	}
	for _, f := range fs[1 : n-1] {
		if ok(f) {
			return f, true
		}
	}
	return fs[n-1], true
}

// analyze makes the symbolic factorization of S and chooses the anchor:
// the pose the factor eliminates last, which must be the last pivot, but
// among the poses of the factor's trailing clique (whose order does not
// change the fill) the lightest one, whose shift costs the bound least
// (poseWeight): with weights spanning six decades the pose an ordering
// happens to put last can cost the rounding floor a hundred times more
// than its lightest neighbour in the top separator.
func (c *certifier) analyze() error {
	if c.ddPart != nil {
		return c.analyzeDomain()
	}
	chol, err := analyzeWith(c.sym, c.q, c.perm) // S's pattern is Q's
	if err != nil {
		return fmt.Errorf("certificate: analysing S: %w", err)
	}
	c.chol, c.anchor = chol, c.lastPose(chol)
	b, n := c.q.B, c.q.Dim()
	var clique []int
	for k := n - chol.TrailingClique(); k < n; k++ {
		if chol.Pivot(k)%b == 0 && k+b <= n { // the start of a block wholly inside
			clique = append(clique, chol.Pivot(k)/b)
		}
	}
	if best := c.lightest(c.anchor, clique); best != c.anchor {
		perm := make([]int, 0, n)
		for _, p := range chol.Perm() {
			if p/b != best {
				perm = append(perm, p)
			}
		}
		for a := 0; a < b; a++ {
			perm = append(perm, best*b+a)
		}
		if moved, err := sparse.AnalyzeBlocks(c.q, perm); err == nil && c.lastPose(moved) == best {
			c.chol, c.anchor = moved, best
		}
	}
	c.weightAnchor = c.poseWeight(c.anchor)
	c.floor = math.Min(c.cost(shift{anchor: true, sigma: 10 * c.eigTol}), c.cost(shift{sigma: c.eigTol}))
	return nil
}

// lightest returns the anchor analyze chooses: among the poses of the
// trailing clique, the one that is not a landmark and whose shift costs
// the bound least (poseWeight), or last, the pose the order eliminates
// last, when none is strictly lighter.
func (c *certifier) lightest(last int, clique []int) int {
	best, bestW := last, c.poseWeight(last)
	for _, i := range clique {
		if c.free != nil && c.free[i] {
			continue
		}
		if w := c.poseWeight(i); w < bestW {
			best, bestW = i, w
		}
	}
	return best
}

// anchorLast returns Q's order perm and its block analysis sym with the
// pose that the certificate's analysis would choose as its anchor (the
// lightest pose of the trailing clique: analyze) moved to the end, where
// analyze would move it, or perm and sym as they are when it is there
// already (or sym is nil, or the analysis fails). Moving it within the
// trailing clique leaves L's pattern and cost as they are; done before any
// factorization, it makes the certificate's analysis the one the trust
// region's Hessian and the translation system share, where analyze would
// analyse Q's pattern again in the moved order (on most steps of a
// replay: the lightest pose of the top separator is seldom the last).
func anchorLast(q *sparse.BlockSym, d int, perm []int, sym *sparse.BlockSymbolic) ([]int, *sparse.BlockSymbolic) {
	if sym == nil {
		return perm, sym
	}
	c := &certifier{q: q, d: d, n: q.N, b: q.B, scale: jacobiScale(q), free: rotationFreeBlocks(q, d)}
	isFree := func(i int) bool { return c.free != nil && c.free[i] }
	order, _ := sym.Tree()
	nb := len(order)
	last := -1
	for k := nb - 1; k >= 0; k-- {
		if !isFree(order[k]) {
			last = order[k]
			break
		}
	}
	if last < 0 {
		return perm, sym
	}
	best := c.lightest(last, order[nb-sym.TrailingClique():])
	if best == last {
		return perm, sym
	}
	b := q.B
	moved := make([]int, 0, nb*b)
	for _, i := range order {
		if i != best {
			for a := 0; a < b; a++ {
				moved = append(moved, i*b+a)
			}
		}
	}
	for a := 0; a < b; a++ {
		moved = append(moved, best*b+a)
	}
	s, err := sparse.AnalyzeBlockPattern(q, moved)
	if err != nil {
		return perm, sym
	}
	if o, _ := s.Tree(); o[nb-1] != best {
		return perm, sym
	}
	return moved, s
}

// floorUnits is the ratio of the certificate's unit of F to its rounding
// floor (see fUnit).
const floorUnits = 1e7

// fUnit is the unit the relative tolerance falls back to when |F| is
// below it: floorUnits times the rounding floor of the shift (floor),
// the |F| of which a relative 1e-7 is all the floor leaves provable. The
// floor is proportional to the weights (it is eigTol times Q's rotation
// diagonal at the anchor, or at every pose), so the allowance
// max(gapTol max(fUnit, |F|), gapAbs) scales with them and a uniform
// scaling of every weight leaves every status unchanged: an absolute 1
// in its place certified a saddle of intel with every weight times 1e-12
// (F 560 times F*), whose negative curvature the 1e-6 allowance covered.
// On data whose measurements agree exactly (trees, noise-free graphs: F*
// = 0) the default GapTol allows ten floors, which a proof at the
// rounding floor meets. fUnit analyses S's pattern first if no check
// has (the anchor sets the floor); 0 without a symbolic factorization
// (an analysis error, which the check then reports).
func (c *certifier) fUnit() float64 {
	if !c.analyzed() && c.analyze() != nil {
		return 0
	}
	return floorUnits * c.floor
}

// lastPose returns the pose block that chol eliminates last: the anchor,
// where the shift absorbs the Schur complement of everything else and the
// common translation is grounded. It skips landmark blocks, whose rotation
// coordinates are decoupled from everything (a shift there absorbs
// nothing) and which buildShifted leaves ungrounded.
func (c *certifier) lastPose(chol *sparse.Cholesky) int {
	b := c.q.B
	for k := c.q.Dim() - 1; k >= 0; k-- {
		if i := chol.Pivot(k) / b; c.free == nil || !c.free[i] {
			return i
		}
	}
	return 0
}

// tries lists the shifts check tries, cheapest first (the anchor first on
// a tie): the anchor shift at sigmaA, 10 sigmaA and 100 sigmaA, the
// uniform one at sigma, 10 sigma and 100 sigma. sigmaA is at least ten
// times the rounding floor: the anchor's pivots come out near sigmaA/2 at
// an exact minimum (noise-free rotation graphs), and the pivot test
// rejects anything below the floor. A point converged only to the trust
// region's tolerance leaves a small negative Schur complement at the
// anchor (parking-garage: -4e-9 where the shift was 2e-10), which a larger
// anchor shift absorbs at a cost still far below the uniform shift's when
// the rounding floor sets sigma; the middle rung proves a bound ten times
// tighter than the last where it is enough.
func (c *certifier) tries(sigmaA, sigma float64) []shift {
	t := []shift{
		{anchor: true, sigma: sigmaA}, {anchor: true, sigma: 10 * sigmaA}, {anchor: true, sigma: 100 * sigmaA},
		{sigma: sigma}, {sigma: 10 * sigma}, {sigma: 100 * sigma},
	}
	// Costs equal but for rounding (both first tries at half the
	// allowance) count as a tie, which the anchor wins.
	sort.SliceStable(t, func(i, j int) bool { return c.cost(t[i]) < c.cost(t[j])*(1-1e-12) })
	return t
}

// inverseIteration estimates lambda_min(S) from the factor of the scaled,
// shifted S: inverse iteration from a fixed start converges to the bottom
// of the spectrum (the null space of S, eigenvalue ~0, at a certified
// point), and S's Rayleigh quotient there is the reported value. It stops
// once the quotient moves by less than eta/10 between two steps (at most
// maxInverseSteps): at a certified point the shift puts the null space
// orders of magnitude below the next eigenvalue, and on the benchmark
// graphs the quotient is at its rounding level after the first solve,
// where a fixed number of solves cost a large part of the certificate at
// a million poses (docs/tuning.md, "Tuning figures":
// inverseIteration).
//
// With nullStart it starts from x's first row instead, in the scaled
// coordinates (D^-1 x_0): at a critical point S X^T = 0, so that row is
// already at the bottom of S's spectrum, its quotient is the first value,
// and one solve confirms it (the fixed start needs two). Incremental's
// warm steps use it; a cold solve keeps the fixed start, so its reported
// eigenvalue is as it was, bit for bit.
func (c *certifier) inverseIteration(eta float64, x *sparse.Blocks) float64 {
	v, w := c.inv, c.inv2
	rq := math.NaN()
	if c.nullStart && c.rowStart(v, x) {
		rq = c.rayleigh(v, w)
	} else {
		for k := range v {
			// A deterministic start with components in every direction.
			v[k] = 1 + math.Sin(float64(k)*1.618033988749895)
		}
		normalize(v)
	}
	for it := 0; it < maxInverseSteps; it++ {
		c.solve(w, v)
		normalize(w)
		v, w = w, v
		prev := rq
		rq = c.rayleigh(v, w)
		if math.Abs(rq-prev) <= eta/10 {
			break
		}
	}
	return rq
}

// rowStart sets v to x's first row in the scaled coordinates (D^-1 x_0),
// normalized, and reports false when that is not a usable start (x of
// another shape, or a row that vanishes).
func (c *certifier) rowStart(v []float64, x *sparse.Blocks) bool {
	if x == nil || x.N*x.B != len(v) || x.R == 0 {
		return false
	}
	b := x.B
	nrm := 0.0
	for i := 0; i < x.N; i++ {
		row := x.Block(i)[:b]
		for a, y := range row {
			k := i*b + a
			v[k] = y / c.scale[k]
			nrm += v[k] * v[k]
		}
	}
	if !(nrm > 0) || math.IsInf(nrm, 0) {
		return false
	}
	normalize(v)
	return true
}

// maxInverseSteps bounds inverseIteration's solves.
const maxInverseSteps = 8

// rayleigh returns S's Rayleigh quotient at v, which lives in the scaled
// coordinates of the test matrix: it is mapped back (D v) into scratch
// first.
func (c *certifier) rayleigh(v, scratch []float64) float64 {
	for k, x := range v {
		scratch[k] = x * c.scale[k]
	}
	normalize(scratch)
	c.s.MulVec(c.sMulV, scratch)
	rq := 0.0
	for k, x := range scratch {
		rq += x * c.sMulV[k]
	}
	return rq
}

func normalize(v []float64) {
	s := 0.0
	for _, x := range v {
		s += x * x
	}
	s = math.Sqrt(s)
	if s == 0 {
		return
	}
	for k := range v {
		v[k] /= s
	}
}

// analyzed reports whether the test's symbolic factorization (and so the
// anchor) is made.
func (c *certifier) analyzed() bool { return c.chol != nil || c.dd != nil || c.domainReady }

// factor factors the scaled, shifted, grounded S that buildShifted made:
// the whole matrix in Q's fill-reducing order, or in the parts' order
// (ddPart). Either fails with a *sparse.NotPositiveDefiniteError on a
// pivot at or below sparse.PivotTol times c.sh's largest diagonal entry.
func (c *certifier) factor() error {
	if c.ddPart != nil {
		if c.dd == nil {
			dd, err := sparse.NewDomainCholesky(c.q, c.ddPart, nil, c.anchor)
			if err != nil {
				return fmt.Errorf("certificate: analysing S by parts: %w", err)
			}
			c.dd = dd
		}
		return c.dd.Factorize(c.sh)
	}
	return c.chol.FactorizeBlocks(c.sh, 0)
}

// solve applies the last successful factor's inverse.
func (c *certifier) solve(x, b []float64) {
	if c.dd != nil {
		c.dd.Solve(x, b)
		return
	}
	c.chol.Solve(x, b)
}

// methodName names the proof in the report: "cholesky", or
// "cholesky-dd" for the same factorization in a partition's order.
func (c *certifier) methodName() string {
	if c.ddPart != nil {
		return MethodCholeskyDD
	}
	return "cholesky"
}

// MethodCholeskyDD is Level.Method of a certificate proven by a
// domain-decomposition Cholesky (interiors first, a partition's boundary
// system last): the same proof as "cholesky" in another elimination order.
const MethodCholeskyDD = "cholesky-dd"

// analyzeDomain is analyze for a partition (ddPart): the anchor is a
// boundary pose (ddAnchor, or the lightest one: its shift costs the bound
// least, the rule analyze applies to the trailing clique), made the
// boundary system's last pivot.
func (c *certifier) analyzeDomain() error {
	part := c.ddPart
	if len(part) != c.n {
		return fmt.Errorf("certificate: a partition of %d blocks for %d", len(part), c.n)
	}
	anchor := c.ddAnchor
	if anchor < 0 || anchor >= c.n || (c.free != nil && c.free[anchor]) {
		q := c.q
		if q == nil {
			q = c.makeQ() // Q's pattern, for the boundary poses
		}
		anchor = -1
		bestW := math.Inf(1)
		for pass := 0; pass < 2 && anchor < 0; pass++ {
			for i := 0; i < q.N; i++ {
				if c.free != nil && c.free[i] {
					continue
				}
				boundary := pass == 1 // no boundary pose (one part): any pose
				for k := q.RowPtr[i]; k < q.RowPtr[i+1] && !boundary; k++ {
					boundary = part[q.ColIdx[k]] != part[i]
				}
				if w := c.poseWeight(i); boundary && w < bestW {
					anchor, bestW = i, w
				}
			}
		}
		if anchor < 0 {
			return errors.New("certificate: no pose to anchor the gauge")
		}
	}
	// The factorization's analysis waits for the first factor (factor):
	// a test made by the parts (prover) needs none.
	c.anchor, c.domainReady = anchor, true
	c.weightAnchor = c.poseWeight(c.anchor)
	c.floor = math.Min(c.cost(shift{anchor: true, sigma: 10 * c.eigTol}), c.cost(shift{sigma: c.eigTol}))
	return nil
}

// PartsProver is implemented by a level optimizer whose parts hold the
// point and can make the certificate's test themselves (partcert.go: each
// part its Lambda blocks, its rows of the scaled, shifted S, its interior
// factor and Schur complement; the optimizer the boundary system), so
// that the driver never builds or factors S: the staircase asks a level
// optimizer that implements PartsProviders for one (PartsProver) and uses
// it when it is not nil. A test that fails by parts is made again on the
// gathered point in the same order (for the eigenvector the escape
// needs). A pass by parts is the central test's arithmetic made by the
// parts: the driver checks their tr(Lambda) against the point's own
// (certifyByParts) and takes their pivots and Schur complements as sent.
type PartsProver interface {
	// ProofPartition returns the part of every pose and the anchor pose
	// (a boundary pose, which the boundary factor eliminates last).
	ProofPartition() (part []int, anchor int)
	// ProveLambda has every part compute its Lambda blocks at x and
	// returns the sum of their traces. x is usually the point the last
	// Optimize left, which the parts hold; a prover whose parts hold
	// another point (the driver also tests its roundings) gives them x
	// first.
	ProveLambda(x *blockmat.Blocks) (float64, error)
	// ProveFactor factors D S D plus sh by parts, with the blocks of the
	// last ProveLambda, and reports whether every pivot passed the test
	// against sparse.PivotTol times the whole matrix's largest diagonal
	// entry.
	ProveFactor(sh ProofShift) (bool, error)
}

// PartsProviders is the optional interface of a LevelOptimizer whose
// parts hold the point and can certify it (PartsProver) and round it
// (PartsRounder) without gathering it; either returns nil to leave that
// to the driver. The staircase asks once, after Init.
type PartsProviders interface {
	PartsProver(r *Run) PartsProver
	PartsRounder(r *Run) PartsRounder
}

// MethodCholeskyParts is Level.Method of a certificate proven by parts
// where they hold the point (PartsProver): the pivots of a
// domain-decomposition Cholesky, as MethodCholeskyDD, made by the parts
// and the boundary system without the point gathered.
const MethodCholeskyParts = "cholesky-parts"

// usePartsProver makes c test by parts through p.
func (c *certifier) usePartsProver(p PartsProver) {
	c.prover = p
	c.ddPart, c.ddAnchor = p.ProofPartition()
}

// letGo drops c's Q, for a run whose parts certify (a PartsProver): the
// tests by parts need only what newCertifier and the analysis took from
// it (the scaling, the anchor and its weights, Q's largest diagonal
// entry), and a test on the gathered point makes Q again with makeQ
// (certifyCentral). It analyses first (with Q made for that when c holds
// none), and reports false if that fails: the run then keeps Q, and the
// test reports the error as before.
func (c *certifier) letGo(makeQ func() *sparse.BlockSym, mulRows func(dst, x *sparse.Blocks)) bool {
	c.makeQ, c.mulRows = makeQ, mulRows
	if c.prover == nil || (!c.analyzed() && c.analyze() != nil) {
		return false
	}
	c.q = nil
	return true
}

// manifold returns the manifold at rank r for c's tests: on c's Q, or,
// when c let it go, one that multiplies by Q's rows and makes Q for as
// long as a caller holds it.
func (c *certifier) manifold(r, threads int) *manifold {
	if c.q != nil {
		return newManifold(c.q, c.d, r, threads)
	}
	return newManifoldWithout(c.makeQ, c.mulRows, c.n, c.b, c.free, c.d, r, threads)
}

// certifyByParts is certify's factor tests made by the prover, with the
// same shifts in the same order and the same bound. ok is false when no
// shift passed (the caller then tests the gathered point and finds the
// eigenvector). The smallest eigenvalue is not estimated (NaN): inverse
// iteration would need solves by parts, and the estimate is no part of
// the proof.
//
// The parts' tr(Lambda) enters the bound as it is, so while the point is
// at hand (the driver still holds it) it is checked against the trace
// computed here, and the bound uses this one: a part that misreports its
// share sends the test to the gathered point instead of into the bound.
func (c *certifier) certifyByParts(m *manifold, x *sparse.Blocks) (cert certificate, ok bool, err error) {
	d := m.d
	if !c.analyzed() {
		if err := c.analyze(); err != nil {
			return cert, false, err
		}
	}
	tr, err := c.prover.ProveLambda(x)
	if err != nil {
		return cert, false, fmt.Errorf("certificate by parts: %w", err)
	}
	if x != nil {
		nq := m.newBlocks()
		m.mulQ(nq, x)
		lam := make([]float64, m.n*d*d)
		m.lambda(lam, x, nq)
		own := m.traceLambda(lam)
		if !(math.Abs(tr-own) <= 1e-9*math.Max(1, math.Abs(own))) {
			return cert, false, fmt.Errorf("certificate by parts: the parts' tr(Lambda) %.17g is not the point's %.17g", tr, own)
		}
		tr = own
	}
	cert = certificate{trLambda: tr, minEig: math.NaN(), floorCost: c.floor}
	sigmaA, sigma := c.shifts(tr)
	for k, t := range c.tries(sigmaA, sigma) {
		if k > 0 && c.pastDeadline() {
			return cert, false, nil
		}
		passed, err := c.prover.ProveFactor(ProofShift{Sigma: t.sigma, Mu: t.mu, AnchorOnly: t.anchor, Anchor: c.anchor})
		if err != nil {
			return cert, false, fmt.Errorf("certificate by parts: %w", err)
		}
		if passed {
			cost := c.cost(t)
			cert.psd, cert.shiftPoses = true, c.nposes
			if t.anchor {
				cert.shiftPoses = 1
			}
			cert.eta, cert.sigma = cost/float64(d*cert.shiftPoses), t.sigma
			cert.dualBound = tr - cost
			cert.lowerBound, cert.hasLower = cert.dualBound, true
			cert.method = MethodCholeskyParts
			return cert, true, nil
		}
	}
	return cert, false, nil
}
