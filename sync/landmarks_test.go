package sync

import (
	"context"
	"math"
	"math/rand/v2"
	"testing"

	"gonum.org/v1/gonum/mat"

	"github.com/bcmsync/bcmsync/bcm"
	"github.com/bcmsync/bcmsync/internal/sparse"
	"github.com/bcmsync/bcmsync/posegraph"
)

// landmarkGraph is noisyGraph with nl landmarks scattered around the
// trajectory, each observed, with translation noise sigmaT, by the poses
// within distance 4 of it (at least two: the nearest ones otherwise). With
// poseEdges false the pose edges are dropped, so only the observations
// link the poses.
func landmarkGraph(d, n, closures, nl int, sigmaR, sigmaT float64, seed uint64, poseEdges bool) (*posegraph.Graph, []posegraph.Pose) {
	g, truth := noisyGraph(d, n, closures, sigmaR, sigmaT, seed)
	if !poseEdges {
		g.Edges = nil
	}
	rng := rand.New(rand.NewPCG(seed, 77))
	g.Landmark = make([]bool, n, n+nl)
	for k := 0; k < nl; k++ {
		l := posegraph.Identity(d)
		c := truth[rng.IntN(n)].T
		for a := 0; a < d; a++ {
			l.T[a] = c[a] + 2*rng.NormFloat64()
		}
		truth = append(truth, l)
		g.IDs = append(g.IDs, 1000+k)
		g.Landmark = append(g.Landmark, true)
		type near struct {
			i    int
			dist float64
		}
		var obs []near
		for i := 0; i < n; i++ {
			s := 0.0
			for a := 0; a < d; a++ {
				s += (truth[i].T[a] - l.T[a]) * (truth[i].T[a] - l.T[a])
			}
			obs = append(obs, near{i, math.Sqrt(s)})
		}
		// Nearest first.
		for p := 1; p < len(obs); p++ {
			for q := p; q > 0 && obs[q].dist < obs[q-1].dist; q-- {
				obs[q], obs[q-1] = obs[q-1], obs[q]
			}
		}
		for p, o := range obs {
			if p >= 2 && o.dist > 4 {
				break
			}
			e := posegraph.Edge{I: o.i, J: n + k, R: posegraph.Identity(d).R, Tau: 1 / math.Max(sigmaT*sigmaT, 1e-6)}
			for a := 0; a < d; a++ {
				for c := 0; c < d; c++ {
					e.T[a] += truth[o.i].R[c*d+a] * (l.T[c] - truth[o.i].T[c])
				}
				e.T[a] += sigmaT * rng.NormFloat64()
			}
			g.Edges = append(g.Edges, e)
		}
	}
	return g, truth
}

// localSolve is the brute-force oracle: Levenberg-Marquardt on the
// residuals of F (sqrt(kappa) (R_j - R_i R_e), sqrt(tau) (t_j - t_i - R_i t_e),
// sqrt(tau) (l_k - t_i - R_i z)) over R_i = R_i0 exp(w_i), t_i, l_k, the
// anchor (pose 0, or the world vertex of a graph with priors) held fixed,
// with a dense central-difference Jacobian and gonum's Cholesky. From a
// start near the optimum it finds the local minimum there.
func localSolve(t *testing.T, g *posegraph.Graph, start []posegraph.Pose) []posegraph.Pose {
	t.Helper()
	return localSolveWith(t, g, start, nil)
}

// edgeResiduals appends the residuals of edge e at x to r, written from
// an edge's own definition of its error instead of from the graph's (for
// the offset priors); it returns ok false for the edges it leaves to
// localSolveWith.
type edgeResiduals func(r []float64, e *posegraph.Edge, x []posegraph.Pose) (out []float64, ok bool)

