package distributed

import (
	"context"
	"flag"
	"fmt"
	"math"
	"os"
	"path/filepath"
	"strings"
	"testing"

	"github.com/bcmsync/bcmsync/datasets"
	"github.com/bcmsync/bcmsync/g2o"
	"github.com/bcmsync/bcmsync/internal/sparse"
	"github.com/bcmsync/bcmsync/posegraph"
	"github.com/bcmsync/bcmsync/rounding"
	bsync "github.com/bcmsync/bcmsync/sync"
)

// diagnoseDir, when set, makes TestDiagnoseRounds run and write its tables
// there (docs/distributed.md, "Why the rounds are many"):
//
//	go test ./sync/distributed -run TestDiagnoseRounds -v -bcmsync.dist.diagnose /tmp/diag
var diagnoseDir = flag.String("bcmsync.dist.diagnose", "", "write TestDiagnoseRounds' tables into `DIR` (the test is skipped without it)")

// diagnoseGraphs lists the graphs TestDiagnoseRounds splits into 4 parts.
var diagnoseGraphs = flag.String("bcmsync.dist.diagnose.graphs", "intel.g2o", "comma-separated benchmark graphs of TestDiagnoseRounds")

// TestDiagnoseRounds runs the distributed solve of benchmark graphs in 4
// parts (spectral, bfs and contiguous) and records what makes the rounds many: each
// agent's gradient norm per round (which agents hold the gradient), every
// 10 rounds each part's distance from the central optimum, after the
// best global alignment and after aligning the part alone (a part whose
// error vanishes when aligned alone is right inside and only misplaced
// against the others: the slow mode of block Gauss-Seidel), and the
// distance of the aligned start from the central chordal estimate. It
// asserts that a certified run is at the central optimum; the rest is
// measurement.
func TestDiagnoseRounds(t *testing.T) {
	if *diagnoseDir == "" {
		t.Skip("-bcmsync.dist.diagnose DIR not set")
	}
	for _, name := range strings.Split(*diagnoseGraphs, ",") {
		g, central := suiteGraph(t, name)
		chordal, err := rounding.Chordal(g)
		if err != nil {
			t.Fatal(err)
		}
		for _, split := range []string{"spectral", "bfs", "contiguous"} {
			var p *Partition
			switch split {
			case "spectral":
				p, err = Spectral(g, 4)
			case "bfs":
				p, err = BFS(g, 4)
			default:
				p, err = Contiguous(g.N(), 4)
			}
			if err != nil {
				t.Fatal(err)
			}
			diagnose(t, g, p, central, chordal, strings.TrimSuffix(name, filepath.Ext(name))+"-"+split)
		}
	}
}

// suiteGraph reads a benchmark graph of the suite (skipping the test
// without the suite) and solves it centrally.
func suiteGraph(t *testing.T, name string) (*posegraph.Graph, *bsync.Result) {
	t.Helper()
	g, err := g2o.ReadFile(filepath.Join(datasets.SuiteOrSkip(t), name), g2o.ReadOptions{})
	if err != nil {
		t.Fatal(err)
	}
	central, err := bsync.Solve(context.Background(), g, bsync.Options{})
	if err != nil {
		t.Fatal(err)
	}
	return g, central
}

