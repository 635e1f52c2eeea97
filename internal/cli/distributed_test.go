package cli

import (
	"context"
	"encoding/json"
	"fmt"
	"math"
	"os"
	"path/filepath"
	"strconv"
	"strings"
	"sync/atomic"
	"testing"
	"time"

	"github.com/bcmsync/bcmsync/g2o"
	"github.com/bcmsync/bcmsync/internal/natstest"
	"github.com/bcmsync/bcmsync/posegraph"
	bsync "github.com/bcmsync/bcmsync/sync"
	"github.com/bcmsync/bcmsync/sync/distributed"
)

// distributed starts an embedded NATS server and two agent processes on
// the demo graph and prints solve's summary with the certificate, at
// solve's optimum.
func TestDistributedCommand(t *testing.T) {
	dir := t.TempDir()
	in := demoFile(t, dir, "in.g2o")
	code, central, stderr := runCmd("solve", in)
	if code != 0 {
		t.Fatalf("solve: exit %d: %s", code, stderr)
	}
	code, stdout, stderr := runCmd("distributed", "--agents", "2", "--split", "contiguous", in)
	if code != 0 {
		t.Fatalf("distributed: exit %d: %s\n%s", code, stdout, stderr)
	}
	// The agents prove it by parts, which estimates no lambda_min(S).
	for _, want := range []string{"CERTIFIED globally optimal", "distributed: 2 agents", "rounds", "lambda_min(S)      not estimated: proven by the agents' factors"} {
		if !strings.Contains(stdout, want) {
			t.Errorf("summary lacks %q:\n%s", want, stdout)
		}
	}
	// Both print F to 12 digits; the optima agree far below that.
	objective := func(s string) string {
		for _, line := range strings.Split(s, "\n") {
			if f := strings.Fields(line); len(f) > 2 && f[0] == "objective" {
				return f[2][:9]
			}
		}
		return ""
	}
	if a, b := objective(stdout), objective(central); a == "" || a != b {
		t.Errorf("objective %q, solve's %q", a, b)
	}
}

func TestDistributedUsageErrors(t *testing.T) {
	dir := t.TempDir()
	in := demoFile(t, dir, "in.g2o")
	for _, c := range []struct {
		args []string
		want string
	}{
		{[]string{"distributed", in}, "--split spectral needs --agents"},
		{[]string{"distributed", "--agents", "2", "--split", "zigzag", in}, "unknown --split"},
		{[]string{"distributed", "--agents", "2", "--no-spawn", in}, "--no-spawn needs --nats"},
		{[]string{"distributed", "--agents", "2"}, "exactly one FILE"},
		{[]string{"agent", "--agents", "2", in}, "--nats URL is required"},
		{[]string{"agent", "--nats", "nats://127.0.0.1:1", "--agents", "2", "--part", "5", in}, "--part must be in [0, 2)"},
	} {
		code, _, stderr := runCmd(c.args...)
		if code != 2 || !strings.Contains(stderr, "bcmsync "+c.args[0]+": ") || !strings.Contains(stderr, c.want) {
			t.Errorf("%v: exit %d, stderr %q; want 2 and %q", c.args, code, stderr, c.want)
		}
	}
	// A bad partition file is an error naming the file and the line.
	part := filepath.Join(dir, "parts.txt")
	if err := os.WriteFile(part, []byte("# id part\n0 0\n1 x\n"), 0o644); err != nil {
		t.Fatal(err)
	}
	code, _, stderr := runCmd("distributed", "--partition", part, in)
	if code != 1 || !strings.Contains(stderr, part+":3:") {
		t.Errorf("bad partition: exit %d, stderr %q", code, stderr)
	}
}