// localSolveWith is localSolve with the residuals of some edges given by
// own (nil: none).
func localSolveWith(t *testing.T, g *posegraph.Graph, start []posegraph.Pose, own edgeResiduals) []posegraph.Pose {
	t.Helper()
	d, anchor := g.D, g.Anchor()
	nw := 1
	if d == 3 {
		nw = 3
	}
	// Variable offsets.
	off := make([]int, g.N())
	nv := 0
	for i := range off {
		off[i] = nv
		switch {
		case i == anchor:
			off[i] = -1
		case g.IsLandmark(i):
			nv += d
		default:
			nv += nw + d
		}
	}
	apply := func(base []posegraph.Pose, delta []float64) []posegraph.Pose {
		out := append([]posegraph.Pose(nil), base...)
		for i := range out {
			o := off[i]
			if o < 0 {
				continue
			}
			if g.IsLandmark(i) {
				for a := 0; a < d; a++ {
					out[i].T[a] += delta[o+a]
				}
				continue
			}
			var w [3]float64
			copy(w[:nw], delta[o:o+nw])
			out[i].R = mul(d, out[i].R, rotation(d, w))
			for a := 0; a < d; a++ {
				out[i].T[a] += delta[o+nw+a]
			}
		}
		return out
	}
	residuals := func(x []posegraph.Pose) []float64 {
		var r []float64
		for _, e := range g.Edges {
			if own != nil {
				var ok bool
				if r, ok = own(r, &e, x); ok {
					continue
				}
			}
			ri := x[e.I].R
			if g.MeasuresRotation(&e) {
				sk := math.Sqrt(e.Kappa)
				rr := mul(d, ri, e.R)
				for k := 0; k < d*d; k++ {
					r = append(r, sk*(x[e.J].R[k]-rr[k]))
				}
			}
			st := math.Sqrt(e.Tau)
			for a := 0; a < d; a++ {
				v := x[e.J].T[a] - x[e.I].T[a]
				for c := 0; c < d; c++ {
					v -= ri[a*d+c] * e.T[c]
				}
				r = append(r, st*v)
			}
		}
		return r
	}
	x := append([]posegraph.Pose(nil), start...)
	mu := 1e-6
	zero := make([]float64, nv)
	for it := 0; it < 200; it++ {
		r0 := residuals(x)
		f0 := mat.Dot(mat.NewVecDense(len(r0), r0), mat.NewVecDense(len(r0), r0))
		jac := mat.NewDense(len(r0), nv, nil)
		const h = 1e-6
		for v := 0; v < nv; v++ {
			dp := append([]float64(nil), zero...)
			dp[v] = h
			rp := residuals(apply(x, dp))
			dp[v] = -h
			rm := residuals(apply(x, dp))
			for k := range r0 {
				jac.Set(k, v, (rp[k]-rm[k])/(2*h))
			}
		}
		var jtj mat.SymDense
		jtj.SymOuterK(1, jac.T())
		var jtr mat.VecDense
		jtr.MulVec(jac.T(), mat.NewVecDense(len(r0), r0))
		if mat.Norm(&jtr, math.Inf(1)) < 1e-12*math.Max(1, f0) {
			break
		}
		for {
			a := mat.NewSymDense(nv, nil)
			a.CopySym(&jtj)
			for v := 0; v < nv; v++ {
				a.SetSym(v, v, a.At(v, v)*(1+mu))
			}
			var ch mat.Cholesky
			if !ch.Factorize(a) {
				mu *= 10
				continue
			}
			var step mat.VecDense
			if err := ch.SolveVecTo(&step, &jtr); err != nil {
				t.Fatal(err)
			}
			delta := make([]float64, nv)
			for v := range delta {
				delta[v] = -step.AtVec(v)
			}
			xn := apply(x, delta)
			rn := residuals(xn)
			if fn := mat.Dot(mat.NewVecDense(len(rn), rn), mat.NewVecDense(len(rn), rn)); fn <= f0 {
				x = xn
				mu = math.Max(mu/10, 1e-12)
				break
			}
			mu *= 10
			if mu > 1e12 {
				return x
			}
		}
	}
	return x
}

