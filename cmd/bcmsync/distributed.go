//go:build nats

package main

import (
	"context"
	"errors"
	"flag"
	"fmt"
	"io"
	"log/slog"
	"math"
	"os"
	"os/exec"
	"path/filepath"
	"strconv"
	"strings"
	stdsync "sync"
	"time"

	"github.com/bcmsync/bcmsync/g2o"
	"github.com/bcmsync/bcmsync/posegraph"
	bsync "github.com/bcmsync/bcmsync/sync"
	"github.com/bcmsync/bcmsync/sync/distributed"
	"github.com/nats-io/nats.go"
)

// partFlags choose the partition; agent and distributed share them, and
// every process of a run must be given the same.
type partFlags struct {
	agents    int
	split     string
	partition string
	subject   string
	rotations bool
	lenient   bool
	rawQuat   bool
	verbose   bool
}

func (f *partFlags) register(fs *flag.FlagSet) {
	fs.IntVar(&f.agents, "agents", 0, "number of agents K (for --split contiguous or bfs; with robot or --partition it must match, or be 0)")
	fs.StringVar(&f.split, "split", "bfs", "how to split the graph: bfs (K bands of a breadth-first order), contiguous (K runs of pose indices, DPGO's split), robot (GTSAM Symbol id prefixes)")
	fs.StringVar(&f.partition, "partition", "", "read the partition from `FILE` (lines \"id part\"), instead of --split")
	fs.StringVar(&f.subject, "subject", "bcmsync", "NATS subject prefix of the run (runs sharing a server need different ones)")
	fs.BoolVar(&f.rotations, "rotations", false, "solve rotation synchronization SO(d) only")
	fs.BoolVar(&f.lenient, "lenient", false, "skip unsupported records (landmarks, priors) with a warning")
	fs.BoolVar(&f.rawQuat, "raw-quaternions", false, rawQuatUsage)
	fs.BoolVar(&f.verbose, "verbose", false, "log every stage, level and rejected message")
}

// args returns the flags that make an agent process build the same problem.
func (f *partFlags) args() []string {
	a := []string{"--agents", strconv.Itoa(f.agents), "--split", f.split, "--subject", f.subject}
	if f.partition != "" {
		a = append(a, "--partition", f.partition)
	}
	for _, b := range []struct {
		on   bool
		name string
	}{{f.rotations, "--rotations"}, {f.lenient, "--lenient"}, {f.rawQuat, "--raw-quaternions"}, {f.verbose, "--verbose"}} {
		if b.on {
			a = append(a, b.name)
		}
	}
	return a
}

func (f *partFlags) check() error {
	if f.agents < 0 {
		return fmt.Errorf("--agents must be >= 0, not %d", f.agents)
	}
	if f.partition == "" {
		switch f.split {
		case "bfs", "contiguous":
			if f.agents < 1 {
				return fmt.Errorf("--split %s needs --agents K >= 1", f.split)
			}
		case "robot":
		default:
			return fmt.Errorf("unknown --split %q (want bfs, contiguous or robot)", f.split)
		}
	}
	if f.subject == "" {
		return errors.New("--subject must not be empty")
	}
	if f.partition == stdio {
		return errors.New("--partition -: every process of the run reads the partition itself: give a file")
	}
	return nil
}

func (f *partFlags) problem() posegraph.Problem {
	if f.rotations {
		return posegraph.Rotations
	}
	return posegraph.Poses
}

func (f *partFlags) logger(stderr io.Writer) *slog.Logger {
	if !f.verbose {
		return nil
	}
	return slog.New(slog.NewTextHandler(stderr, &slog.HandlerOptions{Level: slog.LevelInfo}))
}

// files is the fileSet of an agent or coordinator reading file: the graph
// and the partition, neither from standard input, since every process of
// the run reads them.
func (f *partFlags) files(file string) *fileSet {
	set := &fileSet{}
	set.input("FILE", file)
	set.input("--partition", f.partition)
	return set
}

