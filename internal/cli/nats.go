package cli

import (
	"errors"
	"fmt"
	"os"
	"os/exec"
	"os/signal"
	"path/filepath"
	"runtime"
	"runtime/debug"
	"syscall"

	"github.com/bcmsync/bcmsync/sync/distributed"
)

// The distributed commands (distributed.go) need NATS: a client for every
// process of a run, and, without --nats, a server of their own. Linking
// the NATS client and server into a program adds milliseconds and
// megabytes to the start of every command it runs, whatever the command
// does, since Go initializes every linked package before main
// (docs/tuning.md), and bench runs each graph in its own process. So
// the commands live in two programs built from this package:
//
//   - bcmsync (cmd/bcmsync) leaves NATS out. Its distributed and agent
//     commands parse and check their command line like any other (usage
//     errors, help, the files rule), then hand it over to bcmsync-nats,
//     found beside this program or on PATH (execNATS): the same process
//     becomes bcmsync-nats where the system allows (Unix), so arguments,
//     standard streams, signals and the exit status are its own.
//   - bcmsync-nats (cmd/bcmsync-nats) sets the NATS link (SetNATS,
//     package internal/natslink) and runs every command the same way.

// NATS is the link to NATS that the distributed commands use; package
// internal/natslink provides one.
type NATS struct {
	// Dial connects to the NATS server at url under a client name,
	// signed in and secured as sec says; close ends the connection. A
	// file of sec that cannot be used is a *distributed.FileError.
	Dial func(url, name string, sec distributed.NATSSecurity) (bus distributed.Bus, close func(), err error)
	// Serve starts a NATS server on the loopback interface and returns
	// its URL, the token a client needs to connect (sec.Token) and the
	// function that stops it.
	Serve func() (url, token string, stop func(), err error)
}

// natsLink is the NATS link of this program: nil in bcmsync, which hands
// the distributed commands to bcmsync-nats.
var natsLink *NATS

// SetNATS gives the distributed commands their link to NATS; bcmsync-nats
// calls it before Main.
func SetNATS(n NATS) { natsLink = &n }

// natsProgram is the name of the program that holds the NATS transport.
const natsProgram = "bcmsync-nats"

// natsPackage is what `go install` needs to build natsProgram.
const natsPackage = "github.com/bcmsync/bcmsync/cmd/bcmsync-nats"

// exitStatus makes the process exit with code and print nothing more: the
// program the command ran has already said why.
type exitStatus struct{ code int }

func (e exitStatus) Error() string { return fmt.Sprintf("exit status %d", e.code) }

// execNATS hands the command name with its arguments to bcmsync-nats and
// returns only if that fails or, where a process cannot become another
// program, with the exit status of bcmsync-nats run as a child.
func execNATS(name string, args []string) error {
	path, err := findNATS()
	if err != nil {
		return fmt.Errorf("bcmsync %s: %w", name, err)
	}
	argv := append([]string{path, name}, args...)
	return execProgram(path, argv)
}

// findNATS returns the path of bcmsync-nats: beside this program (the
// executable's folder, symbolic links resolved), else on PATH.
func findNATS() (string, error) {
	exe := natsProgram
	if runtime.GOOS == "windows" {
		exe += ".exe"
	}
	where := "this program's folder"
	if self, err := os.Executable(); err == nil {
		if r, err := filepath.EvalSymlinks(self); err == nil {
			self = r
		}
		dir := filepath.Dir(self)
		where = dir
		if p := filepath.Join(dir, exe); isProgram(p) {
			return p, nil
		}
	}
	if p, err := exec.LookPath(natsProgram); err == nil {
		return p, nil
	}
	return "", fmt.Errorf("this command runs in %s, the program with the NATS transport, which is neither in %s nor on PATH; "+
		"install it with: go install %s@%s", natsProgram, where, natsPackage, moduleVersion())
}

// isProgram reports whether path is a regular file that can be run.
func isProgram(path string) bool {
	st, err := os.Stat(path)
	return err == nil && st.Mode().IsRegular() && (runtime.GOOS == "windows" || st.Mode().Perm()&0o111 != 0)
}

// moduleVersion is the version to install bcmsync-nats at: this program's
// own when it is a release, else latest.
func moduleVersion() string {
	if bi, ok := debug.ReadBuildInfo(); ok && bi.Main.Version != "" && bi.Main.Version != "(devel)" {
		return bi.Main.Version
	}
	return "latest"
}

// runForwarding runs the program path with argv (argv[0] its name) as a
// child on this process's standard streams, passes on the signals that
// arrive on sigs, and returns the child's exit status as an exitStatus
// (nil for 0). It is execNATS where a process cannot replace itself by
// another program (forwardSignals gives it this process's interrupts and
// termination requests).
func runForwarding(path string, argv []string, sigs <-chan os.Signal) error {
	cmd := exec.Command(path, argv[1:]...)
	cmd.Stdin, cmd.Stdout, cmd.Stderr = os.Stdin, os.Stdout, os.Stderr
	if err := cmd.Start(); err != nil {
		return fmt.Errorf("running %s: %w", path, err)
	}
	done := make(chan struct{})
	go func() {
		for {
			select {
			case s := <-sigs:
				_ = cmd.Process.Signal(s)
			case <-done:
				return
			}
		}
	}()
	err := cmd.Wait()
	close(done)
	var ee *exec.ExitError
	switch {
	case err == nil:
		return nil
	case errors.As(err, &ee) && ee.ExitCode() >= 0:
		return exitStatus{ee.ExitCode()}
	case errors.As(err, &ee):
		// Ended by a signal: exit as a cancelled run does.
		return exitStatus{exitCancelled}
	}
	return fmt.Errorf("running %s: %w", path, err)
}

// forwardSignals runs runForwarding with this process's interrupts and
// termination requests.
func forwardSignals(path string, argv []string) error {
	sigs := make(chan os.Signal, 4)
	signal.Notify(sigs, os.Interrupt, syscall.SIGTERM)
	defer signal.Stop(sigs)
	return runForwarding(path, argv, sigs)
}
