package bcm

import (
	"github.com/bcmsync/bcmsync/internal/smalldense"
	"github.com/bcmsync/bcmsync/internal/sparse"
)

// kernel holds the scratch of one block update; each goroutine owns one.
type kernel struct {
	r, d, b int
	pose    bool
	g       []float64 // G_i, r x b
	h       []float64 // H_i, r x d
	y       []float64 // Polar(H_i), r x d
}

func newKernel(r, d, b int, pose bool) *kernel {
	return &kernel{r: r, d: d, b: b, pose: pose,
		g: make([]float64, r*b), h: make([]float64, r*d), y: make([]float64, r*d)}
}

// gather sets k.g = G_i = sum_{j != i} X_j Q_ji over the neighbours of i.
// Q_ji is the transpose of the stored Q_ij, so entry (a, c) of X_j Q_ji is
// the dot product of row a of X_j with row c of Q_ij: contiguous reads.
func (k *kernel) gather(q *sparse.BlockSym, x *sparse.Blocks, i int) {
	r, b := k.r, k.b
	g := k.g
	clear(g)
	bb, rb := b*b, r*b
	diag := q.Diag[i]
	for p := q.RowPtr[i]; p < q.RowPtr[i+1]; p++ {
		if p == diag {
			continue
		}
		j := q.ColIdx[p]
		qij := q.Val[p*bb : (p+1)*bb]
		xj := x.Data[j*rb : (j+1)*rb]
		switch b {
		case 3:
			q0, q1, q2 := qij[0:3], qij[3:6], qij[6:9]
			for a := 0; a < rb; a += 3 {
				x0, x1, x2 := xj[a], xj[a+1], xj[a+2]
				g[a] += x0*q0[0] + x1*q0[1] + x2*q0[2]
				g[a+1] += x0*q1[0] + x1*q1[1] + x2*q1[2]
				g[a+2] += x0*q2[0] + x1*q2[1] + x2*q2[2]
			}
		case 4:
			q0, q1, q2, q3 := qij[0:4], qij[4:8], qij[8:12], qij[12:16]
			for a := 0; a < rb; a += 4 {
				x0, x1, x2, x3 := xj[a], xj[a+1], xj[a+2], xj[a+3]
				g[a] += x0*q0[0] + x1*q0[1] + x2*q0[2] + x3*q0[3]
				g[a+1] += x0*q1[0] + x1*q1[1] + x2*q1[2] + x3*q1[3]
				g[a+2] += x0*q2[0] + x1*q2[1] + x2*q2[2] + x3*q2[3]
				g[a+3] += x0*q3[0] + x1*q3[1] + x2*q3[2] + x3*q3[3]
			}
		default:
			for a := 0; a < rb; a += b {
				xa := xj[a : a+b]
				for c := 0; c < b; c++ {
					qc := qij[c*b : (c+1)*b]
					s := 0.0
					for t, v := range xa {
						s += v * qc[t]
					}
					g[a+c] += s
				}
			}
		}
	}
}

// fromN sets k.g = G_i = N_i - X_i Q_ii from a maintained N = X Q.
func (k *kernel) fromN(q *sparse.BlockSym, x, n *sparse.Blocks, i int) {
	b := k.b
	qii := q.Block(q.Diag[i])
	xi, ni := x.Block(i), n.Block(i)
	for a := 0; a < len(xi); a += b {
		for c := 0; c < b; c++ {
			s := ni[a+c]
			qc := qii[c*b : (c+1)*b] // Q_ii is symmetric: row c = column c
			for t := 0; t < b; t++ {
				s -= xi[a+t] * qc[t]
			}
			k.g[a+c] = s
		}
	}
}

// step evaluates the exact minimization of block xi given G_i in k.g and
// Q_ii. It returns ||H||_* and the decrease of F the update attains,
//
//	2 (||H||_* + <H, Y_old>) + c ||p_old - p*(Y_old)||^2 >= 0,
//
// and, if write is set, replaces xi by the minimizer
// Y* = Polar(-H) = -Polar(H), p* = -(Y* b + g_p) / c.
func (k *kernel) step(xi, qii []float64, write bool) (nuc, dec float64) {
	r, d, b := k.r, k.d, k.b
	g, h := k.g, k.h
	c, cinv := 0.0, 0.0
	if k.pose {
		c = qii[d*b+d]
		if c > 0 {
			cinv = 1 / c
		}
		// H = G_Y - g_p b^T / c, with b = Q_ii[0:d, d].
		for a := 0; a < r; a++ {
			gp := g[a*b+d] * cinv
			for t := 0; t < d; t++ {
				h[a*d+t] = g[a*b+t] - gp*qii[t*b+d]
			}
		}
	} else {
		copy(h, g)
	}
	hy, pterm := 0.0, 0.0
	for a := 0; a < r; a++ {
		for t := 0; t < d; t++ {
			hy += h[a*d+t] * xi[a*b+t]
		}
		if c > 0 {
			// c ||p - p*(Y)||^2 = ||c p + Y b + g_p||^2 / c.
			v := c*xi[a*b+d] + g[a*b+d]
			for t := 0; t < d; t++ {
				v += xi[a*b+t] * qii[t*b+d]
			}
			pterm += v * v
		}
	}
	nuc = smalldense.Polar(k.y, h, r, d)
	dec = 2*(nuc+hy) + pterm*cinv
	if !write {
		return nuc, dec
	}
	y := k.y
	if nuc == 0 {
		// H = 0: every Y is a minimizer, and a landmark block (whose Y
		// no cost sees) always has H = 0. Keep Y rather than Polar's
		// arbitrary completion, so it stays where the rest of X lives.
		for a := 0; a < r; a++ {
			for t := 0; t < d; t++ {
				y[a*d+t] = -xi[a*b+t]
			}
		}
	}
	for a := 0; a < r; a++ {
		for t := 0; t < d; t++ {
			xi[a*b+t] = -y[a*d+t]
		}
		if c > 0 {
			v := g[a*b+d]
			for t := 0; t < d; t++ {
				v -= y[a*d+t] * qii[t*b+d]
			}
			xi[a*b+d] = -v * cinv
		}
	}
	return nuc, dec
}
