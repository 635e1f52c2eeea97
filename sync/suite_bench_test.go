package sync_test

import (
	"context"
	"os"
	"path/filepath"
	"strings"
	"testing"

	"github.com/bcmsync/bcmsync/datasets"
	"github.com/bcmsync/bcmsync/g2o"
	bsync "github.com/bcmsync/bcmsync/sync"
)

// BenchmarkSuite solves each benchmark graph in process (the file already
// parsed, SE-Sync's reading of 3-D quaternions as in the reference table),
// one sync.Solve per iteration, and reports the stage times of the last
// solve in milliseconds. The constant costs of the stages on small and
// mid-size graphs show here without the process start:
//
//	go test ./sync -run '^$' -bench 'Suite/CSAIL' -benchtime 20x
func BenchmarkSuite(b *testing.B) {
	dir := datasets.SuiteOrSkip(b)
	ents, err := os.ReadDir(dir)
	if err != nil {
		b.Fatal(err)
	}
	for _, e := range ents {
		name := e.Name()
		ext := filepath.Ext(name)
		if ext != ".g2o" && ext != ".graph" {
			continue
		}
		b.Run(strings.TrimSuffix(name, ext), func(b *testing.B) {
			g, err := g2o.ReadFile(filepath.Join(dir, name), g2o.ReadOptions{RawQuaternions: true})
			if err != nil {
				b.Fatal(err)
			}
			var res *bsync.Result
			b.ReportAllocs()
			for b.Loop() {
				if res, err = bsync.Solve(context.Background(), g, bsync.Options{}); err != nil {
					b.Fatal(err)
				}
				if !res.Certified {
					b.Fatalf("%s: not certified: %s", name, res.Status)
				}
			}
			t := res.Timings
			b.ReportMetric(1e3*t.Init, "init-ms")
			b.ReportMetric(1e3*t.Optimize, "optimize-ms")
			b.ReportMetric(1e3*t.Certify, "certify-ms")
			b.ReportMetric(1e3*t.Round, "round-ms")
		})
	}
}
