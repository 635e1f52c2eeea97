// Command publicapi uses bcmsync from outside its module, through its public
// packages only: it is the proof that every type a user passes to them is
// one they export (issue 26). .ci/run vets, builds and runs it; it sits under a testdata folder so that
// the main module's go test ./... leaves it alone. It solves
// small generated graphs with each entry point: the block-coordinate
// solver on its own, the certified pipeline, a level optimizer of the
// user's own in the pipeline's staircase, the incremental solver, robust
// estimation, the distributed solver in one process, covariances, and the
// readers, writers and plots. Its go.mod replaces the module by the repository
// root; after the root's requirements change, run go mod tidy here.
package main

import (
	"bytes"
	"context"
	"fmt"
	"os"
	"path/filepath"
	"time"

	"github.com/bcmsync/bcmsync/bcm"
	"github.com/bcmsync/bcmsync/datasets"
	"github.com/bcmsync/bcmsync/g2o"
	"github.com/bcmsync/bcmsync/plots"
	"github.com/bcmsync/bcmsync/posegraph"
	"github.com/bcmsync/bcmsync/posegraph/blockmat"
	"github.com/bcmsync/bcmsync/rounding"
	bsync "github.com/bcmsync/bcmsync/sync"
	"github.com/bcmsync/bcmsync/sync/covariance"
	"github.com/bcmsync/bcmsync/sync/distributed"
)

func main() {
	if err := run(); err != nil {
		fmt.Fprintln(os.Stderr, "publicapi:", err)
		os.Exit(1)
	}
}

func run() error {
	ctx := context.Background()
	g, truth, err := datasets.Manhattan(120, 8, datasets.Config{Kappa: 100, Tau: 10, LoopProb: 0.3, Seed: 3})
	if err != nil {
		return err
	}
	if err := g.Validate(); err != nil {
		return err
	}

	// The block-coordinate solver alone, on Q and a lifted point the user
	// builds: blockmat's types are what bcm takes.
	q := g.Laplacian(posegraph.Poses)
	var x *blockmat.Blocks = blockmat.NewBlocks(3, q.B, q.N)
	bcm.RandomStiefel(x, g.D, 1)
	s := bcm.New(q, g.D, posegraph.Poses)
	br, err := s.Solve(ctx, x, bcm.Options{Rule: bcm.Cyclic, GradTol: 1e-6, MaxSweeps: 50, SolveTranslations: true})
	if err != nil {
		return err
	}
	rounded := rounding.Round(x, g.D)
	if err := rounding.RecoverTranslations(g, rounded); err != nil {
		return err
	}
	fmt.Printf("bcm: %d sweeps (%s), F %.6g at rank 3, %.6g rounded\n", br.Sweeps, br.Status, br.F, g.Cost(rounded, posegraph.Poses))
	lifted := g.Lift(truth, posegraph.Poses, g.D)
	fmt.Printf("F at the truth: %.6g (trace form %.6g)\n", g.Cost(truth, posegraph.Poses),
		posegraph.TraceCost(q, lifted, blockmat.NewBlocks(lifted.R, lifted.B, lifted.N)))

	// The certified pipeline with the defaults, and its report.
	opts := bsync.DefaultOptions()
	res, err := bsync.Solve(ctx, g, opts)
	if err != nil {
		return err
	}
	rep := bsync.NewReport("manhattan", res)
	var js bytes.Buffer
	if err := rep.WriteJSON(&js); err != nil {
		return err
	}
	fmt.Printf("Solve: %s at rank %d, F %.10g, method %s, report %d bytes\n", res.Status, res.Rank, res.Objective, rep.Options.Method, js.Len())

	// A level optimizer of the user's own in the same staircase: BCM alone.
	own, err := bsync.SolveWith(ctx, g, bsync.Options{GradTol: 1e-7}, bcmLevels{})
	if err != nil {
		return err
	}
	fmt.Printf("SolveWith(bcm alone): %s at rank %d, F %.10g\n", own.Status, own.Rank, own.Objective)

	// Robust estimation of a graph with wrong loop closures.
	bad, _, err := datasets.AddOutliers(g, datasets.OutlierConfig{Fraction: 0.05, Seed: 5})
	if err != nil {
		return err
	}
	rr, err := bsync.SolveRobust(ctx, bad, bsync.Options{}, bsync.RobustOptions{})
	if err != nil {
		return err
	}
	fmt.Printf("SolveRobust: %s (%s)\n", rr.Status, rr.Robust.Describe())

	// The incremental solver, fed g in four batches, certified after each.
	batches, err := bsync.Replay(g, 4)
	if err != nil {
		return err
	}
	inc, err := bsync.NewIncremental(g.D, bsync.Options{})
	if err != nil {
		return err
	}
	var ir *bsync.Result
	for k := range batches {
		var b *bsync.Batch = &batches[k]
		if err := b.Add(inc); err != nil {
			return err
		}
		if ir, err = inc.Solve(ctx); err != nil {
			return err
		}
	}
	fmt.Printf("Incremental: %d steps, last %s, F %.10g\n", len(batches), ir.Status, ir.Objective)

	// The distributed solver, with three agents in this process.
	p, err := distributed.BFS(g, 3)
	if err != nil {
		return err
	}
	dr, st, err := distributed.SolveOn(ctx, distributed.NewMemBus(), g, p, distributed.Options{Timeout: 20 * time.Second}, distributed.AgentOptions{})
	if err != nil {
		return err
	}
	fmt.Printf("distributed: %s in %d rounds, F %.10g\n", dr.Status, st.Rounds, dr.Objective)

	// Covariances of the certified estimate.
	cov, err := covariance.Compute(g, res.Poses, covariance.Options{})
	if err != nil {
		return err
	}
	fmt.Printf("covariances: %d vertices, pose 7's %d x %d\n", cov.N(), cov.Size(7), cov.Size(7))

	// g2o out and back in, and a plot, in a temporary folder.
	dir, err := os.MkdirTemp("", "publicapi")
	if err != nil {
		return err
	}
	defer os.RemoveAll(dir)
	var buf bytes.Buffer
	if err := g2o.Write(&buf, g, res.Poses); err != nil {
		return err
	}
	back, err := g2o.Read(&buf, "written.g2o", g2o.ReadOptions{})
	if err != nil {
		return err
	}
	path := filepath.Join(dir, "trajectory.png")
	if err := plots.Trajectories(path, g, []plots.Trajectory{{Label: "certified", Poses: res.Poses}}, plots.TrajectoryOptions{}); err != nil {
		return err
	}
	fmt.Printf("g2o: %d poses and %d edges read back; plot written\n", back.N(), back.M())
	return nil
}

