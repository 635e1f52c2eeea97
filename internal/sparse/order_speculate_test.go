package sparse

import (
	"slices"
	"testing"
)

// Dissection computed beside BlockAMD (ndSpeculate) must not change the
// ordering chosen, whether the gate lets dissection be tried or not.
func TestBlockOrderSpeculative(t *testing.T) {
	saved := ndSpeculate
	defer func() { ndSpeculate = saved }()
	for _, side := range []int{7, 12} {
		q := gridBlockSym(side, 3)
		for _, worth := range []float64{0, ndWorthCost} {
			ndSpeculate = 1 << 62
			inTurn := blockOrder(q, 0, worth)
			ndSpeculate = 0
			beside := blockOrder(q, 0, worth)
			if !slices.Equal(inTurn, beside) {
				t.Errorf("side %d, gate %g: the speculative ordering differs", side, worth)
			}
		}
	}
}