// load reads the graph and builds the partition.
func (f *partFlags) load(file string, quiet bool, stderr io.Writer) (*posegraph.Graph, *distributed.Partition, error) {
	g, err := g2o.ReadFile(file, g2o.ReadOptions{Lenient: f.lenient, RawQuaternions: f.rawQuat, Warn: func(msg string) {
		if !quiet {
			fmt.Fprintln(stderr, "warning:", msg)
		}
	}})
	if err != nil {
		return nil, nil, err
	}
	if err := g.Validate(); err != nil {
		return nil, nil, err
	}
	var p *distributed.Partition
	switch {
	case f.partition != "":
		r, err := os.Open(f.partition)
		if err != nil {
			return nil, nil, err
		}
		p, err = distributed.ReadPartition(r, f.partition, g)
		r.Close()
		if err != nil {
			return nil, nil, err
		}
	case f.split == "robot":
		p, err = distributed.ByRobot(g)
	case f.split == "contiguous":
		p, err = distributed.Contiguous(g.N(), f.agents)
	default:
		p, err = distributed.BFS(g, f.agents)
	}
	if err != nil && !strings.HasPrefix(err.Error(), g.Source+":") {
		err = fmt.Errorf("%s: --split %s with --agents %d: %w", g.Source, f.split, f.agents, err)
	}
	if err != nil {
		return nil, nil, err
	}
	if f.agents != 0 && p.K != f.agents {
		return nil, nil, fmt.Errorf("the partition has %d parts, --agents says %d", p.K, f.agents)
	}
	f.agents = p.K
	return g, p, nil
}

// withoutNATS names the commands this build leaves out: none with the nats
// tag (see distributed_stub.go).
var withoutNATS = map[string]bool{}

func init() {
	register(command{
		name:  "agent",
		usage: "agent --nats URL --part K [flags] FILE",
		short: "run one agent of a distributed solve (the coordinator is bcmsync distributed)",
		run:   runAgent,
	})
	register(command{
		name:  "distributed",
		usage: "distributed --agents K [flags] FILE",
		short: "solve and certify FILE with K agents exchanging public poses over NATS",
		run:   runDistributed,
	})
}

func runAgent(ctx context.Context, args []string, stdout, stderr io.Writer) error {
	fs := newFlagSet("agent", "agent --nats URL --part K [flags] FILE",
		"Runs agent K of a distributed solve of FILE: it owns part K's poses, talks to the\n"+
			"coordinator and the other agents through the NATS server at URL, and exits when the\n"+
			"coordinator ends the run. Every process must read the same FILE with the same\n"+
			"partition flags (an agent holding another problem refuses to join), and the same\n"+
			"--key FILE when the run authenticates its messages. Secrets come from files or the\n"+
			"environment, never from the command line (ps shows it to every user).", stderr)
	var f partFlags
	f.register(fs)
	var sec secFlags
	sec.register(fs)
	url := fs.String("nats", "", "NATS server `URL` (e.g. nats://host:4222)")
	part := fs.Int("part", -1, "the part `K` this agent owns (0-based)")
	sweeps := fs.Int("sweeps", 0, "local passes per update (0: 4)")
	files, err := parseArgs(fs, args)
	if err != nil {
		return err
	}
	if len(files) != 1 {
		fs.Usage()
		return usageError{errors.New("agent takes exactly one FILE")}
	}
	if *url == "" {
		return usageError{errors.New("--nats URL is required")}
	}
	if *sweeps < 0 {
		return usageError{fmt.Errorf("--sweeps must be >= 0, not %d", *sweeps)}
	}
	if err := f.check(); err != nil {
		return usageError{err}
	}
	if err := sec.check(); err != nil {
		return usageError{err}
	}
	if err := notStdio("FILE", files[0], "every process of the run reads FILE itself: give a file"); err != nil {
		return err
	}
	if err := f.files(files[0]).check(); err != nil {
		return err
	}
	key, err := sec.readKey(stderr, os.Getenv(spawnedEnv) == "")
	if err != nil {
		return err
	}
	nopts, err := sec.connect(*url, key, stderr)
	if err != nil {
		return err
	}
	g, p, err := f.load(files[0], false, stderr)
	if err != nil {
		return err
	}
	if *part < 0 || *part >= p.K {
		return usageError{fmt.Errorf("--part must be in [0, %d), not %d", p.K, *part)}
	}
	bus, err := dialNATS(*url, fmt.Sprintf("bcmsync agent %d", *part), nopts)
	if err != nil {
		return err
	}
	defer bus.Close()
	return distributed.RunAgent(ctx, bus, g, p, *part, distributed.AgentOptions{
		Problem: f.problem(), Subject: f.subject, Sweeps: *sweeps, Logger: f.logger(stderr), Key: key,
	})
}

