package cli

import (
	"fmt"

	"github.com/bcmsync/bcmsync/posegraph"
	"github.com/bcmsync/bcmsync/rounding"
	bsync "github.com/bcmsync/bcmsync/sync"
)

// inputTranslations returns the rotation-only result's poses with
// translations to write: the file's VERTEX translations where it has them,
// else those of the chordal SE(d) initialization (which is in the input's
// gauge, as the solved rotations are). Writing zeros, as res.Poses holds,
// would overwrite a trajectory with a point. src names where they come
// from ("the input's VERTEX lines", ...), for the output's comment line and
// the summary.
func inputTranslations(res *bsync.Result) (poses []posegraph.Pose, src string, err error) {
	g := res.Graph
	poses = append([]posegraph.Pose(nil), res.Poses...)
	have := 0
	for i := range poses {
		if i < len(g.HasInitial) && g.HasInitial[i] {
			poses[i].T = g.Initial[i].T
			have++
		}
	}
	if have == len(poses) {
		return poses, "the input's VERTEX lines", nil
	}
	chordal, err := rounding.Chordal(g)
	if err != nil {
		return nil, "", fmt.Errorf("translations for the rotation-only output: %w", err)
	}
	for i := range poses {
		if i >= len(g.HasInitial) || !g.HasInitial[i] {
			poses[i].T = chordal[i].T
		}
	}
	if have == 0 {
		return poses, "the chordal initialization, as the input has no VERTEX lines", nil
	}
	return poses, fmt.Sprintf("the input's VERTEX lines for %d poses, the chordal initialization for the other %d", have, len(poses)-have), nil
}

// nonEmpty returns its non-empty arguments.
func nonEmpty(s ...string) []string {
	var out []string
	for _, x := range s {
		if x != "" {
			out = append(out, x)
		}
	}
	return out
}