// The certified optimum with landmarks equals the brute-force local solve
// from the ground truth (F and every pose and landmark), over several
// random instances in 2-D and 3-D, and the dual bound is below it.
func TestSolveLandmarksMatchesLocalSolve(t *testing.T) {
	for _, d := range []int{2, 3} {
		for seed := uint64(1); seed <= 3; seed++ {
			g, truth := landmarkGraph(d, 15, 4, 8, 0.02, 0.03, seed+10*uint64(d), true)
			if err := g.Validate(); err != nil {
				t.Fatal(err)
			}
			res, err := Solve(context.Background(), g, Options{Seed: seed, Threads: 1})
			if err != nil {
				t.Fatal(err)
			}
			if !res.Certified {
				t.Fatalf("d=%d seed=%d: %s (min eig %g, bound %g)", d, seed, res.Status, res.MinEigenvalue, res.SuboptimalityBound)
			}
			local := localSolve(t, g, truth)
			fl := g.Cost(local, posegraph.Poses)
			if math.Abs(res.Objective-fl) > 1e-7*fl {
				t.Fatalf("d=%d seed=%d: certified F = %.12g, local solve %.12g", d, seed, res.Objective, fl)
			}
			if res.DualBound > fl*(1+1e-9) {
				t.Fatalf("d=%d seed=%d: dual bound %.12g above the local optimum %.12g", d, seed, res.DualBound, fl)
			}
			for i := range local {
				for a := 0; a < d; a++ {
					if dt := math.Abs(res.Poses[i].T[a] - local[i].T[a]); dt > 1e-4 {
						t.Fatalf("d=%d seed=%d: vertex %d (landmark %v) t differs by %g", d, seed, i, g.IsLandmark(i), dt)
					}
				}
				if g.IsLandmark(i) {
					if res.Poses[i].R != posegraph.Identity(d).R {
						t.Fatalf("landmark %d: R = %v", i, res.Poses[i].R)
					}
					continue
				}
				for k := 0; k < d*d; k++ {
					if dr := math.Abs(res.Poses[i].R[k] - local[i].R[k]); dr > 1e-4 {
						t.Fatalf("d=%d seed=%d: pose %d R differs by %g", d, seed, i, dr)
					}
				}
			}
		}
	}
}

// Poses linked only through landmarks (no pose edge at all) are solved and
// certified too, when each sees enough landmarks. (With two or three
// observations per pose the relaxation need not be tight: it relaxes each
// rotation to O(d), and a reflection can fit a few points nearly as well;
// seed 5 with 12 landmarks in 3-D is such a case, and Solve reports it as
// "relaxation certified, rounding not tight".)
func TestSolveLandmarksOnlyLinks(t *testing.T) {
	for _, d := range []int{2, 3} {
		g, truth := landmarkGraph(d, 8, 0, 30, 0.02, 0.02, 5, false)
		if err := g.Validate(); err != nil {
			t.Fatal(err)
		}
		res, err := Solve(context.Background(), g, Options{Seed: 1, Threads: 1})
		if err != nil {
			t.Fatal(err)
		}
		if !res.Certified {
			t.Fatalf("d=%d: %s (min eig %g)", d, res.Status, res.MinEigenvalue)
		}
		fl := g.Cost(localSolve(t, g, truth), posegraph.Poses)
		if math.Abs(res.Objective-fl) > 1e-7*fl {
			t.Fatalf("d=%d: certified F = %.12g, local solve %.12g", d, res.Objective, fl)
		}
	}
	// The loose case: reported as such, and its bound still holds.
	g, truth := landmarkGraph(3, 8, 0, 12, 0.02, 0.02, 5, false)
	res, err := Solve(context.Background(), g, Options{Seed: 1, Threads: 1})
	if err != nil {
		t.Fatal(err)
	}
	fl := g.Cost(localSolve(t, g, truth), posegraph.Poses)
	if res.Status != CertifiedRelaxation || !res.HasBound || res.DualBound > fl*(1+1e-9) {
		t.Fatalf("loose case: status %s, bound %g (has %v), local optimum %g", res.Status, res.DualBound, res.HasBound, fl)
	}
}

// At a random point of a graph with landmarks S has zero rows in the
// landmarks' Y coordinates, so its smallest eigenvalue is that of the
// dense oracle (the eigensolver path); at the certified optimum the dense
// S is positive semidefinite (the Cholesky path's claim).
func TestLandmarkCertificateMatchesDense(t *testing.T) {
	for _, d := range []int{2, 3} {
		g, _ := landmarkGraph(d, 12, 3, 6, 0.02, 0.02, 9, true)
		q := g.Laplacian(posegraph.Poses)
		for _, r := range []int{d, d + 1} {
			x := sparse.NewBlocks(r, q.B, q.N)
			bcm.RandomStiefel(x, d, 3)
			m := newManifold(q, d, r, 1)
			if countFree(m.free) != g.NumLandmarks() {
				t.Fatalf("%d free blocks, %d landmarks", countFree(m.free), g.NumLandmarks())
			}
			c, err := newCertifier(q, d, 1e-6, 0, 1e-13, nil, 3).check(m, x)
			if err != nil {
				t.Fatal(err)
			}
			want := denseMinEig(t, q, c.lam, d)
			if c.psd || math.Abs(c.minEig-want) > 1e-5*q.MaxDiag() {
				t.Errorf("d=%d r=%d: minEig %g (psd %v), dense %g", d, r, c.minEig, c.psd, want)
			}
			for i := g.NumPoses(); i < g.N(); i++ {
				for _, v := range c.lam[i*d*d : (i+1)*d*d] {
					if v != 0 {
						t.Fatalf("landmark %d: Lambda = %v, want exactly 0", i, c.lam[i*d*d:(i+1)*d*d])
					}
				}
			}
		}
		res, err := Solve(context.Background(), g, Options{Seed: 2, Threads: 1})
		if err != nil || !res.Certified {
			t.Fatalf("d=%d: %v %v", d, err, res)
		}
		x := g.Lift(centered(res.Poses, d), posegraph.Poses, d)
		m := newManifold(q, d, d, 1)
		nq := m.newBlocks()
		m.mulQ(nq, x)
		lam := make([]float64, q.N*d*d)
		m.lambda(lam, x, nq)
		if me := denseMinEig(t, q, lam, d); me < -1e-7*q.MaxDiag() {
			t.Fatalf("d=%d: dense lambda_min(S) = %g at the certified optimum", d, me)
		}
		// The bound pays eta d only for the poses.
		if want := m.traceLambda(lam) - res.Eta*float64(d*g.NumPoses()); res.DualBound < want-1e-6*math.Abs(want) {
			t.Logf("d=%d: dual bound %g, tr(Lambda) - eta d n_poses %g", d, res.DualBound, want)
		}
	}
}

