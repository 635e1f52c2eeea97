package leveltest_test

import (
	"testing"

	"github.com/bcmsync/bcmsync/posegraph"
	bsync "github.com/bcmsync/bcmsync/sync"
	"github.com/bcmsync/bcmsync/sync/leveltest"
)

// Solve's own optimizer keeps the contract it defines.
func TestBCMRTR(t *testing.T) {
	leveltest.Check(t, func(*testing.T, *posegraph.Graph, posegraph.Problem) bsync.LevelOptimizer { return bsync.NewBCMRTR() })
}
