package cli

import (
	"bytes"
	"os"
	"path/filepath"
	"testing"
	"time"

	"github.com/bcmsync/bcmsync/internal/outfile"
)

// TestSignalGate checks what makes the late set-up of the interrupt
// handling safe (watchSignals): until it is in place, a write to a
// standard stream (signalGated) and the start of an output file
// (outfile.Create, through SetBeforeCreate) wait, and both go on once it
// is.
func TestSignalGate(t *testing.T) {
	ready := make(chan struct{})
	old := signalsReady
	signalsReady = ready
	outfile.SetBeforeCreate(awaitSignals)
	t.Cleanup(func() {
		signalsReady = old
		outfile.SetBeforeCreate(func() {})
	})

	r, w, err := os.Pipe()
	if err != nil {
		t.Fatal(err)
	}
	defer r.Close()
	path := filepath.Join(t.TempDir(), "out.txt")
	wrote, created := make(chan error, 1), make(chan error, 1)
	go func() {
		_, err := signalGated{w}.Write([]byte("progress\n"))
		w.Close()
		wrote <- err
	}()
	go func() {
		f, err := outfile.Create(path)
		if err == nil {
			f.Abort()
		}
		created <- err
	}()
	select {
	case <-wrote:
		t.Fatal("a standard stream was written before the interrupt handling was in place")
	case <-created:
		t.Fatal("an output file was started before the interrupt handling was in place")
	case <-time.After(50 * time.Millisecond):
	}
	close(ready)
	for _, c := range []chan error{wrote, created} {
		if err := <-c; err != nil {
			t.Fatal(err)
		}
	}
	var got bytes.Buffer
	if _, err := got.ReadFrom(r); err != nil || got.String() != "progress\n" {
		t.Fatalf("the stream got %q (%v), want the line written", got.String(), err)
	}
}