// bcmLevels is a bsync.LevelOptimizer that optimizes each level by
// block-coordinate minimization alone: the staircase certifies, escapes
// and rounds around it as it does for Solve.
type bcmLevels struct{}

func (bcmLevels) Method(r *bsync.Run) bsync.MethodInfo {
	return bsync.MethodInfo{Name: "bcm", FirstTol: r.Options().GradTol}
}

func (bcmLevels) Init(ctx context.Context, r *bsync.Run) ([]posegraph.Pose, bsync.Init, error) {
	poses, err := rounding.Chordal(r.Graph())
	return poses, bsync.InitChordal, err
}

func (bcmLevels) Optimize(ctx context.Context, r *bsync.Run, x *blockmat.Blocks, goal bsync.Goal, lv *bsync.Level) (bsync.Outcome, error) {
	end, ok := r.Stage("bcm", x.R)
	if !ok {
		return bsync.Outcome{Limit: bsync.TimeLimit}, nil
	}
	defer end()
	g := r.Graph()
	s := bcm.New(r.Q(), g.D, r.Options().Problem)
	res, err := s.Solve(ctx, x, bcm.Options{GradTol: goal.Tol, MaxSweeps: 20000, SolveTranslations: r.Options().Problem == posegraph.Poses,
		Progress: func(b bcm.Record) {
			r.Record(bsync.Record{Rank: x.R, Phase: "bcm", Iter: b.Sweep, Seconds: r.Seconds(), F: b.F, GradNorm: b.GradNorm, RelGrad: b.RelGradNorm})
		}})
	lv.BCMSweeps += res.Sweeps
	lv.BCMStop = res.Status.String()
	lv.F, lv.GradNorm, lv.RelGrad = res.F, res.GradNorm, res.RelGradNorm
	return bsync.Outcome{Started: true, Converged: res.Status == bcm.GradientConverged, Steps: res.Sweeps}, err
}
