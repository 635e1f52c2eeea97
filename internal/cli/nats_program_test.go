package cli

import (
	"bytes"
	"errors"
	"os"
	"os/exec"
	"path/filepath"
	"runtime"
	"strconv"
	"strings"
	"syscall"
	"testing"
	"time"

	"github.com/bcmsync/bcmsync/internal/natstest"
)

// buildPrograms builds bcmsync and bcmsync-nats into dir/bin, as `go
// install ./cmd/...` would, and returns that folder.
func buildPrograms(t *testing.T, dir string) string {
	t.Helper()
	if testing.Short() {
		t.Skip("builds both programs")
	}
	goTool, err := exec.LookPath("go")
	if err != nil {
		goTool = filepath.Join(runtime.GOROOT(), "bin", "go")
	}
	bin := filepath.Join(dir, "bin")
	cmd := exec.Command(goTool, "build", "-o", bin+string(filepath.Separator), "./cmd/bcmsync", "./cmd/bcmsync-nats")
	cmd.Dir = filepath.Join("..", "..") // the module's root
	if out, err := cmd.CombinedOutput(); err != nil {
		t.Fatalf("go build: %v\n%s", err, out)
	}
	return bin
}

// runProgram runs the program path with args and the environment's PATH
// set to path, and returns its exit status and output.
func runProgram(t *testing.T, path, pathEnv string, args ...string) (int, string, string) {
	t.Helper()
	cmd := exec.Command(path, args...)
	cmd.Env = append(os.Environ(), "PATH="+pathEnv)
	var out, errb bytes.Buffer
	cmd.Stdout, cmd.Stderr = &out, &errb
	err := cmd.Run()
	var ee *exec.ExitError
	if err != nil && !errors.As(err, &ee) {
		t.Fatal(err)
	}
	return cmd.ProcessState.ExitCode(), out.String(), errb.String()
}

// TestNATSProgram: the bcmsync program leaves NATS out, and its
// distributed and agent commands run in bcmsync-nats, found beside it or
// on PATH, with their arguments, standard streams, exit status and
// signals; without bcmsync-nats they fail saying what to install, and
// their help and usage errors need no bcmsync-nats.
func TestNATSProgram(t *testing.T) {
	dir := t.TempDir()
	bin := buildPrograms(t, dir)
	in := demoFile(t, dir, "in.g2o")
	empty := filepath.Join(dir, "empty")
	alone := filepath.Join(dir, "alone")
	for _, d := range []string{empty, alone} {
		if err := os.Mkdir(d, 0o755); err != nil {
			t.Fatal(err)
		}
	}
	b, err := os.ReadFile(filepath.Join(bin, "bcmsync"))
	if err != nil {
		t.Fatal(err)
	}
	lone := filepath.Join(alone, "bcmsync")
	if err := os.WriteFile(lone, b, 0o755); err != nil {
		t.Fatal(err)
	}
	bcmsync := filepath.Join(bin, "bcmsync")

	// Beside bcmsync: the arguments and standard output are the command's
	// (-o - puts the graph on stdout, and the summary on stderr).
	code, stdout, stderr := runProgram(t, bcmsync, empty, "distributed", "--agents", "2", "-o", "-", in)
	if code != 0 || !strings.HasPrefix(stdout, "VERTEX_SE2 ") || !strings.Contains(stderr, "CERTIFIED globally optimal") ||
		!strings.Contains(stderr, "distributed: 2 agents") {
		t.Fatalf("beside: exit %d\n%.300s\n%s", code, stdout, stderr)
	}
	// On PATH.
	if code, stdout, stderr := runProgram(t, lone, bin, "distributed", "--agents", "2", in); code != 0 || !strings.Contains(stdout, "CERTIFIED") {
		t.Errorf("on PATH: exit %d\n%s\n%s", code, stdout, stderr)
	}
	// Its exit status and messages: a bad partition file, read by bcmsync-nats.
	part := filepath.Join(dir, "parts.txt")
	if err := os.WriteFile(part, []byte("0 0\n1 x\n"), 0o644); err != nil {
		t.Fatal(err)
	}
	if code, _, stderr := runProgram(t, bcmsync, empty, "distributed", "--partition", part, in); code != exitError || !strings.Contains(stderr, part+":2:") {
		t.Errorf("bad partition: exit %d, stderr %q", code, stderr)
	}
	if code, _, stderr := runProgram(t, bcmsync, empty, "agent", "--nats", "nats://127.0.0.1:1", "--agents", "2", "--part", "0", in); code != exitError || !strings.Contains(stderr, "connecting to NATS at nats://127.0.0.1:1") {
		t.Errorf("agent: exit %d, stderr %q", code, stderr)
	}

	// Missing: a clear error naming what to install; help and usage
	// errors still work.
	for _, name := range []string{"distributed", "agent"} {
		args := []string{name, "--agents", "2", in}
		if name == "agent" {
			args = []string{name, "--nats", "nats://127.0.0.1:1", "--part", "0", "--agents", "2", in}
		}
		code, _, stderr := runProgram(t, lone, empty, args...)
		want := "bcmsync " + name + ": this command runs in bcmsync-nats, the program with the NATS transport, which is neither in " + alone +
			" nor on PATH; install it with: go install github.com/bcmsync/bcmsync/cmd/bcmsync-nats@"
		if code != exitError || !strings.HasPrefix(stderr, want) {
			t.Errorf("%s without bcmsync-nats: exit %d, stderr %q; want 1 and %q", name, code, stderr, want)
		}
		if code, stdout, _ := runProgram(t, lone, empty, "help", name); code != 0 || !strings.Contains(stdout, "usage: bcmsync "+name) {
			t.Errorf("help %s without bcmsync-nats: exit %d\n%s", name, code, stdout)
		}
	}
	if code, _, stderr := runProgram(t, lone, empty, "distributed", "--agents", "2", "--robust", "gnc-tls", in); code != exitUsage || !strings.Contains(stderr, "no outlier rejection") {
		t.Errorf("usage error without bcmsync-nats: exit %d, stderr %q", code, stderr)
	}

	// Signals: a coordinator waiting for agents that never come is
	// interrupted, and exits as an interrupted solve does. The process is
	// bcmsync-nats by then (Linux shows it), so the signal is its own.
	srv := natstest.StartPlain(t)
	url := srv.ClientURL()
	cmd := exec.Command(bcmsync, "distributed", "--no-spawn", "--nats", url, "--agents", "2", in)
	cmd.Env = append(os.Environ(), "PATH="+empty)
	var errb bytes.Buffer
	cmd.Stderr = &errb
	if err := cmd.Start(); err != nil {
		t.Fatal(err)
	}
	became := false
	for deadline := time.Now().Add(20 * time.Second); runtime.GOOS == "linux" && !became && time.Now().Before(deadline); {
		b, _ := os.ReadFile(filepath.Join("/proc", strconv.Itoa(cmd.Process.Pid), "cmdline"))
		if became = strings.HasPrefix(string(b), filepath.Join(bin, "bcmsync-nats")+"\x00distributed\x00"); !became {
			time.Sleep(20 * time.Millisecond)
		}
	}
	if runtime.GOOS == "linux" && !became {
		t.Error("the bcmsync process did not become bcmsync-nats")
	}
	// Into the solve: the coordinator connects to the server only after
	// its signal handling is set up (runProcess), so once the server
	// counts a client an interrupt cancels the solve instead of killing the
	// process (a fixed sleep lost that race on a loaded machine).
	for deadline := time.Now().Add(30 * time.Second); srv.NumClients() == 0 && time.Now().Before(deadline); {
		time.Sleep(20 * time.Millisecond)
	}
	if srv.NumClients() == 0 {
		t.Error("the coordinator never connected to the NATS server")
	}
	time.Sleep(100 * time.Millisecond)
	if err := cmd.Process.Signal(os.Interrupt); err != nil {
		t.Fatal(err)
	}
	_ = cmd.Wait()
	if code := cmd.ProcessState.ExitCode(); code != exitCancelled {
		t.Errorf("interrupted: exit %d, stderr %q; want %d", code, errb.String(), exitCancelled)
	}
}

