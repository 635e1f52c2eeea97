package bcm

import (
	"context"
	"math"
	"math/rand/v2"
	"testing"
	"time"

	"gonum.org/v1/gonum/mat"

	"github.com/bcmsync/bcmsync/internal/smalldense"
	"github.com/bcmsync/bcmsync/internal/sparse"
	"github.com/bcmsync/bcmsync/posegraph"
)

var allRules = []Rule{Cyclic, Uniform, Importance, Greedy, Parallel}

// TestDescentIdentity checks, on every block update of every rule, that F
// drops by exactly 2 (||H||_* + <H, Y_old>) + c ||p_old - p*(Y_old)||^2
// (docs/design.md section 4), F evaluated by the dense gonum oracle, and that F
// never increases.
func TestDescentIdentity(t *testing.T) {
	rng := rand.New(rand.NewPCG(1, 1))
	for _, kind := range []posegraph.Problem{posegraph.Rotations, posegraph.Poses} {
		for d := 2; d <= 3; d++ {
			for _, r := range []int{d, d + 1, 5, 7} {
				g := randomGraph(rng, d, 12, 14, 0.3)
				q := g.Laplacian(kind)
				s := New(q, d, kind)
				for _, rule := range allRules {
					x := sparse.NewBlocks(r, q.B, q.N)
					RandomStiefel(x, d, rng.Uint64())
					prev := denseCost(q, x)
					count := 0
					s.onStep = func(i int, dec float64) {
						f := denseCost(q, x)
						if diff := (prev - f) - dec; math.Abs(diff) > 1e-9*math.Max(1, math.Abs(prev)) {
							t.Fatalf("%s %v: update %d of block %d: F fell by %v, identity says %v", name(kind, d, r), rule, count, i, prev-f, dec)
						}
						if dec < -1e-12*math.Abs(prev) || f > prev*(1+1e-12) {
							t.Fatalf("%s %v: F increased: %v -> %v (dec %v)", name(kind, d, r), rule, prev, f, dec)
						}
						prev = f
						count++
					}
					_, err := s.Solve(context.Background(), x, Options{Rule: rule, Threads: 1, MaxSweeps: 4, Seed: 7})
					if err != nil {
						t.Fatal(err)
					}
					if count == 0 {
						t.Fatalf("%s %v: no update observed", name(kind, d, r), rule)
					}
				}
				s.onStep = nil
			}
		}
	}
}

// TestMonotoneSweeps runs every rule longer and checks F per sweep never
// increases and that the reported F matches the dense oracle.
func TestMonotoneSweeps(t *testing.T) {
	rng := rand.New(rand.NewPCG(2, 2))
	for _, kind := range []posegraph.Problem{posegraph.Rotations, posegraph.Poses} {
		g := randomGraph(rng, 3, 40, 60, 0.1)
		q := g.Laplacian(kind)
		s := New(q, 3, kind)
		for _, rule := range allRules {
			x := sparse.NewBlocks(5, q.B, q.N)
			RandomStiefel(x, 3, 11)
			res, err := s.Solve(context.Background(), x, Options{Rule: rule, MaxSweeps: 60, Seed: 3})
			if err != nil {
				t.Fatal(err)
			}
			for k := 1; k < len(res.History); k++ {
				a, b := res.History[k-1].F, res.History[k].F
				if b > a+1e-12*math.Abs(a) {
					t.Fatalf("%v %v: F rose from %v to %v at sweep %d", kind, rule, a, b, k)
				}
			}
			if f := denseCost(q, x); math.Abs(f-res.F) > 1e-10*math.Abs(f) {
				t.Fatalf("%v %v: reported F %v, dense %v", kind, rule, res.F, f)
			}
			if res.History[len(res.History)-1].F >= res.History[0].F {
				t.Fatalf("%v %v: no progress", kind, rule)
			}
			t.Logf("%v %-10v F %.6g -> %.6g, rel grad %.2g after %d sweeps (%d updates)", kind, rule, res.History[0].F, res.F, res.RelGradNorm, res.Sweeps, res.Updates)
		}
	}
}

