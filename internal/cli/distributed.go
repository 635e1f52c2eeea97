package cli

import (
	"context"
	"errors"
	"flag"
	"fmt"
	"io"
	"log/slog"
	"os"
	"os/exec"
	"path/filepath"
	"strconv"
	"strings"
	stdsync "sync"
	"time"

	"github.com/bcmsync/bcmsync/posegraph"
	bsync "github.com/bcmsync/bcmsync/sync"
	"github.com/bcmsync/bcmsync/sync/distributed"
)

// partFlags choose the partition and build the problem; agent and
// distributed share them, and every process of a run must be given the
// same. The problem's flags (--rotations, --largest-component, --lenient,
// --raw-quaternions) and --verbose are solve's, declared by solveFlags:
// distributed takes all of solve's flags it can (distributedNotTaken), an
// agent these (agentSolveFlags).
type partFlags struct {
	agents    int
	split     string
	partition string
	subject   string
	overlap   string
	solve     solveFlags
}

// agentSolveFlags are the solve flags an agent takes: those that make it
// build the same problem as the coordinator, and --verbose.
var agentSolveFlags = []string{"rotations", "largest-component", "lenient", "raw-quaternions", "verbose"}

func (f *partFlags) register(fs *flag.FlagSet) {
	fs.IntVar(&f.agents, "agents", 0, "number of agents K (for --split spectral, bfs or contiguous; with robot or --partition it must match, or be 0)")
	fs.StringVar(&f.split, "split", "spectral", "how to split the graph: spectral (recursive spectral bisection: cuts where the graph is weakly coupled), bfs (K bands of a breadth-first order), contiguous (K runs of pose indices, DPGO's split), robot (GTSAM Symbol id prefixes)")
	fs.StringVar(&f.partition, "partition", "", "read the partition from `FILE` (lines \"id part\"), instead of --split")
	fs.StringVar(&f.subject, "subject", "bcmsync", "NATS subject prefix of the run (runs sharing a server need different ones)")
	fs.StringVar(&f.overlap, "overlap", "auto", "hops of the neighbouring parts' poses each agent's update also moves, keeping only its own: N >= 0 (0: none), or auto (the most, at least 1 and up to 10, at which no part's halo exceeds 2/3 of its poses)")
}

// overlapHops is --overlap as distributed.Options.Overlap takes it: 0 for
// auto, -1 for none.
func (f *partFlags) overlapHops() int {
	if f.overlap == "auto" {
		return 0
	}
	h, _ := strconv.Atoi(f.overlap) // check made sure it is a number
	if h == 0 {
		return -1
	}
	return h
}

// args returns the flags that make an agent process of a run of k parts
// build the same problem. Not the split: the partition is sent to the
// agents when they join, and k bounds their --part.
func (f *partFlags) args(k int) []string {
	a := []string{"--agents", strconv.Itoa(k), "--subject", f.subject, "--overlap", f.overlap}
	sf := &f.solve
	for _, b := range []struct {
		on   bool
		name string
	}{{sf.rotations, "--rotations"}, {sf.largest, "--largest-component"}, {sf.lenient, "--lenient"}, {sf.rawQuat, "--raw-quaternions"}, {sf.verbose, "--verbose"}} {
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
		case "spectral", "bfs", "contiguous":
			if f.agents < 1 {
				return fmt.Errorf("--split %s needs --agents K >= 1", f.split)
			}
		case "robot":
		default:
			return fmt.Errorf("unknown --split %q (want spectral, bfs, contiguous or robot)", f.split)
		}
	}
	if f.subject == "" {
		return errors.New("--subject must not be empty")
	}
	if h, err := strconv.Atoi(f.overlap); f.overlap != "auto" && (err != nil || h < 0 || h > 16) {
		return fmt.Errorf("--overlap must be auto or a number of hops from 0 to 16, not %q", f.overlap)
	}
	if f.partition == stdio {
		return errors.New("--partition -: every process of the run reads the partition itself: give a file")
	}
	return nil
}