func runDistributed(ctx context.Context, args []string, stdout, stderr io.Writer) error {
	// The agents it starts write to stderr too, each from a goroutine of
	// os/exec's unless stderr is a file.
	stderr = &lockedWriter{w: stderr}
	fs := newFlagSet("distributed", "distributed --agents K [flags] FILE",
		"Solves FILE with K agents, each owning one part of the graph, coordinated over NATS.\n"+
			"Without --nats it starts an embedded NATS server on the loopback interface (with a\n"+
			"random token that only the agents it starts get); without --no-spawn it starts the K\n"+
			"agents as processes of this program (bcmsync agent), with its credential flags.\n"+
			"With --nats and --no-spawn it only coordinates: start the agents on other machines\n"+
			"with bcmsync agent --nats URL --part k and the same FILE, partition flags and --key.\n"+
			"--key FILE authenticates every message (HMAC-SHA256); the --creds, --nkey, --user,\n"+
			"--token-file and --tls-* flags sign in to a secured server (docs/distributed.md).\n"+
			"Prints the same summary and report as solve, and exits with the same statuses (bcmsync help).", stderr)
	var f partFlags
	f.register(fs)
	var sec secFlags
	sec.register(fs)
	url := fs.String("nats", "", "use the NATS server at `URL` instead of an embedded one")
	noSpawn := fs.Bool("no-spawn", false, "start no agent processes (they run elsewhere)")
	out := fs.String("o", "", "write the optimized graph as g2o to `FILE`")
	tum := fs.String("tum", "", "write the optimized trajectory in TUM format to `FILE`")
	report := fs.String("report", "", "write the JSON report to `FILE`")
	jsonOut := fs.Bool("json", false, "print the JSON report on stdout instead of the summary")
	quiet := fs.Bool("quiet", false, "print nothing but errors")
	gapTol := fs.Float64("gap-tol", 0, "relative suboptimality the certificate must prove (0: 1e-6)")
	gradTol := fs.Float64("grad-tol", 0, "relative gradient norm below which a failed certificate is taken for a saddle (0: 1e-9)")
	maxRank := fs.Int("max-rank", 10, "last rank of the staircase")
	maxRounds := fs.Int("max-rounds", 0, "maximum rounds per rank (0: 5000)")
	timeout := fs.Duration("timeout", 30*time.Second, "end the run when an agent has not answered for this long")
	timeLimit := fs.Duration("time-limit", 0, "stop after this long (0: no limit)")
	files, err := parseArgs(fs, args)
	if err != nil {
		return err
	}
	if len(files) != 1 {
		fs.Usage()
		return usageError{errors.New("distributed takes exactly one FILE")}
	}
	if err := f.check(); err != nil {
		return usageError{err}
	}
	for _, v := range []struct {
		name string
		val  float64
	}{{"gap-tol", *gapTol}, {"grad-tol", *gradTol}} {
		if !(v.val >= 0) || math.IsInf(v.val, 0) {
			return usageError{fmt.Errorf("--%s must be a finite number >= 0, not %g", v.name, v.val)}
		}
	}
	if *maxRounds < 0 || *timeout <= 0 || *timeLimit < 0 {
		return usageError{errors.New("--max-rounds, --timeout and --time-limit must not be negative (--timeout > 0)")}
	}
	if *noSpawn && *url == "" {
		return usageError{errors.New("--no-spawn needs --nats URL: agents elsewhere cannot reach an embedded server on the loopback interface")}
	}
	if err := sec.check(); err != nil {
		return usageError{err}
	}
	if name := sec.connecting(); name != "" && *url == "" {
		return usageError{fmt.Errorf("%s needs --nats URL: the embedded server takes no credentials (it listens on the loopback interface only, with a random token for the agents it starts)", name)}
	}
	file := files[0]
	if err := notStdio("FILE", file, "every agent reads FILE itself: give a file"); err != nil {
		return err
	}
	set := f.files(file)
	set.output("-o", *out)
	set.output("--tum", *tum)
	set.output("--report", *report)
	if *jsonOut {
		set.output("--json", stdio)
	}
	if err := set.check(); err != nil {
		return err
	}
	key, err := sec.readKey(stderr, !*quiet)
	if err != nil {
		return err
	}
	t0 := time.Now()
	g, p, err := f.load(file, *quiet, stderr)
	if err != nil {
		return err
	}
	if *maxRank < g.D {
		return usageError{fmt.Errorf("--max-rank must be >= d = %d", g.D)}
	}
	parse := time.Since(t0).Seconds()

	serverURL := *url
	var nopts []nats.Option
	env := []string{benchChildEnv + "=1", spawnedEnv + "=1"}
	agentArgs, err := sec.args()
	if err != nil {
		return err
	}
	if serverURL == "" {
		s, token, err := embeddedNATS()
		if err != nil {
			return err
		}
		defer s.Shutdown()
		serverURL = s.ClientURL()
		nopts = []nats.Option{nats.Token(token)}
		env = append(env, tokenEnv+"="+token)
	} else {
		warnTo := stderr
		if *quiet {
			warnTo = io.Discard
		}
		if nopts, err = sec.connect(serverURL, key, warnTo); err != nil {
			return err
		}
	}

	var procs []*exec.Cmd
	if !*noSpawn {
		exe, err := os.Executable()
		if err != nil {
			return fmt.Errorf("finding this program to start the agents: %w", err)
		}
		abs, err := filepath.Abs(file)
		if err != nil {
			return err
		}
		for k := 0; k < p.K; k++ {
			a := append([]string{"agent", "--nats", serverURL, "--part", strconv.Itoa(k)}, f.args()...)
			a = append(a, agentArgs...)
			cmd := exec.Command(exe, append(a, abs)...)
			cmd.Stdout, cmd.Stderr = stderr, stderr
			// Under `go test` the executable is the test binary, which runs
			// the command line as bcmsync when it sees benchChildEnv
			// (bench.go); the real binary ignores it. The embedded server's
			// token goes in the environment, which only this user can read.
			cmd.Env = append(os.Environ(), env...)
			if err := cmd.Start(); err != nil {
				killAll(procs)
				return fmt.Errorf("starting agent %d: %w", k, err)
			}
			procs = append(procs, cmd)
		}
	}

	bus, err := dialNATS(serverURL, "bcmsync coordinator", nopts)
	if err != nil {
		killAll(procs)
		return err
	}
	counter := &distributed.Counter{Bus: bus}
	opts := distributed.Options{
		Sync:    bsync.Options{Problem: f.problem(), GapTol: *gapTol, MaxRank: *maxRank, TimeLimit: *timeLimit, Logger: f.logger(stderr)},
		Subject: f.subject, GradTol: *gradTol, MaxRounds: *maxRounds, Timeout: *timeout, Key: key,
	}
	prog := newProgress(stderr, *quiet)
	opts.Sync.Progress = prog.update
	res, st, err := distributed.Solve(ctx, counter, g, p, opts)
	prog.done()
	bus.Close()
	if err != nil {
		killAll(procs)
		return solveError(err, g)
	}
	for k, cmd := range procs {
		if err := waitOrKill(cmd, 10*time.Second); err != nil && !*quiet {
			fmt.Fprintf(stderr, "warning: agent %d: %v\n", k, err)
		}
	}
	res.Timings.Parse = parse
	res.Timings.Total += parse
	// The report's init names the distributed initialization.
	ropts := opts.Sync
	ropts.Init = "aligned per-agent chordal"
	rep := bsync.NewReport(filepath.Base(file), res, ropts)
	rep.PeakRSSBytes = peakRSS()
	r := st.Rejected
	rep.Distributed = &bsync.DistributedReport{Authenticated: st.Authenticated,
		Rejected: bsync.AuthRejections{Forged: r.Forged, Replayed: r.Replayed, Foreign: r.Foreign}}
	if *out != "" {
		if err := writeOutput(*out, stdout, func(w io.Writer) error { return g2o.Write(w, res.Graph, res.Poses) }); err != nil {
			return err
		}
	}
	if *tum != "" {
		if err := writeOutput(*tum, stdout, func(w io.Writer) error { return g2o.WriteTUM(w, res.Graph, res.Poses) }); err != nil {
			return err
		}
	}
	if *report != "" {
		if err := writeOutput(*report, stdout, rep.WriteJSON); err != nil {
			return err
		}
	}
	info := stdout
	if set.toStdout() {
		info = stderr // stdout carries an output
	}
	switch {
	case *jsonOut:
		if err := rep.WriteJSON(stdout); err != nil {
			return err
		}
	case !*quiet:
		printSummary(info, rep, nil)
		fmt.Fprintf(info, "  distributed: %d agents in %d colour classes, %d rounds, %d lost messages resent, %d stale updates, %d restarts;\n"+
			"    coordinator traffic %d messages, %d bytes; agents published %d pose messages\n",
			st.Agents, st.Colors, st.Rounds, st.Republished, st.Stale, st.Restarts, counter.Messages.Load(), counter.Bytes.Load(), st.Publications)
		if st.Authenticated {
			fmt.Fprintf(info, "    messages authenticated (--key); rejected %d forged, %d replayed, %d foreign\n", r.Forged, r.Replayed, r.Foreign)
		} else {
			fmt.Fprintln(info, "    messages not authenticated (no --key)")
		}
	}
	if r.Total() > 0 && !*quiet {
		fmt.Fprintf(stderr, "warning: %d messages failed authentication and were dropped (%d forged, %d replayed, %d foreign): a process with another --key, or someone injecting into the run (--verbose logs each)\n",
			r.Total(), r.Forged, r.Replayed, r.Foreign)
	}
	if code := resultExitCode(res.Status, true, ""); code != exitOK {
		return notCertifiedError{status: string(res.Status), code: code}
	}
	return nil
}

// lockedWriter serializes the writes of several goroutines to w.
type lockedWriter struct {
	mu stdsync.Mutex
	w  io.Writer
}

func (l *lockedWriter) Write(p []byte) (int, error) {
	l.mu.Lock()
	defer l.mu.Unlock()
	return l.w.Write(p)
}

// killAll ends the agent processes this command started.
func killAll(procs []*exec.Cmd) {
	for _, c := range procs {
		if c.Process != nil {
			_ = c.Process.Kill()
			_ = c.Wait()
		}
	}
}

// waitOrKill waits for an agent process that was told to stop, killing it
// if it has not exited within d.
func waitOrKill(c *exec.Cmd, d time.Duration) error {
	done := make(chan error, 1)
	go func() { done <- c.Wait() }()
	select {
	case err := <-done:
		return err
	case <-time.After(d):
		_ = c.Process.Kill()
		<-done
		return fmt.Errorf("did not exit within %v after the run; killed", d)
	}
}