// projectedGradient is the dense oracle: 2 X Q by gonum, projected on the
// tangent space blockwise.
func projectedGradient(q *sparse.BlockSym, x *sparse.Blocks, d int) *sparse.Blocks {
	qd := mat.NewDense(q.Dim(), q.Dim(), q.Dense())
	var e mat.Dense
	e.Mul(denseX(x), qd)
	out := sparse.NewBlocks(x.R, x.B, x.N)
	for i := 0; i < x.N; i++ {
		y := mat.NewDense(x.R, d, nil)
		ey := mat.NewDense(x.R, d, nil)
		for a := 0; a < x.R; a++ {
			for c := 0; c < d; c++ {
				y.Set(a, c, x.At(a, i*x.B+c))
				ey.Set(a, c, 2*e.At(a, i*x.B+c))
			}
		}
		var yte, sym, ys mat.Dense
		yte.Mul(y.T(), ey)
		sym.Add(&yte, yte.T())
		sym.Scale(0.5, &sym)
		ys.Mul(y, &sym)
		for a := 0; a < x.R; a++ {
			for c := 0; c < x.B; c++ {
				if c < d {
					out.Set(a, i*x.B+c, ey.At(a, c)-ys.At(a, c))
				} else {
					out.Set(a, i*x.B+c, 2*e.At(a, i*x.B+c))
				}
			}
		}
	}
	return out
}

// retract moves x along v by t and maps each Y block back to St(d, r) by
// its polar factor.
func retract(dst, x, v *sparse.Blocks, t float64, d int) {
	r, b := x.R, x.B
	y := make([]float64, r*d)
	for i := 0; i < x.N; i++ {
		xi, vi, di := x.Block(i), v.Block(i), dst.Block(i)
		for k := range xi {
			di[k] = xi[k] + t*vi[k]
		}
		for a := 0; a < r; a++ {
			for c := 0; c < d; c++ {
				y[a*d+c] = di[a*b+c]
			}
		}
		smalldense.Polar(y, y, r, d)
		for a := 0; a < r; a++ {
			for c := 0; c < d; c++ {
				di[a*b+c] = y[a*d+c]
			}
		}
	}
}

// TestGradient checks Gradient against the dense projected gradient, a
// central finite difference of F along random tangent vectors (through the
// polar retraction), RelGradNorm's definition, and for SO(d) the sum of
// Lemma 2.
func TestGradient(t *testing.T) {
	rng := rand.New(rand.NewPCG(3, 3))
	for _, kind := range []posegraph.Problem{posegraph.Rotations, posegraph.Poses} {
		for d := 2; d <= 3; d++ {
			for _, r := range []int{d, 5} {
				g := randomGraph(rng, d, 10, 12, 0.2)
				q := g.Laplacian(kind)
				s := New(q, d, kind)
				x := sparse.NewBlocks(r, q.B, q.N)
				RandomStiefel(x, d, rng.Uint64())
				grad := sparse.NewBlocks(r, q.B, q.N)
				norm := s.Gradient(grad, x)

				want := projectedGradient(q, x, d)
				wn := 0.0
				for k, v := range want.Data {
					wn += v * v
					if math.Abs(grad.Data[k]-v) > 1e-11*(1+math.Abs(v)) {
						t.Fatalf("%s: gradient entry %d = %v, dense %v", name(kind, d, r), k, grad.Data[k], v)
					}
				}
				if math.Abs(norm-math.Sqrt(wn)) > 1e-11*norm {
					t.Fatalf("%s: norm %v, dense %v", name(kind, d, r), norm, math.Sqrt(wn))
				}

				// RelGradNorm = ||grad|| / ||2 X Q||.
				xq := sparse.NewBlocks(r, q.B, q.N)
				q.MulBlocks(xq, x)
				nn := 0.0
				for _, v := range xq.Data {
					nn += 4 * v * v
				}
				if rel := s.RelGradNorm(x); math.Abs(rel-norm/math.Sqrt(nn)) > 1e-12*rel {
					t.Fatalf("%s: RelGradNorm %v, want %v", name(kind, d, r), rel, norm/math.Sqrt(nn))
				}

				// Directional derivative along random tangent vectors.
				v := sparse.NewBlocks(r, q.B, q.N)
				xp, xm := sparse.NewBlocks(r, q.B, q.N), sparse.NewBlocks(r, q.B, q.N)
				for trial := 0; trial < 5; trial++ {
					for k := range v.Data {
						v.Data[k] = rng.NormFloat64()
					}
					// Project the Y parts: Z - Y sym(Y^T Z).
					for i := 0; i < x.N; i++ {
						xi, vi := x.Block(i), v.Block(i)
						var sym [9]float64
						s.symYtN(&sym, xi, vi, r)
						for a := 0; a < r; a++ {
							for c := 0; c < d; c++ {
								for k := 0; k < d; k++ {
									vi[a*q.B+c] -= xi[a*q.B+k] * sym[k*d+c]
								}
							}
						}
					}
					const h = 1e-5
					retract(xp, x, v, h, d)
					retract(xm, x, v, -h, d)
					fd := (denseCost(q, xp) - denseCost(q, xm)) / (2 * h)
					dd := 0.0
					for k := range v.Data {
						dd += grad.Data[k] * v.Data[k]
					}
					if math.Abs(fd-dd) > 1e-6*(1+math.Abs(dd)) {
						t.Fatalf("%s: directional derivative %v, finite difference %v", name(kind, d, r), dd, fd)
					}
				}

				if kind == posegraph.Rotations {
					// Lemma 2: ||grad||^2 = 4 sum_i ||G_i||^2 - ||sym(Y_i^T G_i)||^2.
					k := newKernel(r, d, q.B, false)
					sum := 0.0
					for i := 0; i < x.N; i++ {
						k.gather(q, x, i)
						var sym [9]float64
						s.symYtN(&sym, x.Block(i), k.g, r)
						for _, gv := range k.g {
							sum += gv * gv
						}
						for _, sv := range sym[:d*d] {
							sum -= sv * sv
						}
					}
					if math.Abs(4*sum-norm*norm) > 1e-11*norm*norm {
						t.Fatalf("%s: Lemma 2 sum %v, ||grad||^2 %v", name(kind, d, r), 4*sum, norm*norm)
					}
				}
			}
		}
	}
}

