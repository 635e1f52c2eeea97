package trajeval

import (
	"errors"
	"fmt"
	"math"
	"slices"

	"github.com/bcmsync/bcmsync/internal/smalldense"
)

// Stats summarizes a sequence of errors as evo does.
type Stats struct {
	Count  int     `json:"count"`
	RMSE   float64 `json:"rmse"`
	Mean   float64 `json:"mean"`
	Median float64 `json:"median"`
	Std    float64 `json:"std"`
	Min    float64 `json:"min"`
	Max    float64 `json:"max"`
}

// Summarize returns the statistics of e (all zero for an empty e). Std is
// the population standard deviation, sqrt(mean (e - mean)^2), numpy's and
// evo's default.
func Summarize(e []float64) Stats {
	n := len(e)
	if n == 0 {
		return Stats{}
	}
	s := Stats{Count: n, Min: e[0], Max: e[0]}
	sum, sq := 0.0, 0.0
	for _, v := range e {
		sum += v
		sq += v * v
		s.Min = math.Min(s.Min, v)
		s.Max = math.Max(s.Max, v)
	}
	s.Mean = sum / float64(n)
	s.RMSE = math.Sqrt(sq / float64(n))
	dev := 0.0
	for _, v := range e {
		dev += (v - s.Mean) * (v - s.Mean)
	}
	s.Std = math.Sqrt(dev / float64(n))
	sorted := slices.Clone(e)
	slices.Sort(sorted)
	if n%2 == 1 {
		s.Median = sorted[n/2]
	} else {
		s.Median = 0.5 * (sorted[n/2-1] + sorted[n/2])
	}
	return s
}

// Association pairs the poses of two trajectories by equal stamps.
type Association struct {
	// Est and Ref hold, for each matched stamp in ascending order, the
	// index of the pose in the estimate and in the reference.
	Est, Ref []int
	// Stamps are the matched stamps, ascending.
	Stamps []float64
	// EstOnly and RefOnly count the poses whose stamp the other trajectory
	// does not have; they take no part in the evaluation.
	EstOnly, RefOnly int
}

// AssociateNearest matches each stamp of the estimate with the nearest
// stamp of the reference when they are at most maxDiff apart (to
// rounding: maxDiff plus a few units in the last place of the stamps), as
// evo associates time stamps (its --t_max_diff, default 0.01 s). Each pose
// is matched at most once: when several poses of the estimate have the
// same nearest reference pose, the nearest of them keeps it (ties: the
// earlier stamp) and the others count as unmatched. Pairs come in
// ascending order of the estimate's stamps; Stamps holds those. Each list
// must not repeat a stamp, and no stamp may be NaN.
func AssociateNearest(est, ref []float64, maxDiff float64) (Association, error) {
	if !(maxDiff >= 0) || math.IsInf(maxDiff, 0) {
		return Association{}, fmt.Errorf("trajeval: the stamp tolerance %g must be finite and >= 0", maxDiff)
	}
	sortedIdx := func(s []float64, what string) ([]int, error) {
		idx := make([]int, len(s))
		for k := range idx {
			if math.IsNaN(s[k]) {
				return nil, fmt.Errorf("trajeval: %s stamp %d is NaN", what, k)
			}
			idx[k] = k
		}
		slices.SortStableFunc(idx, func(a, b int) int { return cmpFloat(s[a], s[b]) })
		for k := 1; k < len(idx); k++ {
			if s[idx[k]] == s[idx[k-1]] {
				return nil, fmt.Errorf("trajeval: %s stamp %v appears twice", what, s[idx[k]])
			}
		}
		return idx, nil
	}
	ei, err := sortedIdx(est, "estimate")
	if err != nil {
		return Association{}, err
	}
	ri, err := sortedIdx(ref, "reference")
	if err != nil {
		return Association{}, err
	}
	type cand struct {
		e, r int
		diff float64
	}
	var cands []cand
	rs := make([]float64, len(ri))
	for k, j := range ri {
		rs[k] = ref[j]
	}
	for _, k := range ei {
		s := est[k]
		p, _ := slices.BinarySearch(rs, s)
		best, bd := -1, math.Inf(1)
		for _, q := range []int{p - 1, p} {
			if q >= 0 && q < len(rs) {
				if d := math.Abs(rs[q] - s); d < bd {
					best, bd = q, d
				}
			}
		}
		if best < 0 {
			continue
		}
		// Rounding: 0.02 - 0.01 is not 0.01 in floating point.
		mag := math.Max(math.Abs(s), math.Abs(rs[best]))
		if bd <= maxDiff*(1+1e-12)+4*(math.Nextafter(mag, math.Inf(1))-mag) {
			cands = append(cands, cand{k, ri[best], bd})
		}
	}
	// The nearest pairs first; each reference pose goes to the first
	// that claims it.
	order := make([]int, len(cands))
	for k := range order {
		order[k] = k
	}
	slices.SortStableFunc(order, func(a, b int) int { return cmpFloat(cands[a].diff, cands[b].diff) })
	used := make(map[int]bool, len(cands))
	keep := make([]bool, len(cands))
	for _, k := range order {
		if c := cands[k]; !used[c.r] {
			used[c.r] = true
			keep[k] = true
		}
	}
	var a Association
	for k, c := range cands { // in ascending estimate stamp
		if keep[k] {
			a.Est = append(a.Est, c.e)
			a.Ref = append(a.Ref, c.r)
			a.Stamps = append(a.Stamps, est[c.e])
		}
	}
	a.EstOnly = len(est) - len(a.Est)
	a.RefOnly = len(ref) - len(a.Ref)
	return a, nil
}

