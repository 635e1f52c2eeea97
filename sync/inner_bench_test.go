package sync

import (
	"fmt"
	"testing"
)

// BenchmarkInnerKernels times the per-pose kernels of one inner iteration
// of the trust region (rtr's tCG loop) at rank d on the 10^4- and
// 10^5-pose scaling grids, at the ground truth, on all cores: the
// Hessian-vector product (Q's product, the multipliers, the tangent
// projection), the projection onto the horizontal space, and the
// preconditioner's coordinate changes (coords and vector, without the
// solve with the factor, which BenchmarkSolveGrid in internal/sparse
// times). These are linear in n and, on the 10^6-pose grid, about half of
// an inner iteration's time. Run with
//
//	go test ./sync -run '^$' -bench InnerKernels
func BenchmarkInnerKernels(b *testing.B) {
	for _, side := range []int{22, 46} {
		m, x, lam, p := gridHessian(b, side)
		gg := newGauge(m.d)
		gg.setPoint(x)
		v, dst, work := m.newBlocks(), m.newBlocks(), m.newBlocks()
		for k := range v.Data {
			v.Data[k] = float64(k%7) - 3
		}
		m.proj(v, x, v)
		name := fmt.Sprintf("n=%d/", m.n)
		b.Run(name+"hess", func(b *testing.B) {
			for b.Loop() {
				m.hess(dst, x, v, lam, work)
			}
		})
		b.Run(name+"proj", func(b *testing.B) {
			for b.Loop() {
				m.proj(dst, x, v)
			}
		})
		b.Run(name+"horizontal", func(b *testing.B) {
			for b.Loop() {
				m.removeShift(dst)
				gg.remove(dst)
			}
		})
		b.Run(name+"coords+vector", func(b *testing.B) {
			for b.Loop() {
				p.coords(p.c, p.sc, v)
				p.vector(dst, p.c, p.sc)
			}
		})
	}
}
