package cli

import (
	"bytes"
	"encoding/json"
	"os"
	"os/exec"
	"path/filepath"
	"testing"

	"github.com/bcmsync/bcmsync/datasets"
	"github.com/bcmsync/bcmsync/internal/hugeheap"
)

// A solve's results do not depend on huge pages: with the heap reserved
// (files above minReserve/heapPerInputByte) and with BCMSYNC_HUGEPAGES=0,
// the estimate file and the report's objectives are bit-identical. Each
// solve is a child process (TestMain), as a user's is, so that the
// reservation happens at the start of a fresh heap.
func TestHugePagesSameResult(t *testing.T) {
	// Elsewhere no reservation happens, and the two runs would be the same
	// run.
	if b, err := os.ReadFile("/sys/kernel/mm/transparent_hugepage/enabled"); err != nil || !bytes.Contains(b, []byte("[madvise]")) {
		t.Skip("transparent huge pages are not in madvise mode: no reservation to compare")
	}
	dir := t.TempDir()
	geo := filepath.Join(dir, "geo.g2o")
	if code, _, stderr := runCmd("generate", "--quiet", "geometric", "--n", "1500", "--dim", "2", "-o", geo); code != 0 {
		t.Fatalf("generate: %d %s", code, stderr)
	}
	files := []string{geo}
	if suite, err := datasets.SuiteDir(); err == nil {
		files = append(files, filepath.Join(suite, "CSAIL.g2o"), filepath.Join(suite, "smallGrid3D.g2o"))
	}
	exe, err := os.Executable()
	if err != nil {
		t.Fatal(err)
	}
	for _, file := range files {
		st, err := os.Stat(file)
		if err != nil {
			t.Fatal(err)
		}
		if heapPerInputByte*st.Size() < minReserve {
			t.Fatalf("%s (%d bytes) is too small for a reservation: the test would compare nothing", file, st.Size())
		}
		var outs [2][]byte
		var reps [2]map[string]any
		for i, env := range []string{"", "0"} {
			out := filepath.Join(dir, filepath.Base(file)+env+".out.g2o")
			cmd := exec.Command(exe, "solve", "--json", "--quiet", "-o", out, file)
			cmd.Env = append(os.Environ(), benchChildEnv+"=1", hugeheap.Env+"="+env)
			stdout, err := cmd.Output()
			if err != nil {
				t.Fatalf("%s with %s=%q: %v", file, hugeheap.Env, env, err)
			}
			if err := json.Unmarshal(stdout, &reps[i]); err != nil {
				t.Fatalf("%s: report: %v", file, err)
			}
			if outs[i], err = os.ReadFile(out); err != nil {
				t.Fatal(err)
			}
		}
		if !bytes.Equal(outs[0], outs[1]) {
			t.Errorf("%s: -o differs with and without huge pages", file)
		}
		for _, key := range []string{"objective", "relaxation_objective", "min_eigenvalue", "rank", "certified"} {
			a, b := reps[0][key], reps[1][key]
			if a == nil || a != b {
				t.Errorf("%s: %s = %v with huge pages, %v without", file, key, a, b)
			}
		}
	}
}