// TestDeterminism: the same seed gives the same bits, and Parallel gives the
// same X on 1 and 2 threads (and on 3, more than the colour classes need).
func TestDeterminism(t *testing.T) {
	rng := rand.New(rand.NewPCG(4, 4))
	g := randomGraph(rng, 2, 600, 900, 0.1)
	q := g.Laplacian(posegraph.Poses)
	run := func(rule Rule, threads int, seed uint64) []float64 {
		s := New(q, 2, posegraph.Poses)
		x := sparse.NewBlocks(4, q.B, q.N)
		RandomStiefel(x, 2, 99)
		if _, err := s.Solve(context.Background(), x, Options{Rule: rule, Threads: threads, Seed: seed, MaxSweeps: 5}); err != nil {
			t.Fatal(err)
		}
		return x.Data
	}
	same := func(a, b []float64) bool {
		for k := range a {
			if math.Float64bits(a[k]) != math.Float64bits(b[k]) {
				return false
			}
		}
		return true
	}
	for _, rule := range allRules {
		if !same(run(rule, 1, 5), run(rule, 1, 5)) {
			t.Fatalf("%v: same seed, different bits", rule)
		}
	}
	if same(run(Uniform, 1, 5), run(Uniform, 1, 6)) {
		t.Fatalf("uniform: different seeds gave identical results")
	}
	p1 := run(Parallel, 1, 0)
	for _, th := range []int{2, 3} {
		if !same(p1, run(Parallel, th, 0)) {
			t.Fatalf("parallel: 1 and %d threads differ", th)
		}
	}
}

// TestColouring: no edge joins two blocks of one colour class and every
// block is in exactly one class.
func TestColouring(t *testing.T) {
	rng := rand.New(rand.NewPCG(5, 5))
	g := randomGraph(rng, 3, 300, 500, 0.1)
	q := g.Laplacian(posegraph.Rotations)
	cls := colour(q)
	col := make([]int, q.N)
	for i := range col {
		col[i] = -1
	}
	for c, cl := range cls {
		for _, i := range cl {
			if col[i] >= 0 {
				t.Fatalf("block %d in two classes", i)
			}
			col[i] = c
		}
	}
	for i := 0; i < q.N; i++ {
		if col[i] < 0 {
			t.Fatalf("block %d uncoloured", i)
		}
		for p := q.RowPtr[i]; p < q.RowPtr[i+1]; p++ {
			if j := q.ColIdx[p]; j != i && col[j] == col[i] {
				t.Fatalf("edge (%d, %d) inside colour %d", i, j, col[i])
			}
		}
	}
}