// The several-machines path: an external NATS server, a coordinator with
// --no-spawn, and agents started on their own (here as goroutines running
// the agent command line), before and after the coordinator.
func TestDistributedExternalServer(t *testing.T) {
	s := natstest.StartPlain(t)
	dir := t.TempDir()
	in := demoFile(t, dir, "in.g2o")
	flags := []string{"--nats", s.ClientURL(), "--agents", "3", "--split", "bfs", "--subject", "ext"}
	done := make(chan string, 3)
	agent := func(k int) {
		code, _, stderr := runCmd(append(append([]string{"agent", "--part", strconv.Itoa(k)}, flags...), in)...)
		done <- fmt.Sprintf("agent %d: exit %d %s", k, code, stderr)
	}
	go agent(0)
	go agent(1)
	go func() {
		time.Sleep(500 * time.Millisecond) // the last agent joins late
		agent(2)
	}()
	code, stdout, stderr := runCmd(append(append([]string{"distributed", "--no-spawn"}, flags...), in)...)
	if code != 0 || !strings.Contains(stdout, "CERTIFIED globally optimal") {
		t.Fatalf("coordinator: exit %d\n%s\n%s", code, stdout, stderr)
	}
	for k := 0; k < 3; k++ {
		if msg := <-done; !strings.HasPrefix(msg, "agent") || !strings.Contains(msg, "exit 0") {
			t.Error(msg)
		}
	}
}

// TestDistributedCollisions: the distributed commands follow the files
// rule: an output naming the input or another output, and standard input
// where every process reads the file itself, are usage errors before any
// server or agent starts, and every file is byte-identical afterwards.
func TestDistributedCollisions(t *testing.T) {
	dir := collisionDir(t)
	t.Chdir(dir)
	for _, c := range []struct {
		args []string
		want string
	}{
		{[]string{"distributed", "--agents", "2", "-o", "in.g2o", "in.g2o"}, "-o in.g2o would overwrite the input in.g2o"},
		{[]string{"distributed", "--agents", "2", "--tum", "link.g2o", "in.g2o"}, "would overwrite the input in.g2o"},
		{[]string{"distributed", "--agents", "2", "--report", "hard.g2o", "in.g2o"}, "would overwrite the input in.g2o"},
		{[]string{"distributed", "--agents", "2", "--partition", "report.json", "--report", "report.json", "in.g2o"}, "would overwrite the input --partition report.json"},
		{[]string{"distributed", "--agents", "2", "-o", "x", "--tum", "x", "in.g2o"}, "-o x and --tum x are the same file"},
		{[]string{"distributed", "--agents", "2", "-o", "-", "--json", "in.g2o"}, "both write to standard output"},
		{[]string{"distributed", "--agents", "2", "-o", "/nonexistent-bcmsync/o.g2o", "in.g2o"}, "does not exist"},
		{[]string{"distributed", "--agents", "2", "-"}, "FILE -: every agent reads FILE itself"},
		{[]string{"distributed", "--agents", "2", "--partition", "-", "in.g2o"}, "--partition -"},
		{[]string{"agent", "--nats", "nats://127.0.0.1:1", "--part", "0", "--agents", "2", "-"}, "FILE -: every process"},
	} {
		before := snapshot(t, dir)
		code, _, stderr := runCmd(c.args...)
		if code != exitUsage || !strings.Contains(stderr, c.want) {
			t.Errorf("%v: exit %d, stderr %q; want %d and %q", c.args, code, stderr, exitUsage, c.want)
		}
		if diff := sameSnapshot(before, snapshot(t, dir)); diff != "" {
			t.Errorf("%v: %s", c.args, diff)
		}
	}
}

