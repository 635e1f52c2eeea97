package cli

import (
	"runtime"
	"runtime/debug"
	"testing"
	"time"
)

// gcPercent returns the collector's current percentage.
func gcPercent() int {
	p := debug.SetGCPercent(100)
	debug.SetGCPercent(p)
	return p
}

// TestGCPolicy checks that the process starts at smallHeapGCPercent and
// switches to largeHeapGCPercent after a collection that finds more than
// largeHeap bytes live.
// distributed (the coordinator) switches to coordinatorGCPercent instead.
func TestGCPolicy(t *testing.T) {
	for cmd, want := range map[string]int{"solve": largeHeapGCPercent, "agent": largeHeapGCPercent, "distributed": coordinatorGCPercent} {
		t.Run(cmd, func(t *testing.T) { gcPolicy(t, cmd, want) })
	}
}

func gcPolicy(t *testing.T, cmd string, want int) {
	defer debug.SetGCPercent(gcPercent())
	setGCPolicy(cmd)
	if p := gcPercent(); p != smallHeapGCPercent {
		t.Fatalf("GC percent %d at the start, want %d", p, smallHeapGCPercent)
	}
	// A small live heap keeps the percentage.
	small := make([]byte, largeHeap/4)
	for range 3 {
		runtime.GC()
		time.Sleep(10 * time.Millisecond)
	}
	if p := gcPercent(); p != smallHeapGCPercent {
		t.Fatalf("GC percent %d with %d bytes live, want %d", p, len(small), smallHeapGCPercent)
	}
	runtime.KeepAlive(small)
	live := make([]byte, largeHeap+1<<20)
	for i := range live {
		live[i] = byte(i)
	}
	deadline := time.Now().Add(10 * time.Second)
	for gcPercent() != want {
		if time.Now().After(deadline) {
			t.Fatalf("GC percent still %d with %d bytes live, want %d", gcPercent(), len(live), want)
		}
		runtime.GC()
		time.Sleep(10 * time.Millisecond)
	}
	runtime.KeepAlive(live)
}

// replay keeps smallHeapGCPercent whatever its heap: its allocation is
// churn, freed step by step (watchesHeap).
func TestGCPolicyReplay(t *testing.T) {
	defer debug.SetGCPercent(gcPercent())
	debug.SetGCPercent(20)
	setGCPolicy("replay")
	if p := gcPercent(); p != smallHeapGCPercent {
		t.Fatalf("GC percent %d for replay, want %d", p, smallHeapGCPercent)
	}
	for cmd, want := range map[string]bool{"replay": false, "solve": true, "bench": true, "": true, "distributed": true} {
		if got := watchesHeap(cmd); got != want {
			t.Errorf("watchesHeap(%q) = %v, want %v", cmd, got, want)
		}
	}
}