func diagnose(t *testing.T, g *posegraph.Graph, p *Partition, central *bsync.Result, chordal []posegraph.Pose, tag string) {
	var grads strings.Builder
	fmt.Fprintf(&grads, "rank\tround")
	for k := 0; k < p.K; k++ {
		fmt.Fprintf(&grads, "\tagent%d", k)
	}
	grads.WriteString("\n")
	var errs strings.Builder
	errs.WriteString("rounds\trank\tpart\tglobal_rot\tglobal_trans\tlocal_rot\tlocal_trans\n")
	opts := Options{CheckpointRounds: 10}
	opts.AgentProgress = func(rank, iter int, grad []float64) {
		fmt.Fprintf(&grads, "%d\t%d", rank, iter)
		for _, v := range grad {
			fmt.Fprintf(&grads, "\t%.6g", v)
		}
		grads.WriteString("\n")
	}
	opts.Checkpoint = func(ck *Checkpoint) error {
		x := &sparse.Blocks{R: ck.Rank, B: ck.B, N: ck.N, Data: ck.X}
		est := rounding.ReadOut(x, g.D, nil)
		for k, e := range partErrors(g.D, p, est, central.Poses) {
			fmt.Fprintf(&errs, "%d\t%d\t%d\t%.6g\t%.6g\t%.6g\t%.6g\n", ck.Rounds, ck.Rank, k, e[0], e[1], e[2], e[3])
		}
		return nil
	}
	res, st, err := SolveOn(context.Background(), NewMemBus(), g, p, opts, AgentOptions{})
	if err != nil {
		t.Fatal(err)
	}
	rel := math.Abs(res.Objective-central.Objective) / central.Objective
	// A certificate must be at the central optimum; a run that does not
	// certify (the garage's contiguous split in 5000 rounds) is measured
	// all the same.
	if res.Certified && rel > 1e-6 {
		t.Errorf("%s: %s, F %.12g, central %.12g", tag, res.Status, res.Objective, central.Objective)
	}
	// The start against the central chordal estimate and the optimum.
	var start strings.Builder
	start.WriteString("what\tF\tpart\tglobal_rot\tglobal_trans\tlocal_rot\tlocal_trans\n")
	for _, c := range []struct {
		what string
		est  []posegraph.Pose
		ref  []posegraph.Pose
	}{{"aligned_start_vs_central_chordal", res.InitialPoses, chordal}, {"aligned_start_vs_optimum", res.InitialPoses, central.Poses},
		{"central_chordal_vs_optimum", chordal, central.Poses}} {
		f := g.Cost(c.est, posegraph.Poses)
		for k, e := range partErrors(g.D, p, c.est, c.ref) {
			fmt.Fprintf(&start, "%s\t%.6g\t%d\t%.6g\t%.6g\t%.6g\t%.6g\n", c.what, f, k, e[0], e[1], e[2], e[3])
		}
	}
	var hist strings.Builder
	hist.WriteString("rank\tround\tf\trel_grad\n")
	restarts := 0
	for k, h := range res.History {
		fmt.Fprintf(&hist, "%d\t%d\t%.15g\t%.6g\n", h.Rank, h.Iter, h.F, h.RelGrad)
		if k > 0 && h.F > res.History[k-1].F && h.Rank == res.History[k-1].Rank {
			restarts++
		}
	}
	// The same run from the central chordal estimate (a checkpoint of it
	// at rank d): how many rounds the distributed start costs.
	x := g.Lift(chordal, posegraph.Poses, g.D)
	ck := &Checkpoint{Fingerprint: fingerprint(g, p, posegraph.Poses), Rank: g.D, B: x.B, N: x.N, X: x.Data}
	fromChordal, stc, err := SolveOn(context.Background(), NewMemBus(), g, p, Options{Resume: ck}, AgentOptions{})
	if err != nil {
		t.Fatal(err)
	}
	if rel := math.Abs(fromChordal.Objective-central.Objective) / central.Objective; fromChordal.Certified && rel > 1e-6 {
		t.Errorf("%s from the central chordal estimate: %s, F %.12g", tag, fromChordal.Status, fromChordal.Objective)
	}
	bp, be := p.Boundary(g)
	summary := fmt.Sprintf("%s: %s at rank %d, %d rounds, F %.10g (central %.10g, chordal %.10g, aligned start %.10g), boundary %d poses %d edges, colours %d\n",
		tag, res.Status, res.Rank, st.Rounds, res.Objective, central.Objective, g.Cost(chordal, posegraph.Poses), res.InitialObjective, bp, be, st.Colors)
	summary += fmt.Sprintf("  rounds that raised F (momentum restarts): %d; from the central chordal estimate: %d rounds, %s\n", restarts, stc.Rounds, fromChordal.Status)
	for _, lv := range res.Levels {
		summary += fmt.Sprintf("  level rank %d: %d rounds, stop %s, certified %v\n", lv.Rank, lv.Rounds, lv.RoundStop, lv.Certified)
	}
	t.Log(summary)
	for file, text := range map[string]string{"grad": grads.String(), "err": errs.String(), "start": start.String(), "summary": summary, "history": hist.String()} {
		if err := os.WriteFile(filepath.Join(*diagnoseDir, tag+"-"+file+".tsv"), []byte(text), 0o644); err != nil {
			t.Fatal(err)
		}
	}
}

// partErrors returns, per part, the RMS rotation (Frobenius) and
// translation distance of est from ref, after the rigid motion that best
// aligns all of est to ref (global) and after the one that best aligns
// the part alone (local).
func partErrors(d int, p *Partition, est, ref []posegraph.Pose) [][4]float64 {
	all := make([]int, len(est))
	for i := range all {
		all[i] = i
	}
	og, tg := bestMotion(d, est, ref, all)
	out := make([][4]float64, p.K)
	for k := 0; k < p.K; k++ {
		own := p.Owned(k)
		out[k][0], out[k][1] = rms(d, est, ref, own, og, tg)
		ol, tl := bestMotion(d, est, ref, own)
		out[k][2], out[k][3] = rms(d, est, ref, own, ol, tl)
	}
	return out
}

// bestMotion returns the rotation O and translation t minimizing
// sum_i ||O R_i - R*_i||^2 + ||O t_i + t - t*_i||^2 over idx, the
// rotation fitted to the rotations (the gauge of synchronization).
func bestMotion(d int, est, ref []posegraph.Pose, idx []int) ([9]float64, [3]float64) {
	m := make([]float64, d*d)
	var ca, cb [3]float64
	for _, i := range idx {
		a, b := est[i], ref[i]
		// M += R*_i R_i^T
		for r := 0; r < d; r++ {
			for c := 0; c < d; c++ {
				for k := 0; k < d; k++ {
					m[r*d+c] += b.R[r*d+k] * a.R[c*d+k]
				}
			}
			ca[r] += a.T[r] / float64(len(idx))
			cb[r] += b.T[r] / float64(len(idx))
		}
	}
	o := rounding.NearestRotation(m, d)
	var t [3]float64
	for r := 0; r < d; r++ {
		t[r] = cb[r]
		for c := 0; c < d; c++ {
			t[r] -= o[r*d+c] * ca[c]
		}
	}
	return o, t
}

// rms is the RMS rotation and translation distance over idx of est moved
// by (o, t) from ref.
func rms(d int, est, ref []posegraph.Pose, idx []int, o [9]float64, t [3]float64) (rot, trans float64) {
	for _, i := range idx {
		a, b := est[i], ref[i]
		for r := 0; r < d; r++ {
			for c := 0; c < d; c++ {
				v := -b.R[r*d+c]
				for k := 0; k < d; k++ {
					v += o[r*d+k] * a.R[k*d+c]
				}
				rot += v * v
			}
			v := t[r] - b.T[r]
			for k := 0; k < d; k++ {
				v += o[r*d+k] * a.T[k]
			}
			trans += v * v
		}
	}
	n := float64(len(idx))
	return math.Sqrt(rot / n), math.Sqrt(trans / n)
}
