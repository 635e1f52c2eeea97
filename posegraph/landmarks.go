package posegraph

import (
	"fmt"
	"math"
)

// Landmarks are point features that poses observe: vertex k is a landmark
// when Graph.Landmark[k] is set, and an edge (i, k) into it measures the
// landmark's position in pose i's frame, T ~ R_i^T (l_k - t_i), with the
// translation precision Tau and Kappa = 0. Its cost,
//
//	tau ||l_k - t_i - R_i T||^2,
//
// is the translation term of a pose edge, so a landmark is stored as a
// vertex whose rotation no measurement sees: its edges have Kappa = 0 and
// R = I, its Pose keeps R = I and carries the position in T. Q then has a
// (d+1) x (d+1) block for it whose rotation rows and columns are exactly
// zero; every solver stage honours that (LandmarkMask names the blocks).
//
// Landmarks come after all poses in the vertex order (Validate checks
// this), so pose 0 is a pose and the poses are indices 0..NumPoses()-1.

// IsLandmark reports whether vertex i is a landmark.
func (g *Graph) IsLandmark(i int) bool {
	return i >= 0 && i < len(g.Landmark) && g.Landmark[i]
}

// NumLandmarks is the number of landmark vertices.
func (g *Graph) NumLandmarks() int {
	c := 0
	for _, l := range g.Landmark {
		if l {
			c++
		}
	}
	return c
}

// NumPoses is the number of pose vertices (N() - NumLandmarks()).
func (g *Graph) NumPoses() int { return g.N() - g.NumLandmarks() }

// HasLandmarks reports whether any vertex is a landmark.
func (g *Graph) HasLandmarks() bool {
	for _, l := range g.Landmark {
		if l {
			return true
		}
	}
	return false
}

// LandmarkMask returns a mask over the vertices, true for landmarks, or nil
// when there are none (the pose-only fast paths test for nil).
func (g *Graph) LandmarkMask() []bool {
	if !g.HasLandmarks() {
		return nil
	}
	return g.Landmark
}

// IsObservation reports whether edge e observes a landmark.
func (g *Graph) IsObservation(e *Edge) bool { return g.IsLandmark(e.J) }

// validateLandmarks checks the landmark structure: the mask's length,
// landmarks after poses, at least one pose, and that every edge touching a
// landmark goes from a pose to it, with Kappa = 0 and R = I.
func (g *Graph) validateLandmarks() error {
	n := g.N()
	if len(g.Landmark) == 0 {
		return nil
	}
	if len(g.Landmark) != n {
		return fmt.Errorf("%s: landmark mask has %d entries for %d vertices", g.src(), len(g.Landmark), n)
	}
	if g.Landmark[0] {
		return fmt.Errorf("%s: graph has no poses, only landmarks", g.src())
	}
	for i := 1; i < n; i++ {
		if g.Landmark[i-1] && !g.Landmark[i] {
			return fmt.Errorf("%s: pose %d comes after a landmark (landmarks must follow all poses)", g.src(), g.IDs[i])
		}
	}
	for k := range g.Edges {
		e := &g.Edges[k]
		if e.I < 0 || e.I >= n || e.J < 0 || e.J >= n {
			continue // Validate reports it
		}
		li, lj := g.IsLandmark(e.I), g.IsLandmark(e.J)
		if !li && !lj {
			continue
		}
		at := g.where(k)
		if li {
			return fmt.Errorf("%s: edge (%d, %d) starts at landmark %d; an observation goes from a pose to a landmark", at, g.IDs[e.I], g.IDs[e.J], g.IDs[e.I])
		}
		if e.Kappa != 0 {
			return fmt.Errorf("%s: observation of landmark %d has kappa=%g; a landmark has no rotation, so kappa must be 0", at, g.IDs[e.J], e.Kappa)
		}
		if !(e.Tau > 0) || math.IsInf(e.Tau, 0) {
			return fmt.Errorf("%s: observation precision tau=%g must be positive and finite", at, e.Tau)
		}
		for _, v := range e.T[:g.D] {
			if math.IsNaN(v) || math.IsInf(v, 0) {
				return fmt.Errorf("%s: observed position is not finite", at)
			}
		}
		id := Identity(g.D)
		if e.R != id.R {
			return fmt.Errorf("%s: observation of landmark %d must have R = I", at, g.IDs[e.J])
		}
	}
	return nil
}