// TestDistributedOutputs: distributed writes its outputs through solve's
// output path (TestSolveRotationsTranslations checks --rotations -o and
// --tum for both): its rotation-only estimate is solve's, and --report,
// --covariances and --json work as for solve, the traffic line a note
// beside the JSON.
func TestDistributedOutputs(t *testing.T) {
	dir := t.TempDir()
	in := demoFile(t, dir, "in.g2o")
	outs := map[string]*posegraph.Graph{}
	for _, cmd := range [][]string{{"solve"}, {"distributed", "--agents", "2"}} {
		out := filepath.Join(dir, cmd[0]+".g2o")
		if code, _, stderr := runCmd(append(cmd, "--quiet", "--rotations", "-o", out, in)...); code != 0 {
			t.Fatalf("%s: exit %d: %s", cmd[0], code, stderr)
		}
		h, err := g2o.ReadFile(out, g2o.ReadOptions{})
		if err != nil {
			t.Fatal(err)
		}
		outs[cmd[0]] = h
	}
	// The same optimum, the gauge fixed the same way.
	for i, p := range outs["distributed"].Initial {
		for k := range 4 {
			if d := math.Abs(p.R[k] - outs["solve"].Initial[i].R[k]); d > 1e-5 {
				t.Fatalf("pose %d: rotation differs from solve's by %g", i, d)
			}
		}
	}

	rep, cov := filepath.Join(dir, "rep.json"), filepath.Join(dir, "cov.txt")
	code, stdout, stderr := runCmd("distributed", "--agents", "2", "--json", "--report", rep, "--covariances", cov, in)
	var r bsync.Report
	if code != 0 || json.Unmarshal([]byte(stdout), &r) != nil || !r.Certified {
		t.Fatalf("--json: exit %d\n%.300s\n%s", code, stdout, stderr)
	}
	if !strings.Contains(stderr, "note: distributed: 2 agents") || !strings.Contains(stderr, "note: covariances: "+cov) {
		t.Errorf("--json: the notes on stderr: %s", stderr)
	}
	if _, err := readReport(rep); err != nil {
		t.Error(err)
	}
	if b, err := os.ReadFile(cov); err != nil || strings.Count(string(b), "\n") < 250 {
		t.Errorf("--covariances: %v", err)
	}
}

// dyingBus serves its agent's commands until left runs out, then kills
// the agent (die): the coordinator hears nothing from it again.
type dyingBus struct {
	distributed.Bus
	left atomic.Int64
	die  func()
}

func (b *dyingBus) Serve(subject string, h func([]byte) []byte) (func(), error) {
	return b.Bus.Serve(subject, func(req []byte) []byte {
		if b.left.Add(-1) < 0 {
			b.die()
			return nil
		}
		return h(req)
	})
}

