package sync

import (
	"fmt"
	"time"

	"github.com/bcmsync/bcmsync/internal/sparse"
	"github.com/bcmsync/bcmsync/posegraph"
	"github.com/bcmsync/bcmsync/rounding"
)

// This file is the small hook that solvers outside this package (the
// distributed solver in sync/distributed) use to certify, escape and round
// a point they computed themselves, with exactly the checks Solve makes. It
// adds no dependency to the package.

// Check is the certificate of one point X (docs/design.md section 5).
type Check struct {
	// PSD: S plus the shift Eta on the rotation coordinates of EtaPoses
	// poses (1: the anchor the factor eliminates last; else every pose)
	// has a Cholesky factor, so DualBound = TrLambda - Eta d EtaPoses is a
	// rigorous lower bound on the optimum. Otherwise Vector is a unit
	// eigenvector of S with eigenvalue MinEigenvalue < 0, the staircase's
	// escape direction.
	PSD           bool
	TrLambda      float64
	DualBound     float64
	Eta           float64
	EtaPoses      int
	MinEigenvalue float64
	Method        string
	Vector        []float64
}

// Certifier checks points of one graph's relaxation. It keeps S's storage
// and its symbolic factorization across calls, so a staircase reuses them.
type Certifier struct {
	g        *posegraph.Graph
	q        *sparse.BlockSym
	opts     Options
	etaFloor float64
	cert     *certifier
	perm     []int
}

// NewCertifier prepares checks against g's Laplacian for opts.Problem, with
// opts' GapTol, GapAbs, EigTol, Threads and Seed (zero values take Solve's defaults).
// g must be valid (Validate) and connected.
func NewCertifier(g *posegraph.Graph, opts Options) *Certifier {
	opts.setDefaults(g.D)
	q := g.Laplacian(opts.Problem)
	perm := sparse.BlockOrder(q, 0)
	etaFloor := opts.EigTol * q.MaxDiag()
	return &Certifier{g: g, q: q, opts: opts, etaFloor: etaFloor, perm: perm,
		cert: newCertifier(q, g.D, opts.GapTol, opts.GapAbs, etaFloor, perm, opts.Seed)}
}

// Q returns the connection Laplacian the certifier checks against.
func (c *Certifier) Q() *sparse.BlockSym { return c.q }

// Check certifies x, an r x b n point whose Stiefel parts are on St(d, r).
func (c *Certifier) Check(x *sparse.Blocks) (Check, error) {
	if x.N != c.q.N || x.B != c.q.B || x.R < c.g.D {
		return Check{}, fmt.Errorf("sync: point of %d blocks of size %d at rank %d for a graph of %d blocks of size %d", x.N, x.B, x.R, c.q.N, c.q.B)
	}
	ct, err := c.cert.check(newManifold(c.q, c.g.D, x.R, c.opts.Threads), x)
	if err != nil {
		return Check{}, err
	}
	return Check{PSD: ct.psd, TrLambda: ct.trLambda, DualBound: ct.dualBound, Eta: ct.eta, EtaPoses: ct.shiftPoses,
		MinEigenvalue: ct.minEig, Method: ct.method, Vector: ct.vector}, nil
}

// Escape lifts x (rank r) to rank r+1 along the eigenvector v of a failed
// Check, backtracking until F decreases, as Solve's staircase does. It
// returns the new point and F's decrease (0: no descent was found, and the
// point is x embedded with a zero row).
func (c *Certifier) Escape(x *sparse.Blocks, v []float64) (*sparse.Blocks, float64) {
	return escape(newManifold(c.q, c.g.D, x.R+1, c.opts.Threads), x, v)
}

// Finish rounds x, recovers exactly optimal translations, expresses the
// estimate in the input's gauge and fills res (whose Levels, History,
// initial fields and timings the caller has set) with the objective, the
// bound and the status through the same ending as Solve (settle): last is
// the final Check of x, stopped the staircase's own status if it stopped
// early (empty otherwise), and when the bound is not tight enough the
// rounded estimate is certified as well. Above rank d the estimate is the
// rounding alone: the caller holds no rank-d point of its own here.
func (c *Certifier) Finish(res *Result, x *sparse.Blocks, last Check, stopped Status) error {
	g, d, opts := c.g, c.g.D, c.opts
	t0 := time.Now()
	res.Graph, res.Problem, res.Rank = g, opts.Problem, x.R
	res.MinEigenvalue, res.Eta, res.EtaPoses = last.MinEigenvalue, last.Eta, last.EtaPoses
	if last.PSD {
		res.DualBound = last.DualBound
	}
	order := make([]int, c.q.N)
	for k := range order {
		order[k] = c.perm[k*c.q.B] / c.q.B
	}
	poses, err := roundEstimate(g, x, d, opts.Problem, rounding.NewPlan(g, order, nil))
	if err != nil {
		return err
	}
	res.Poses, res.Objective, res.Estimate = poses, g.Cost(poses, opts.Problem), EstimateRounded
	res.Timings.Round += time.Since(t0).Seconds()

	status := stopped
	if last.PSD && stopped == "" {
		status = Certified
	} else if status == "" {
		status = NotCertified
	}
	return settle(res, g, c.q, c.cert, opts, status, last.PSD, false)
}
