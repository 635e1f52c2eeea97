package cli

import (
	"math"
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
// distributed (the coordinator) switches to distributedGCPercent
// instead, agent to agentGCPercent.
func TestGCPolicy(t *testing.T) {
	for cmd, want := range map[string]int{"solve": largeHeapGCPercent, "agent": agentGCPercent, "distributed": distributedGCPercent} {
		t.Run(cmd, func(t *testing.T) { gcPolicy(t, cmd, want) })
	}
}

func gcPolicy(t *testing.T, cmd string, want int) {
	defer resetGCPolicy(gcPercent())
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
	if l := debug.SetMemoryLimit(-1); l != math.MaxInt64 {
		t.Fatalf("memory limit %d on a small heap, want none", l)
	}
	collectUntil(t, largeHeap+1<<20, want)
	// An agent's memory limit follows its heap goal; other commands set none.
	deadline := time.Now().Add(10 * time.Second)
	for {
		var ms runtime.MemStats
		runtime.ReadMemStats(&ms)
		l := debug.SetMemoryLimit(-1)
		if cmd != "agent" {
			if l != math.MaxInt64 {
				t.Fatalf("%s: memory limit %d, want none", cmd, l)
			}
			break
		}
		if l != math.MaxInt64 && uint64(l) >= ms.NextGC && uint64(l) <= 2*ms.NextGC+ms.Sys {
			break
		}
		if time.Now().After(deadline) {
			t.Fatalf("agent: memory limit %d with a heap goal of %d and %d bytes from the system", l, ms.NextGC, ms.Sys)
		}
		runtime.GC()
		time.Sleep(10 * time.Millisecond)
	}
	// Past hugeHeap live (lowered for the test), the smaller percentage.
	defer func(h uint64) { hugeHeap = h }(hugeHeap)
	hugeHeap = 2 * largeHeap
	// (An agent's large percentage is at or below the huge one already:
	// the end of the watch then shows in its memory limit, which goes.)
	collectUntil(t, 2*largeHeap+1<<20, min(hugeHeapGCPercent, want), func() bool { return debug.SetMemoryLimit(-1) == math.MaxInt64 })
}

// collectUntil keeps n bytes live (written, so resident) and collects until
// the checks after the collections (checkHeap) set the percentage to want
// and every check in also holds.
func collectUntil(t *testing.T, n, want int, also ...func() bool) {
	t.Helper()
	live := make([]byte, n)
	for i := range live {
		live[i] = byte(i)
	}
	deadline := time.Now().Add(10 * time.Second)
	done := func() bool {
		for _, f := range also {
			if !f() {
				return false
			}
		}
		return gcPercent() == want
	}
	for !done() {
		if time.Now().After(deadline) {
			t.Fatalf("GC percent %d with %d bytes live (want %d), or the watch not ended (memory limit %d)", gcPercent(), len(live), want, debug.SetMemoryLimit(-1))
		}
		runtime.GC()
		time.Sleep(10 * time.Millisecond)
	}
	runtime.KeepAlive(live)
}

// replay keeps smallHeapGCPercent whatever its heap: its allocation is
// churn, freed step by step (watchesHeap).
func TestGCPolicyReplay(t *testing.T) {
	defer resetGCPolicy(gcPercent())
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

// resetGCPolicy undoes setGCPolicy in the test process and restores the
// percentage p.
func resetGCPolicy(p int) {
	policyOn.Store(false)
	largePercent.Store(largeHeapGCPercent)
	large.Store(false)
	reserved.Store(0)
	smallPercent.Store(smallHeapGCPercent)
	limitsMemory.Store(false)
	debug.SetMemoryLimit(math.MaxInt64)
	debug.SetGCPercent(p)
	// A watch the test armed ends at the next collection.
	runtime.GC()
}

// A heap reserved in huge pages raises the percentage to the one whose
// minimum heap is the reservation, at most reservedHeapGCPercent, only for
// a small reservation and under the policy; a collection whose goal passes
// the reservation restores smallHeapGCPercent.
func TestGCPolicyReserved(t *testing.T) {
	defer resetGCPolicy(gcPercent())
	debug.SetGCPercent(smallHeapGCPercent)
	heapReserved(8 << 20)
	if p := gcPercent(); p != smallHeapGCPercent {
		t.Fatalf("GC percent %d after a reservation without the policy, want %d", p, smallHeapGCPercent)
	}
	setGCPolicy("solve")
	heapReserved(maxRaisedReserve + 2<<20)
	if p := gcPercent(); p != smallHeapGCPercent {
		t.Fatalf("GC percent %d after a large reservation, want %d", p, smallHeapGCPercent)
	}
	heapReserved(64 << 20 / 8)
	if p := gcPercent(); p != 200 {
		t.Fatalf("GC percent %d after an 8 MB reservation, want 200", p)
	}
	heapReserved(maxRaisedReserve)
	if p := gcPercent(); p != reservedHeapGCPercent {
		t.Fatalf("GC percent %d after a %d-byte reservation, want %d", p, maxRaisedReserve, reservedHeapGCPercent)
	}
	// Live memory whose goal passes the reservation but not largeHeap.
	collectUntil(t, maxRaisedReserve/4, smallHeapGCPercent)
}

// memoryLimitFor is the runtime's heap goal, a tenth of it and the
// runtime's other memory; and an agent run with GOMEMLIMIT set keeps that
// limit.
func TestMemoryLimitFor(t *testing.T) {
	const mb = 1 << 20
	ms := runtime.MemStats{HeapAlloc: 100 * mb, NextGC: 120 * mb, Sys: 150 * mb, HeapSys: 140 * mb}
	if got, want := memoryLimitFor(&ms), int64(120*mb+12*mb+10*mb); got != want {
		t.Errorf("limit %d, want %d (the goal, a tenth, the other memory)", got, want)
	}

	defer resetGCPolicy(gcPercent())
	t.Setenv("GOMEMLIMIT", "1GiB")
	setGCPolicy("agent")
	if limitsMemory.Load() {
		t.Error("agent with GOMEMLIMIT set: the policy limits memory, want GOMEMLIMIT's limit kept")
	}
}
