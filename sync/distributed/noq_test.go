package distributed

import (
	"context"
	"math"
	"slices"
	"testing"
	"time"

	"github.com/bcmsync/bcmsync/posegraph"
	"github.com/bcmsync/bcmsync/posegraph/blockmat"
	bsync "github.com/bcmsync/bcmsync/sync"
)

// qWatch is the coordinator as the staircase's level optimizer, watching
// whether the run holds Q when it asks the agents for a proof or a
// rounding.
type qWatch struct {
	*coordinator
	t      *testing.T
	r      *bsync.Run
	first  *blockmat.BlockSym // Q as the run made it at Init
	held   []string           // the calls made while the run held Q
	proofs int                // factorizations by parts
	rounds int                // roundings by parts
}

func (w *qWatch) Init(ctx context.Context, r *bsync.Run) ([]posegraph.Pose, bsync.Init, error) {
	w.r = r
	if r.HoldsQ() {
		w.held = append(w.held, "Init")
	}
	w.first = r.Q()
	return w.coordinator.Init(ctx, r)
}

func (w *qWatch) Optimize(ctx context.Context, r *bsync.Run, x *blockmat.Blocks, goal bsync.Goal, lv *bsync.Level) (bsync.Outcome, error) {
	w.check("Optimize")
	return w.coordinator.Optimize(ctx, r, x, goal, lv)
}

func (w *qWatch) PartsProver(r *bsync.Run) bsync.PartsProver {
	p := w.coordinator.PartsProver(r)
	if p == nil {
		return nil
	}
	return &qWatchProver{p.(*partsProver), w}
}

func (w *qWatch) PartsRounder(r *bsync.Run) bsync.PartsRounder {
	if w.coordinator.PartsRounder(r) == nil {
		return nil
	}
	return qWatchRounder{w}
}

func (w *qWatch) check(call string) {
	if w.r.HoldsQ() {
		w.held = append(w.held, call)
	}
}

// qWatchProver is the coordinator's prover, its escape by parts included
// (the embedded type's methods), with ProveFactor watched.
type qWatchProver struct {
	*partsProver
	w *qWatch
}

func (p *qWatchProver) ProveFactor(sh bsync.ProofShift) (bool, error) {
	p.w.check("ProveFactor")
	p.w.proofs++
	return p.partsProver.ProveFactor(sh)
}

type qWatchRounder struct{ w *qWatch }

func (r qWatchRounder) RoundByParts(x *blockmat.Blocks) ([]posegraph.Pose, error) {
	r.w.check("RoundByParts")
	r.w.rounds++
	return r.w.coordinator.RoundByParts(x)
}

// The coordinator's run holds no Q (sync.Run.HoldsQ) from Init to the end:
// not during the certificate by parts, whose boundary system and factor
// set its peak, nor in the rounds or the rounding; Run.Q makes Q anew
// each time, to the same bits; and the run certifies the central optimum with
// the same estimate as the coordinator that certifies and rounds the
// gathered point itself (Central, which holds Q: the test on the gathered
// point needs it).
func TestCoordinatorHoldsNoQ(t *testing.T) {
	g, central, p := lattice(t, 200, 10, 13, 4)
	solve := func(opts Options, watch bool) (*bsync.Result, *qWatch) {
		bus := NewMemBus()
		ctx, cancel := context.WithCancel(context.Background())
		defer cancel()
		for k := 0; k < p.K; k++ {
			go RunAgent(ctx, bus, g, p, k, AgentOptions{})
		}
		c, err := newCoordinator(bus, g, p, opts)
		if err != nil {
			t.Fatal(err)
		}
		c.ctx = ctx
		var m bsync.LevelOptimizer = c
		var w *qWatch
		if watch {
			w = &qWatch{coordinator: c, t: t}
			m = w
		}
		res, err := bsync.SolveWith(ctx, g, c.opts.Sync, m)
		if err != nil {
			t.Fatal(err)
		}
		c.stopAll()
		return res, w
	}
	res, w := solve(Options{Timeout: 10 * time.Second}, true)
	t.Logf("%s, F %.12g (central %.12g), %d factorizations and %d roundings by parts; Q held at %v",
		res.Status, res.Objective, central.Objective, w.proofs, w.rounds, w.held)
	if len(w.held) != 0 {
		t.Errorf("the run held Q at %v", w.held)
	}
	if w.proofs == 0 || w.rounds == 0 {
		t.Errorf("%d factorizations and %d roundings by parts: the test watched nothing", w.proofs, w.rounds)
	}
	if !res.Certified || math.Abs(res.Objective-central.Objective) > 1e-6*central.Objective {
		t.Errorf("%s with F %.12g, central %.12g", res.Status, res.Objective, central.Objective)
	}
	again := w.r.Q()
	if again == w.first || !sameBlockSym(again, w.first) {
		t.Errorf("Q made again is not a new copy of the first one's bits")
	}
	ref, _ := solve(Options{Timeout: 10 * time.Second, Central: true}, false)
	worst := 0.0
	for i := range res.Poses {
		for k := range res.Poses[i].R {
			worst = math.Max(worst, math.Abs(res.Poses[i].R[k]-ref.Poses[i].R[k]))
		}
	}
	if !ref.Certified || worst > 1e-9 {
		t.Errorf("Central: %s, rotations %.2e from the run without Q", ref.Status, worst)
	}
}

func sameBlockSym(a, b *blockmat.BlockSym) bool {
	bits := func(v []float64) []uint64 {
		u := make([]uint64, len(v))
		for k, x := range v {
			u[k] = math.Float64bits(x)
		}
		return u
	}
	return a.N == b.N && a.B == b.B && slices.Equal(a.RowPtr, b.RowPtr) && slices.Equal(a.ColIdx, b.ColIdx) &&
		slices.Equal(a.Diag, b.Diag) && slices.Equal(bits(a.Val), bits(b.Val))
}
