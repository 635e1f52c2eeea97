package plots

import (
	"math"
	"path/filepath"
	"strings"
	"testing"
)

// replayRun is a made-up replay of 30 steps: the time grows with the
// graph, with a spike, and step 17 is not certified.
func replayRun() []ReplayStep {
	var steps []ReplayStep
	for k := range 30 {
		s := ReplayStep{Seconds: 0.01 + 0.002*float64(k), Objective: 3 * float64(k*k) / 10, Certified: k != 17}
		if k == 22 {
			s.Seconds = 0.2
		}
		steps = append(steps, s)
	}
	return steps
}

func TestReplay(t *testing.T) {
	path := filepath.Join(t.TempDir(), "replay.png")
	if err := Replay(path, replayRun(), "Replay of made-up.g2o"); err != nil {
		t.Fatal(err)
	}
	img := decodePNG(t, path, px(16), px(8))
	checkNotBlank(t, img, palette[0], failColor)
	golden(t, path, "replay.png")
}

func TestReplayBadInput(t *testing.T) {
	for name, c := range map[string]func(s []ReplayStep) []ReplayStep{
		"no steps":      func(s []ReplayStep) []ReplayStep { return nil },
		"negative time": func(s []ReplayStep) []ReplayStep { s[3].Seconds = -1; return s },
		"NaN time":      func(s []ReplayStep) []ReplayStep { s[3].Seconds = math.NaN(); return s },
		"infinite F":    func(s []ReplayStep) []ReplayStep { s[5].Objective = math.Inf(1); return s },
	} {
		path := filepath.Join(t.TempDir(), "replay.png")
		err := Replay(path, c(replayRun()), "")
		if err == nil || !strings.Contains(err.Error(), path) {
			t.Errorf("%s: error %v, want one naming %s", name, err, path)
		}
	}
}