func TestStopping(t *testing.T) {
	rng := rand.New(rand.NewPCG(6, 6))
	g := randomGraph(rng, 2, 2000, 3000, 0.1)
	q := g.Laplacian(posegraph.Poses)
	s := New(q, 2, posegraph.Poses)
	x := sparse.NewBlocks(3, q.B, q.N)

	RandomStiefel(x, 2, 1)
	ctx, cancel := context.WithCancel(context.Background())
	res, err := s.Solve(ctx, x, Options{Progress: func(r Record) {
		if r.Sweep == 2 {
			cancel()
		}
	}})
	if err != nil || res.Status != Cancelled || res.Sweeps != 2 {
		t.Fatalf("cancel: status %v after %d sweeps, err %v", res.Status, res.Sweeps, err)
	}

	RandomStiefel(x, 2, 1)
	res, err = s.Solve(context.Background(), x, Options{MaxTime: 30 * time.Millisecond})
	if err != nil || res.Status != TimeLimit || res.Elapsed < 30*time.Millisecond {
		t.Fatalf("time limit: status %v after %v, err %v", res.Status, res.Elapsed, err)
	}

	RandomStiefel(x, 2, 1)
	res, err = s.Solve(context.Background(), x, Options{MaxSweeps: 3})
	if err != nil || res.Status != SweepLimit || res.Sweeps != 3 || len(res.History) != 4 || res.Updates != 3*int64(q.N) {
		t.Fatalf("sweep limit: %+v, err %v", res.Status, err)
	}

	RandomStiefel(x, 2, 1)
	res, err = s.Solve(context.Background(), x, Options{DecreaseTol: 1e-3})
	if err != nil || res.Status != DecreaseStalled {
		t.Fatalf("decrease: status %v, err %v", res.Status, err)
	}
	h := res.History
	if last := h[len(h)-1]; h[len(h)-2].F-last.F > 1e-3*h[len(h)-2].F {
		t.Fatalf("decrease: stopped while still decreasing")
	}

	// Bad input is an error, not a panic.
	if _, err := s.Solve(context.Background(), sparse.NewBlocks(1, q.B, q.N), Options{MaxSweeps: 1}); err == nil {
		t.Fatal("rank below d accepted")
	}
	if _, err := s.Solve(context.Background(), sparse.NewBlocks(3, q.B, q.N-1), Options{MaxSweeps: 1}); err == nil {
		t.Fatal("wrong block count accepted")
	}
	if _, err := New(q, 3, posegraph.Poses).Solve(context.Background(), x, Options{MaxSweeps: 1}); err == nil {
		t.Fatal("wrong dimension accepted")
	}
	if _, err := s.Solve(context.Background(), x, Options{}); err == nil {
		t.Fatal("Solve with no stopping rule accepted")
	}
	x.Data[5] = math.NaN()
	if _, err := s.Solve(context.Background(), x, Options{MaxSweeps: 1}); err == nil {
		t.Fatal("NaN accepted")
	}
}

func TestParseRule(t *testing.T) {
	for _, r := range allRules {
		got, err := ParseRule(r.String())
		if err != nil || got != r {
			t.Fatalf("ParseRule(%q) = %v, %v", r.String(), got, err)
		}
	}
	if _, err := ParseRule("newton"); err == nil {
		t.Fatal("unknown rule accepted")
	}
}

func TestTrees(t *testing.T) {
	rng := rand.New(rand.NewPCG(7, 7))
	const n = 37
	st, mt := newSumTree(n), newMaxTree(n)
	w := make([]float64, n)
	for it := 0; it < 2000; it++ {
		i := rng.IntN(n)
		w[i] = rng.Float64()
		if rng.IntN(5) == 0 {
			w[i] = 0
		}
		st.set(i, w[i])
		mt.set(i, w[i])
		tot, best := 0.0, 0
		for k, v := range w {
			tot += v
			if v > w[best] {
				best = k
			}
		}
		if math.Abs(st.total()-tot) > 1e-12 {
			t.Fatalf("sum %v, want %v", st.total(), tot)
		}
		if b, v := mt.argmax(); b != best || v != w[best] {
			t.Fatalf("argmax %d (%v), want %d (%v)", b, v, best, w[best])
		}
		u := rng.Float64() * tot
		k := st.find(u)
		lo := 0.0
		for j := 0; j < k; j++ {
			lo += w[j]
		}
		if w[k] == 0 || u < lo-1e-12 || u > lo+w[k]+1e-12 {
			t.Fatalf("find(%v) = %d, cumulative [%v, %v)", u, k, lo, lo+w[k])
		}
	}
}

func TestNoAllocsPerUpdate(t *testing.T) {
	rng := rand.New(rand.NewPCG(8, 8))
	g := randomGraph(rng, 3, 50, 60, 0.1)
	q := g.Laplacian(posegraph.Poses)
	s := New(q, 3, posegraph.Poses)
	x := sparse.NewBlocks(5, q.B, q.N)
	RandomStiefel(x, 3, 1)
	sw := newSweeper(s, x, 1)
	if a := testing.AllocsPerRun(20, func() { sw.cyclic() }); a != 0 {
		t.Fatalf("a cyclic sweep allocates %v times", a)
	}
	s.record(x, 1)
	rng2 := rand.New(rand.NewPCG(1, 1))
	sw.importance(rng2)
	if a := testing.AllocsPerRun(20, func() { sw.importance(rng2) }); a != 0 {
		t.Fatalf("an importance sweep allocates %v times", a)
	}
	sw.greedy()
	if a := testing.AllocsPerRun(20, func() { sw.greedy() }); a != 0 {
		t.Fatalf("a greedy sweep allocates %v times", a)
	}
}
