package cli

import (
	"context"
	"os"
	"os/signal"
	"syscall"

	"github.com/bcmsync/bcmsync/internal/outfile"
)

// signalsReady is closed once the process's interrupt handling is in
// place (watchSignals). It is nil where there is none to wait for: a
// command run in-process (the tests' run).
var signalsReady chan struct{}

// watchSignals returns the context of the process's command: an interrupt
// or a termination request cancels it, and the solve returns its estimate
// so far, the outputs are written whole and the status is exitCancelled.
// A second signal ends the process at once.
//
// The handling is set up on a goroutine of its own, beside the command's
// first work rather than before it: package os/signal starts the runtime's
// signal thread (a thread locked to its goroutine, and the template thread
// that locking needs) and its own receiving goroutine, and each signal it
// enables is a round trip to that thread: on the main goroutine, a
// visible part of a small solve's start (docs/tuning.md, "Constant costs
// of a small solve"). Until the handling is in place a signal ends the
// process, as it does while the runtime starts; it is in place before the
// process writes anything (signalGated, outfile.SetBeforeCreate), so an
// interrupt after any output, a progress line included, is handled.
func watchSignals() context.Context {
	ctx, cancel := context.WithCancel(context.Background())
	ready := make(chan struct{})
	signalsReady = ready
	outfile.SetBeforeCreate(awaitSignals)
	go func() {
		sigs := make(chan os.Signal, 1)
		signal.Notify(sigs, os.Interrupt, syscall.SIGTERM)
		close(ready)
		<-sigs
		cancel()
		// Back to the default action: the next signal ends the process.
		signal.Stop(sigs)
	}()
	return ctx
}

// awaitSignals waits until the process's interrupt handling is in place.
func awaitSignals() {
	if c := signalsReady; c != nil {
		<-c
	}
}

// signalGated is one of the process's standard streams: its first write
// waits for the interrupt handling (watchSignals), so that whoever acts on
// the process's output (an interrupt after a progress line, as
// TestInterrupt sends) finds it handled.
type signalGated struct{ f *os.File }

func (w signalGated) Write(p []byte) (int, error) {
	awaitSignals()
	return w.f.Write(p)
}

// streamFile returns the file behind the standard stream w, if it is one.
func streamFile(w any) (*os.File, bool) {
	switch w := w.(type) {
	case *os.File:
		return w, true
	case signalGated:
		return w.f, true
	}
	return nil, false
}
