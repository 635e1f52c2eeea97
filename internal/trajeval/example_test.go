package trajeval_test

import (
	"fmt"
	"log"
	"math"

	"github.com/bcmsync/bcmsync/internal/trajeval"
)

// An estimate that is the unit square turned by 90 degrees and shifted, with
// one corner off by 0.5. The least-squares alignment spreads that error
// over all four poses (and turns by less than 90 degrees to do so); the
// relative error does not depend on the alignment: the two steps touching
// the corner are off by 0.5, so the RMSE over three steps is sqrt(0.5/3).
func ExampleEvaluate() {
	id := [9]float64{1, 0, 0, 1}
	ref := []trajeval.Pose{{R: id}, {R: id, T: [3]float64{1, 0}}, {R: id, T: [3]float64{1, 1}}, {R: id, T: [3]float64{0, 1}}}
	turn := [9]float64{0, -1, 1, 0} // 90 degrees
	est := make([]trajeval.Pose, len(ref))
	for k, p := range ref {
		est[k].R = turn
		est[k].T = [3]float64{-p.T[1] + 5, p.T[0] - 2}
	}
	est[2].T[0] += 0.5
	res, err := trajeval.Evaluate(2, est, ref, trajeval.Options{Align: trajeval.AlignSE})
	if err != nil {
		log.Fatal(err)
	}
	ate := trajeval.Summarize(res.ATE)
	fmt.Printf("alignment turns by %.1f degrees\n", trajeval.RotationAngle(&res.Transform.R, 2)*180/math.Pi)
	fmt.Printf("ATE rmse %.3f max %.3f over %d poses\n", ate.RMSE, ate.Max, ate.Count)
	rpe := trajeval.Summarize(res.RPE)
	fmt.Printf("RPE rmse %.3f over %d pairs\n", rpe.RMSE, rpe.Count)
	// Output:
	// alignment turns by 81.9 degrees
	// ATE rmse 0.195 max 0.306 over 4 poses
	// RPE rmse 0.408 over 3 pairs
}