// AssociateByOrder pairs pose k of the estimate with pose k of the
// reference, for trajectories without time stamps (KITTI pose files),
// which must then have as many poses. Stamps holds the pose numbers.
func AssociateByOrder(nEst, nRef int) (Association, error) {
	if nEst != nRef {
		return Association{}, fmt.Errorf("trajeval: poses matched by order need as many in both trajectories, not %d and %d", nEst, nRef)
	}
	a := Association{Est: make([]int, nEst), Ref: make([]int, nEst), Stamps: make([]float64, nEst)}
	for k := range a.Est {
		a.Est[k], a.Ref[k], a.Stamps[k] = k, k, float64(k)
	}
	return a, nil
}

func cmpFloat(x, y float64) int {
	switch {
	case x < y:
		return -1
	case x > y:
		return 1
	}
	return 0
}

// Associate matches the stamps of an estimate and a reference exactly
// (vertex ids and TUM time stamps written from them are integers, so no
// tolerance is needed). Each list must not repeat a stamp; the readers
// reject such files with the lines at fault.
func Associate(est, ref []float64) (Association, error) {
	at := make(map[float64]int, len(ref))
	for k, s := range ref {
		if _, dup := at[s]; dup {
			return Association{}, fmt.Errorf("trajeval: reference stamp %v appears twice", s)
		}
		at[s] = k
	}
	var a Association
	seen := make(map[float64]bool, len(est))
	for k, s := range est {
		if seen[s] {
			return Association{}, fmt.Errorf("trajeval: estimate stamp %v appears twice", s)
		}
		seen[s] = true
		if j, ok := at[s]; ok {
			a.Est = append(a.Est, k)
			a.Ref = append(a.Ref, j)
			a.Stamps = append(a.Stamps, s)
		} else {
			a.EstOnly++
		}
	}
	a.RefOnly = len(ref) - len(a.Est)
	// Order by stamp, so that relative errors follow the trajectory.
	order := make([]int, len(a.Est))
	for k := range order {
		order[k] = k
	}
	slices.SortFunc(order, func(x, y int) int {
		switch {
		case a.Stamps[x] < a.Stamps[y]:
			return -1
		case a.Stamps[x] > a.Stamps[y]:
			return 1
		}
		return 0
	})
	est2, ref2, st2 := make([]int, len(order)), make([]int, len(order)), make([]float64, len(order))
	for k, o := range order {
		est2[k], ref2[k], st2[k] = a.Est[o], a.Ref[o], a.Stamps[o]
	}
	a.Est, a.Ref, a.Stamps = est2, ref2, st2
	return a, nil
}

// Options configures Evaluate.
type Options struct {
	Align Alignment
	// Delta is the index distance of the relative-error pairs (0: 1).
	Delta int
	// AllPairs takes every pair (i, i + Delta) instead of the consecutive
	// pairs (0, Delta), (Delta, 2 Delta), ... of evo's default.
	AllPairs bool
}