// The Hessian preconditioner on a graph with landmarks: H is the matrix of
// the Riemannian Hessian in the basis except on the landmarks' Y
// coordinates, whose rows and columns are zero in the Hessian and hold
// only a positive diagonal in H; and at a minimum apply inverts the
// Hessian on the horizontal space with the landmarks' Y removed (what the
// trust region works on), in the exact and the split form.
func TestHessianPrecondLandmarks(t *testing.T) {
	for _, d := range []int{2, 3} {
		g, truth := landmarkGraph(d, 8, 3, 5, 0.03, 0.03, 21, true)
		q := g.Laplacian(posegraph.Poses)
		xd := g.Lift(centered(truth, d), posegraph.Poses, d)
		m := newManifold(q, d, d, 1)
		if _, err := rtr(context.Background(), m, xd, nil, newHessianPrecond(q, d, nil, 1e-12*q.MaxDiag()), rtrOptions{GradTol: 1e-12, MaxIter: 100}); err != nil {
			t.Fatal(err)
		}
		np := g.NumPoses()
		for _, r := range []int{d, d + 1} {
			for _, exact := range []bool{true, false} {
				if r == d && !exact {
					continue
				}
				x := sparse.NewBlocks(r, q.B, q.N)
				for i := 0; i < q.N; i++ {
					copy(x.Block(i), xd.Block(i)) // [X_d; 0]
				}
				m := newManifold(q, d, r, 1)
				lam := multipliers(m, x)
				p := newHessianPrecond(q, d, sparse.BlockAMD(q, 0), 1e-12*q.MaxDiag())
				p.exact = exact
				if !p.update(x, lam) {
					t.Fatalf("d=%d r=%d exact=%v: no factor at a minimum", d, r, exact)
				}
				vs := explicitBasis(p, x)
				n := len(vs)
				isFree := func(k int) bool {
					i, l := k/p.k, k%p.k
					return i >= np && p.basis[l][0].col < d
				}
				hv, work := m.newBlocks(), m.newBlocks()
				// The lazy Hessian (large graphs) has the landmarks'
				// decoupled diagonal too: the same values bit for bit.
				perm := sparse.BlockAMD(q, 0)
				pl := newHessianPrecond(q, d, perm, 1e-12*q.MaxDiag())
				pl.exact, pl.lazyMin = exact, 0
				sym, err := sparse.AnalyzeBlockPattern(q, perm)
				if err != nil {
					t.Fatal(err)
				}
				pl.sym = sym
				if !pl.update(x, lam) || !pl.lazy {
					t.Fatalf("d=%d r=%d exact=%v: the lazy Hessian did not factor (lazy %v)", d, r, exact, pl.lazy)
				}
				for e, v := range pl.rows.Dense().Val {
					if v != p.h.Val[e] {
						t.Fatalf("d=%d r=%d exact=%v: lazy H value %d is %g, stored %g", d, r, exact, e, v, p.h.Val[e])
					}
				}
				got := p.h.Dense()
				if !exact {
					got = nil // the split form's H is the span part only
				}
				for l, v := range vs {
					m.hess(hv, x, v, lam, work)
					for k, u := range vs {
						ref := inner(u, hv)
						if isFree(k) || isFree(l) {
							if ref != 0 {
								t.Fatalf("d=%d r=%d: Hessian couples landmark Y coordinate: %g", d, r, ref)
							}
							if got != nil && (k == l) != (got[k*n+l] != 0) {
								t.Fatalf("d=%d r=%d: H[%d][%d] = %g on a landmark Y coordinate", d, r, k, l, got[k*n+l])
							}
							continue
						}
						if got != nil && math.Abs(got[k*n+l]-ref) > 1e-9*q.MaxDiag() {
							t.Fatalf("d=%d r=%d: H[%d][%d] = %g, want %g", d, r, k, l, got[k*n+l], ref)
						}
					}
				}
				// apply inverts the Hessian on the trust region's space.
				gg := newGauge(r)
				gg.setPoint(m.gaugePoint(x))
				horizontal := func(v *sparse.Blocks) {
					m.removeShift(v)
					gg.remove(v)
					m.maskFree(v)
				}
				rng := rand.New(rand.NewPCG(uint64(r), 3))
				v := m.newBlocks()
				for k := range v.Data {
					v.Data[k] = rng.NormFloat64()
				}
				m.proj(v, x, v)
				horizontal(v)
				y := m.newBlocks()
				p.apply(y, v)
				m.proj(y, x, y)
				horizontal(y)
				m.hess(hv, x, y, lam, work)
				horizontal(hv)
				diff := 0.0
				for e := range hv.Data {
					diff = math.Max(diff, math.Abs(hv.Data[e]-v.Data[e]))
				}
				if diff > 1e-6*maxAbs(v.Data) {
					t.Errorf("d=%d r=%d exact=%v: hess(apply v) - v = %g (|v| %g)", d, r, exact, diff, maxAbs(v.Data))
				}
			}
		}
	}
}