func (f *partFlags) problem() posegraph.Problem {
	if f.solve.rotations {
		return posegraph.Rotations
	}
	return posegraph.Poses
}

func (f *partFlags) logger(stderr io.Writer) *slog.Logger {
	if !f.solve.verbose {
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

// load reads the graph as solve does, keeps its largest component with
// --largest-component, and builds the partition of what is solved. It
// returns that graph, the graph as read and the seconds reading took.
func (f *partFlags) load(file string, stderr io.Writer) (g, input *posegraph.Graph, p *distributed.Partition, parse float64, err error) {
	g, input, parse, err = f.loadGraph(file, stderr)
	if err != nil {
		return nil, nil, nil, 0, err
	}
	p, err = f.partitionOf(g)
	return g, input, p, parse, err
}

// loadGraph is load without the partition: an agent takes the
// coordinator's.
func (f *partFlags) loadGraph(file string, stderr io.Writer) (g, input *posegraph.Graph, parse float64, err error) {
	g, parse, err = f.solve.read(file, stderr)
	if err != nil {
		return nil, nil, 0, err
	}
	input = g
	if err := g.Validate(); err != nil {
		if !f.solve.largest || !posegraph.IsDisconnected(err) {
			return nil, nil, 0, disconnectedHint(err)
		}
		g = g.Subgraph(g.Components()[0])
		if err := g.Validate(); err != nil {
			return nil, nil, 0, err
		}
	}
	return g, input, parse, nil
}

// partitionOf builds the partition of g the flags ask for.
func (f *partFlags) partitionOf(g *posegraph.Graph) (*distributed.Partition, error) {
	var p *distributed.Partition
	var err error
	switch {
	case f.partition != "":
		r, err := os.Open(f.partition)
		if err != nil {
			return nil, err
		}
		p, err = distributed.ReadPartition(r, f.partition, g)
		r.Close()
		if err != nil {
			return nil, err
		}
	case f.split == "robot":
		p, err = distributed.ByRobot(g)
	case f.split == "contiguous":
		p, err = distributed.Contiguous(g.N(), f.agents)
	case f.split == "bfs":
		p, err = distributed.BFS(g, f.agents)
	default:
		p, err = distributed.Spectral(g, f.agents)
	}
	if err != nil && !strings.HasPrefix(err.Error(), g.Source+":") {
		err = fmt.Errorf("%s: --split %s with --agents %d: %w", g.Source, f.split, f.agents, err)
	}
	if err != nil {
		return nil, err
	}
	if f.agents != 0 && p.K != f.agents {
		return nil, fmt.Errorf("the partition has %d parts, --agents says %d", p.K, f.agents)
	}
	f.agents = p.K
	return p, nil
}

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
			"problem flags (an agent holding another problem refuses to join), and the same\n"+
			"--key FILE when the run authenticates its messages. The partition is the\n"+
			"coordinator's, sent when the agent joins: --split and --partition are not read\n"+
			"here, and --agents K only bounds --part. Secrets come from files\n"+
			"or the environment, never from the command line (ps shows it to every user).", stderr)
	var f partFlags
	f.register(fs)
	var sec secFlags
	sec.register(fs)
	url := fs.String("nats", "", "NATS server `URL` (e.g. nats://host:4222)")
	part := fs.Int("part", -1, "the part `K` this agent owns (0-based)")
	sweeps := fs.Int("sweeps", 0, "local passes per update (0: 1)")
	f.solve.registerOnly(fs, agentSolveFlags...)
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
	set := &fileSet{} // not f.files: an agent does not read --partition
	set.input("FILE", files[0])
	sec.inputs(set)
	if err := set.check(); err != nil {
		return err
	}
	if natsLink == nil {
		return execNATS("agent", args)
	}
	// The coordinator sends the partition: say so to a user who gave one
	// here expecting it to count (after the hand-over to bcmsync-nats, so
	// that it is said once).
	fs.Visit(func(fl *flag.Flag) {
		if fl.Name == "split" || fl.Name == "partition" {
			fmt.Fprintf(stderr, "bcmsync agent: --%s is not read by an agent: the partition is the coordinator's (bcmsync distributed), sent when the agent joins\n", fl.Name)
		}
	})
	key, err := sec.readKey(stderr, os.Getenv(spawnedEnv) == "")
	if err != nil {
		return err
	}
	nsec, err := sec.connect(*url, key, stderr)
	if err != nil {
		return err
	}
	if *part < 0 || (f.agents > 0 && *part >= f.agents) {
		return usageError{fmt.Errorf("--part must be in [0, %d), not %d", max(f.agents, 1), *part)}
	}
	// The partition is the coordinator's: it comes with the command that
	// makes this agent join, so the agent computes no split (a spectral
	// one of the whole graph was the largest part of its peak memory).
	g, _, _, err := f.loadGraph(files[0], stderr)
	if err != nil {
		return err
	}
	bus, closeBus, err := dial(*url, fmt.Sprintf("bcmsync agent %d", *part), nsec)
	if err != nil {
		return err
	}
	defer closeBus()
	return distributed.RunAgent(ctx, bus, g, nil, *part, distributed.AgentOptions{
		Problem: f.problem(), Subject: f.subject, Sweeps: *sweeps, Logger: f.logger(stderr), Key: key, PeakRSS: peakRSS,
		Overlap: f.overlapHops(),
	})
}

