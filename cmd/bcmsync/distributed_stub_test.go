//go:build !nats

package main

import (
	"strings"
	"testing"
)

// TestDistributedNeedsTag: without the nats build tag the distributed
// commands are listed and say how to get them, with exit status 1.
func TestDistributedNeedsTag(t *testing.T) {
	for _, name := range []string{"agent", "distributed"} {
		code, _, stderr := runCmd(name, "--agents", "2", "x.g2o")
		if code != 1 || !strings.Contains(stderr, "go build -tags nats ./cmd/bcmsync") {
			t.Errorf("%s: exit %d, stderr %q", name, code, stderr)
		}
	}
	if _, out, _ := runCmd("help"); !strings.Contains(out, "(in builds with -tags nats)") {
		t.Errorf("help does not say how to get the distributed commands:\n%s", out)
	}
}