// Every initialization, a higher first rank and every BCM rule reach the
// same certified optimum on a graph with landmarks.
func TestSolveLandmarksOptions(t *testing.T) {
	for _, d := range []int{2, 3} {
		g, _ := landmarkGraph(d, 20, 6, 10, 0.02, 0.03, 31, true)
		ref, err := Solve(context.Background(), g, Options{Seed: 1, Threads: 1})
		if err != nil || !ref.Certified {
			t.Fatalf("d=%d: %v %+v", d, err, ref)
		}
		for _, o := range []Options{
			{Init: InitOdometry}, {Init: InitRandom, Seed: 3}, {Rank0: d + 2, Rule: bcm.Parallel, Threads: 2},
			{Rule: bcm.Importance}, {Rule: bcm.Greedy}, {BCMMaxSweeps: -1},
		} {
			res, err := Solve(context.Background(), g, o)
			if err != nil {
				t.Fatalf("d=%d %+v: %v", d, o, err)
			}
			if !res.Certified || math.Abs(res.Objective-ref.Objective) > 1e-6*ref.Objective {
				t.Fatalf("d=%d %+v: %s, F %.12g, want %.12g", d, o, res.Status, res.Objective, ref.Objective)
			}
		}
	}
}

// TestCertificateAnchorIsPose: the certificate grounds the common
// translation and puts its anchor shift on the pose its factor eliminates
// last, never on a landmark (whose rotation coordinates are decoupled and
// left ungrounded), however the fill-reducing order places the landmarks.
func TestCertificateAnchorIsPose(t *testing.T) {
	for _, d := range []int{2, 3} {
		for seed := uint64(1); seed <= 4; seed++ {
			g, _ := landmarkGraph(d, 30, 4, 40, 0.01, 0.01, seed, true)
			q := g.Laplacian(posegraph.Poses)
			x := sparse.NewBlocks(d, q.B, q.N)
			bcm.RandomStiefel(x, d, seed)
			c := newCertifier(q, d, 1e-6, 0, 1e-13, sparse.BlockOrder(q, 0), seed)
			if _, err := c.checkOnly(newManifold(q, d, d, 1), x); err != nil {
				t.Fatal(err)
			}
			if g.IsLandmark(c.anchor) {
				t.Fatalf("d=%d seed=%d: anchor %d is a landmark", d, seed, c.anchor)
			}
			if last := c.chol.LastPivot() / q.B; c.anchor != last && !g.IsLandmark(last) {
				t.Fatalf("d=%d seed=%d: anchor %d, but pose %d is eliminated last", d, seed, c.anchor, last)
			}
		}
	}
}