// distributedNotTaken are the solve flags distributed does not take, with
// what the distributed solver does in their place.
var distributedNotTaken = notTaken{
	{[]string{"init"}, "each agent starts from the chordal estimate of its own part, and the coordinator aligns the parts"},
	{[]string{"rank0", "rule", "bcm-tol", "bcm-decrease", "bcm-sweeps", "max-iterations"},
		"the staircase starts at rank d, and the agents' rounds (--max-rounds) take the place of solve's BCM sweeps and trust-region steps"},
	{[]string{"robust", "trust-odometry", "robust-consistency", "robust-quantile", "robust-threshold"},
		"the distributed solver has no outlier rejection (solve --robust gnc-tls rejects outliers)"},
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
			"with bcmsync agent --nats URL --part k, the same FILE and problem flags and --key\n"+
			"(the partition is sent to them). --key FILE authenticates every message (HMAC-SHA256); the --creds, --nkey,\n"+
			"--user, --token-file and --tls-* flags sign in to a secured server (docs/distributed.md).\n"+
			"Writes the same outputs, summary and report as solve, and exits with the same statuses\n"+
			"(bcmsync help).\n\n"+distributedNotTaken.help("distributed"), stderr)
	var f partFlags
	f.register(fs)
	var sec secFlags
	sec.register(fs)
	url := fs.String("nats", "", "use the NATS server at `URL` instead of an embedded one")
	noSpawn := fs.Bool("no-spawn", false, "start no agent processes (they run elsewhere)")
	maxRounds := fs.Int("max-rounds", 0, "maximum rounds per rank (0: 5000)")
	timeout := fs.Duration("timeout", 30*time.Second, "end the run when an agent has not answered for this long (the estimate so far is written, status \"aborted by an error\")")
	checkpoint := fs.String("checkpoint", "", "write the run's state to `FILE` after each level and every --checkpoint-rounds rounds (atomically), for --resume")
	checkpointRounds := fs.Int("checkpoint-rounds", 100, "rounds between two checkpoints within a level")
	central := fs.Bool("central", false, "the coordinator certifies and rounds the gathered point itself instead of the agents by parts (the same proof and rounding; a reference)")
	resume := fs.String("resume", "", "start from the checkpoint `FILE` of a run of the same FILE and partition (not the --checkpoint file: an input is never overwritten)")
	sf := &f.solve
	sf.registerExcept(fs, distributedNotTaken)
	files, err := parseSolveLike(fs, distributedNotTaken, args)
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
	if _, err := sf.options(io.Discard); err != nil {
		return usageError{err}
	}
	if *maxRounds < 0 || *timeout <= 0 {
		return usageError{errors.New("--max-rounds must not be negative, and --timeout must be > 0")}
	}
	if *checkpointRounds < 1 {
		return usageError{fmt.Errorf("--checkpoint-rounds must be >= 1, not %d", *checkpointRounds)}
	}
	if err := notStdio("--checkpoint", *checkpoint, "a checkpoint is a file to resume from: give a file"); err != nil {
		return err
	}
	if err := notStdio("--resume", *resume, "every process of the run reads its files itself: give a file"); err != nil {
		return err
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
	sec.inputs(set)
	sf.outputs(set)
	set.output("--checkpoint", *checkpoint)
	set.input("--resume", *resume)
	if err := set.check(); err != nil {
		return err
	}
	if natsLink == nil {
		return execNATS("distributed", args)
	}
	var resumed *distributed.Checkpoint
	if *resume != "" {
		if resumed, err = readCheckpoint(*resume); err != nil {
			return err
		}
	}
	key, err := sec.readKey(stderr, !sf.quiet)
	if err != nil {
		return err
	}
	g, input, p, parse, err := f.load(file, stderr)
	if err != nil {
		return err
	}
	if err := sf.checkRanks(g.D, file); err != nil {
		return usageError{err}
	}
	pairs, err := sf.prepareCovariances(g)
	if err != nil {
		return err
	}
	sopts, err := sf.options(stderr)
	if err != nil {
		return usageError{err}
	}

	// The agents it starts get its credential and key flags, and the
	// embedded server's token in their environment, which only this user
	// can read. Under `go test` the executable is the test binary, which
	// runs the command line as bcmsync when it sees benchChildEnv
	// (bench.go); the real binary ignores it.
	agentArgs, err := sec.args()
	if err != nil {
		return err
	}
	env := []string{benchChildEnv + "=1", spawnedEnv + "=1"}
	serverURL := *url
	var nsec distributed.NATSSecurity
	if serverURL == "" {
		u, token, stop, err := natsLink.Serve()
		if err != nil {
			return err
		}
		defer stop()
		serverURL = u
		nsec.Token = token
		env = append(env, tokenEnv+"="+token)
	} else {
		warnTo := stderr
		if sf.quiet {
			warnTo = io.Discard
		}
		if nsec, err = sec.connect(serverURL, key, warnTo); err != nil {
			return err
		}
	}
	// The coordinator connects first, so that credentials the server
	// refuses end the run before any agent starts.
	bus, closeBus, err := dial(serverURL, "bcmsync coordinator", nsec)
	if err != nil {
		return err
	}

	var procs []*exec.Cmd
	if !*noSpawn {
		exe, err := os.Executable()
		if err != nil {
			closeBus()
			return fmt.Errorf("finding this program to start the agents: %w", err)
		}
		abs, err := filepath.Abs(file)
		if err != nil {
			closeBus()
			return err
		}
		for k := 0; k < p.K; k++ {
			a := append([]string{"agent", "--nats", serverURL, "--part", strconv.Itoa(k)}, f.args(p.K)...)
			a = append(a, agentArgs...)
			cmd := exec.Command(exe, append(a, abs)...)
			cmd.Stdout, cmd.Stderr = stderr, stderr
			cmd.Env = append(os.Environ(), env...)
			if err := cmd.Start(); err != nil {
				closeBus()
				killAll(procs)
				return fmt.Errorf("starting agent %d: %w", k, err)
			}
			procs = append(procs, cmd)
		}
	}

	opts := distributed.Options{
		Sync:    sopts,
		Subject: f.subject, MaxRounds: *maxRounds, Timeout: *timeout, Key: key,
		CheckpointRounds: *checkpointRounds, Resume: resumed, Central: *central, Overlap: f.overlapHops(),
	}
	if *checkpoint != "" {
		opts.Checkpoint = checkpointWriter(*checkpoint, stderr, sf.quiet)
	}
	prog := newProgress(stderr, sf.quiet)
	opts.Sync.Progress = prog.update
	res, st, err := distributed.Solve(ctx, bus, g, p, opts)
	prog.done()
	closeBus()
	if err != nil {
		killAll(procs)
		return solveError(err, g)
	}
	if res.Status == bsync.Aborted {
		// An agent is gone or failing: the others were told to stop, and
		// the estimate so far is written below; no process is left behind.
		killAll(procs)
		procs = nil
	}
	for k, cmd := range procs {
		if err := waitOrKill(cmd, 10*time.Second); err != nil && !sf.quiet {
			fmt.Fprintf(stderr, "warning: agent %d: %v\n", k, err)
		}
	}
	res.Timings.Parse = parse
	res.Timings.Total += parse
	rep := bsync.NewReport(filepath.Base(file), res)
	rep.PeakRSSBytes = peakRSS()
	r := st.Rejected
	rep.Distributed = st.Report(rep.PeakRSSBytes)
	note := fmt.Sprintf("distributed: %d agents in %d colour classes, %d rounds, %d lost messages resent, %d stale updates, %d restarts;\n"+
		"    coordinator traffic %d messages, %d bytes (%d moving whole blocks); agents published %d pose messages, %d bytes;\n"+
		"    %.0f bytes per round for %d boundary poses",
		st.Agents, st.Colors, st.Rounds, st.Republished, st.Stale, st.Restarts, st.Requests, st.RequestBytes, st.TransferBytes,
		st.Publications, st.PublicationBytes, st.RoundBytes(), st.BoundaryPoses)
	if st.ResumedRank > 0 {
		note += fmt.Sprintf("\n    resumed from %s at rank %d after %d rounds", *resume, st.ResumedRank, st.ResumedRounds)
	}
	if *checkpoint != "" {
		note += fmt.Sprintf("\n    %d checkpoints written to %s", st.Checkpoints, *checkpoint)
	}
	if res.Status == bsync.Aborted {
		note += "\n    aborted: " + res.Error + "\n    the estimate written is the last point the coordinator held, rounded"
	}
	if st.Authenticated {
		note += fmt.Sprintf("\n    messages authenticated (--key); rejected %d forged, %d replayed, %d foreign", r.Forged, r.Replayed, r.Foreign)
	} else {
		note += "\n    messages not authenticated (no --key)"
	}
	if r.Total() > 0 && !sf.quiet {
		fmt.Fprintf(stderr, "warning: %d messages failed authentication and were dropped (%d forged, %d replayed, %d foreign): a process with another --key, or someone injecting into the run (--verbose logs each)\n",
			r.Total(), r.Forged, r.Replayed, r.Foreign)
	}
	return sf.writeResult(&solved{file: file, input: input, res: res, rep: rep, pairs: pairs, notes: []string{note}},
		set.toStdout(), stdout, stderr)
}

// readCheckpoint reads the checkpoint file path (--resume).
func readCheckpoint(path string) (*distributed.Checkpoint, error) {
	f, err := os.Open(path)
	if err != nil {
		return nil, err
	}
	defer f.Close()
	return distributed.ReadCheckpoint(f, path)
}

// checkpointWriter writes each checkpoint to path, whole or not at all
// (writeOutput); a failure is a warning, once, and the run goes on.
func checkpointWriter(path string, stderr io.Writer, quiet bool) func(*distributed.Checkpoint) error {
	warned := false
	return func(ck *distributed.Checkpoint) error {
		err := writeOutput(path, nil, func(w io.Writer) error {
			_, err := ck.WriteTo(w)
			return err
		})
		if err != nil && !warned && !quiet {
			warned = true
			fmt.Fprintf(stderr, "warning: checkpoint not written: %v (the run goes on)\n", err)
		}
		return err
	}
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