// Result holds the errors of an estimate against a reference.
type Result struct {
	D         int
	Align     Alignment
	Transform Transform
	// Aligned is the estimate after the transform.
	Aligned []Pose
	// ATE and ATERot are the absolute errors per pose: translation
	// (distance) and rotation (degrees).
	ATE, ATERot []float64
	// Pairs are the index pairs (i, j) of the relative errors RPE
	// (translation) and RPERot (degrees).
	Pairs       [][2]int
	RPE, RPERot []float64
}

// Evaluate aligns est to ref (associated pose by pose, in trajectory order)
// and returns the absolute and relative errors. It needs at least two poses
// and Delta < len(est), so that there is a relative pair.
func Evaluate(d int, est, ref []Pose, opts Options) (*Result, error) {
	if len(est) != len(ref) {
		return nil, fmt.Errorf("trajeval: %d estimated poses but %d reference poses", len(est), len(ref))
	}
	delta := opts.Delta
	if delta == 0 {
		delta = 1
	}
	if delta < 0 {
		return nil, fmt.Errorf("trajeval: delta %d is negative", delta)
	}
	n := len(est)
	if n < 2 {
		return nil, fmt.Errorf("trajeval: %d matched pose(s); the errors need at least 2", n)
	}
	if delta >= n {
		return nil, fmt.Errorf("trajeval: delta %d leaves no pair among %d matched poses", delta, n)
	}
	tr, err := Align(d, est, ref, opts.Align)
	if err != nil {
		return nil, err
	}
	res := &Result{D: d, Align: opts.Align, Transform: tr,
		Aligned: make([]Pose, n), ATE: make([]float64, n), ATERot: make([]float64, n)}
	for k := range est {
		p := tr.Apply(est[k], d)
		res.Aligned[k] = p
		q := &ref[k]
		e := 0.0
		for a := 0; a < d; a++ {
			e += (q.T[a] - p.T[a]) * (q.T[a] - p.T[a])
		}
		res.ATE[k] = math.Sqrt(e)
		r := smalldense.MulTN(&q.R, &p.R, d)
		res.ATERot[k] = degrees(RotationAngle(&r, d))
	}
	if opts.AllPairs {
		for i := 0; i+delta < n; i++ {
			res.Pairs = append(res.Pairs, [2]int{i, i + delta})
		}
	} else {
		for i := 0; i+delta < n; i += delta {
			res.Pairs = append(res.Pairs, [2]int{i, i + delta})
		}
	}
	if len(res.Pairs) == 0 {
		return nil, errors.New("trajeval: no relative pairs") // unreachable: delta < n
	}
	res.RPE = make([]float64, len(res.Pairs))
	res.RPERot = make([]float64, len(res.Pairs))
	for k, ij := range res.Pairs {
		t, a := relativeError(d, &res.Aligned[ij[0]], &res.Aligned[ij[1]], &ref[ij[0]], &ref[ij[1]])
		res.RPE[k], res.RPERot[k] = t, degrees(a)
	}
	return res, nil
}

// relativeError returns the translation norm and rotation angle of
// E = (Q_i^-1 Q_j)^-1 (P_i^-1 P_j): with Q_i^-1 Q_j = (A, a) and
// P_i^-1 P_j = (B, b), E = (A^T B, A^T (b - a)), whose translation has the
// norm ||b - a||.
func relativeError(d int, pi, pj, qi, qj *Pose) (trans, angle float64) {
	relP := relative(d, pi, pj)
	relQ := relative(d, qi, qj)
	e := 0.0
	for a := 0; a < d; a++ {
		e += (relP.T[a] - relQ.T[a]) * (relP.T[a] - relQ.T[a])
	}
	r := smalldense.MulTN(&relQ.R, &relP.R, d)
	return math.Sqrt(e), RotationAngle(&r, d)
}

// relative returns p^-1 q = (R_p^T R_q, R_p^T (t_q - t_p)).
func relative(d int, p, q *Pose) Pose {
	var out Pose
	out.R = smalldense.MulTN(&p.R, &q.R, d)
	dt := [3]float64{q.T[0] - p.T[0], q.T[1] - p.T[1], q.T[2] - p.T[2]}
	out.T = smalldense.MulTVec(&p.R, &dt, d)
	return out
}

func degrees(rad float64) float64 { return rad * 180 / math.Pi }