// TestDistributedAgentDiesAndResume: an agent that dies mid-run (here
// after 30 commands) ends the coordinator after --timeout with exit 9,
// status "aborted by an error", and every output written: the estimate so
// far, the report with its error and the distributed section, and the
// checkpoints. A coordinator started again with --resume on the last
// checkpoint (and a new --checkpoint file) goes on from it and certifies.
func TestDistributedAgentDiesAndResume(t *testing.T) {
	s := natstest.StartPlain(t)
	dir := t.TempDir()
	in := demoFile(t, dir, "in.g2o")
	out, rep, ck := filepath.Join(dir, "out.g2o"), filepath.Join(dir, "rep.json"), filepath.Join(dir, "ck.bin")
	flags := []string{"--nats", s.ClientURL(), "--agents", "3", "--split", "bfs", "--subject", "dies"}
	done := make(chan string, 2)
	for k := 0; k < 2; k++ {
		go func() {
			code, _, stderr := runCmd(append(append([]string{"agent", "--part", strconv.Itoa(k)}, flags...), in)...)
			done <- fmt.Sprintf("agent %d: exit %d %s", k, code, stderr)
		}()
	}
	g, err := g2o.ReadFile(in, g2o.ReadOptions{})
	if err != nil {
		t.Fatal(err)
	}
	p, err := distributed.BFS(g, 3)
	if err != nil {
		t.Fatal(err)
	}
	bus, closeBus, err := dial(s.ClientURL(), "test agent 2", distributed.NATSSecurity{})
	if err != nil {
		t.Fatal(err)
	}
	defer closeBus()
	actx, kill := context.WithCancel(context.Background())
	defer kill()
	db := &dyingBus{Bus: bus, die: kill}
	db.left.Store(30)
	go distributed.RunAgent(actx, db, g, p, 2, distributed.AgentOptions{Subject: "dies"})

	code, stdout, stderr := runCmd(append(append([]string{"distributed", "--no-spawn", "--timeout", "2s", "--checkpoint", ck,
		"--checkpoint-rounds", "3", "-o", out, "--report", rep}, flags...), in)...)
	if code != exitAborted {
		t.Fatalf("exit %d, want %d\n%s\n%s", code, exitAborted, stdout, stderr)
	}
	for _, want := range []string{"aborted by an error", "agent 2 did not answer within 2s", "checkpoints written to"} {
		if !strings.Contains(stdout+stderr, want) {
			t.Errorf("output lacks %q:\n%s\n%s", want, stdout, stderr)
		}
	}
	r, err := readReport(rep)
	if err != nil {
		t.Fatal(err)
	}
	if r.Status != string(bsync.Aborted) || r.Certified || !strings.Contains(r.Error, "agent 2") || r.Distributed == nil ||
		r.Distributed.Checkpoints == 0 || r.Distributed.Agents != 3 || r.Distributed.Rounds == 0 || len(r.Distributed.AgentPeakRSS) != 3 {
		t.Errorf("report: status %q, error %q, distributed %+v", r.Status, r.Error, r.Distributed)
	}
	// The agents started with the agent command measured themselves.
	if d := r.Distributed; d != nil && (d.AgentPeakRSS[0] == 0 || d.CoordinatorPeakRSS == 0) {
		t.Errorf("peak RSS: agents %v, coordinator %d", d.AgentPeakRSS, d.CoordinatorPeakRSS)
	}
	if h, err := g2o.ReadFile(out, g2o.ReadOptions{}); err != nil || len(h.Initial) != g.N() {
		t.Errorf("-o: %v", err)
	}
	for k := 0; k < 2; k++ {
		if msg := <-done; !strings.Contains(msg, "exit 0") {
			t.Error(msg)
		}
	}

	// Resume with agents this command starts; the checkpoint is an input
	// now, and may not be the new checkpoint's file.
	if code, _, stderr := runCmd("distributed", "--agents", "3", "--resume", ck, "--checkpoint", ck, in); code != exitUsage || !strings.Contains(stderr, "would overwrite the input --resume") {
		t.Errorf("--resume and --checkpoint on one file: exit %d, %s", code, stderr)
	}
	rep2, ck2 := filepath.Join(dir, "rep2.json"), filepath.Join(dir, "ck2.bin")
	// The same partition as the run that wrote it (the default split is
	// spectral): another is refused by the fingerprint.
	code, stdout, stderr = runCmd("distributed", "--agents", "3", "--split", "bfs", "--resume", ck, "--checkpoint", ck2, "--report", rep2, in)
	if code != 0 || !strings.Contains(stdout, "CERTIFIED globally optimal") || !strings.Contains(stdout, "resumed from") {
		t.Fatalf("resumed: exit %d\n%s\n%s", code, stdout, stderr)
	}
	r2, err := readReport(rep2)
	if err != nil {
		t.Fatal(err)
	}
	if d := r2.Distributed; d == nil || d.ResumedRounds == 0 || d.ResumedRank < 2 || d.Rounds <= d.ResumedRounds || r2.Init != "checkpoint" {
		t.Errorf("resumed report: init %q, distributed %+v", r2.Init, r2.Distributed)
	}
	if _, err := os.Stat(ck2); err != nil {
		t.Error(err)
	}
}

// An agent does not read --split or --partition (the coordinator sends
// the partition) and says so, once; the agents distributed starts are
// not given them, so they say nothing (TestDistributedCommand's runs).
func TestAgentIgnoresSplitAloud(t *testing.T) {
	dir := t.TempDir()
	in := demoFile(t, dir, "in.g2o")
	for _, flag := range [][]string{{"--partition", in}, {"--split", "bfs"}} {
		args := append([]string{"agent", "--nats", "nats://127.0.0.1:1", "--agents", "2", "--part", "0"}, flag...)
		code, _, stderr := runCmd(append(args, in)...)
		want := "bcmsync agent: " + flag[0] + " is not read by an agent"
		if code == 0 || strings.Count(stderr, want) != 1 {
			t.Errorf("%v: exit %d, stderr %q; want an error (no server) and %q once", flag, code, stderr, want)
		}
	}
}