// TestRunForwarding: where a process cannot become bcmsync-nats, bcmsync
// runs it as a child with the same arguments and passes on its signals
// and exit status (exercised here on Unix with a shell script).
func TestRunForwarding(t *testing.T) {
	if runtime.GOOS == "windows" {
		t.Skip("a shell script stands in for the program")
	}
	dir := t.TempDir()
	out := filepath.Join(dir, "out")
	script := filepath.Join(dir, "prog")
	src := "#!/bin/sh\nprintf '%s\\n' \"$@\" > " + out + "\n" +
		"case \"$1\" in\n  exit) exit \"$2\" ;;\nesac\n" +
		"trap 'echo term >> " + out + "; exit 9' TERM\necho ready >> " + out + "\nwhile :; do sleep 0.05; done\n"
	if err := os.WriteFile(script, []byte(src), 0o755); err != nil {
		t.Fatal(err)
	}
	if err := runForwarding(script, []string{"prog", "exit", "0"}, nil); err != nil {
		t.Errorf("exit 0: %v", err)
	}
	if err := runForwarding(script, []string{"prog", "exit", "5"}, nil); err != (exitStatus{5}) {
		t.Errorf("exit 5: %v", err)
	}
	sigs := make(chan os.Signal, 1)
	done := make(chan error, 1)
	go func() { done <- runForwarding(script, []string{"prog", "a b", "--flag"}, sigs) }()
	for start := time.Now(); ; time.Sleep(10 * time.Millisecond) {
		if b, _ := os.ReadFile(out); strings.Contains(string(b), "ready") {
			break
		}
		if time.Since(start) > 20*time.Second {
			t.Fatal("the program did not start")
		}
	}
	sigs <- syscall.SIGTERM
	if err := <-done; err != (exitStatus{9}) {
		t.Errorf("after SIGTERM: %v, want exit status 9", err)
	}
	if b, _ := os.ReadFile(out); string(b) != "a b\n--flag\nready\nterm\n" {
		t.Errorf("the program saw %q", b)
	}
}
