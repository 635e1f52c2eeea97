package posegraph

import "github.com/bcmsync/bcmsync/internal/smalldense"

// Compose returns the pose p q of SE(d): q's frame expressed through p's
// (rotation R_p R_q, translation t_p + R_p t_q).
func Compose(p, q *Pose, d int) Pose {
	out := Pose{R: smalldense.Mul(&p.R, &q.R, d)}
	for a := 0; a < d; a++ {
		s := p.T[a]
		for c := 0; c < d; c++ {
			s += p.R[a*d+c] * q.T[c]
		}
		out.T[a] = s
	}
	return out
}

// Between returns p^-1 q: q seen from p, the relative pose an edge from p
// to q measures (rotation R_p^T R_q, translation R_p^T (t_q - t_p)).
func Between(p, q *Pose, d int) Pose {
	dt := [3]float64{q.T[0] - p.T[0], q.T[1] - p.T[1], q.T[2] - p.T[2]}
	return Pose{R: smalldense.MulTN(&p.R, &q.R, d), T: smalldense.MulTVec(&p.R, &dt, d)}
}

// Inverse returns p^-1.
func Inverse(p *Pose, d int) Pose {
	id := Identity(d)
	return Between(p, &id, d)
}

// Measurement returns the relative pose e measures, (R, T), as a Pose.
func (e *Edge) Measurement() Pose { return Pose{R: e.R, T: e.T} }
