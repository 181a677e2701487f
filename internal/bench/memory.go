package bench

import (
	"context"
	"fmt"
	"os"
	"time"
)

// MemoryFigures split the agent's memory at four moments of a load: idle
// before the first pod, every pod Ready (the moment the last one was: the
// garbage of the starts is still there), steady with every pod running
// (see Steady), and after every pod was deleted (see AfterDelete). RSS is VmRSS; its anonymous part (RssAnon: heap,
// stacks, runtime metadata) is the agent's own memory, its file part
// (RssFile) the pages of the executable and libraries it has mapped: those
// are clean page cache, shared and reclaimable, and how many of them one
// touch maps depends on the kernel's page-cache folio sizes for the binary
// (a binary written by the Go linker can map ten times more per touch than
// the same bytes copied with cp). Heap is go_memstats_heap_alloc_bytes from
// /metrics: live objects and garbage not yet collected.
type MemoryFigures struct {
	Idle  MemorySample `json:"idle"`
	Ready MemorySample `json:"ready"`
	// Steady is read steadySettle after the last pod was Ready, every pod
	// still running: what a node holding these pods costs, past the
	// burst of their starts.
	Steady              MemorySample `json:"steady"`
	SteadySettleSeconds float64      `json:"steady_settle_seconds"`
	AfterDelete         MemorySample `json:"after_delete"`
	// AfterDeleteSettleSeconds is how long after the agent's
	// kubelet_running_pods reached 0 AfterDelete was read.
	AfterDeleteSettleSeconds float64 `json:"after_delete_settle_seconds"`
}

// MemorySample is one reading of the agent's memory.
type MemorySample struct {
	RSSBytes     uint64 `json:"rss_bytes"`
	RSSAnonBytes uint64 `json:"rss_anon_bytes"`
	RSSFileBytes uint64 `json:"rss_file_bytes"`
	HeapBytes    uint64 `json:"heap_bytes"`
	// The Go runtime's own split of what it holds from the OS (from the
	// go_memstats_* gauges of /metrics; 0 without them), most of
	// RssAnon: HeapInuseBytes is the heap's spans in use (live objects,
	// garbage not yet collected, and the free slots of spans that hold any
	// of them: a span is returned whole or not at all); HeapFreeBytes the
	// free spans kept and not yet returned to the OS; StackBytes the
	// goroutine stacks; RuntimeBytes the runtime's metadata (span and
	// cache structures, GC metadata, profiling buckets, the rest of
	// other_sys) as the runtime counts it: mapped, of which only the
	// touched pages are resident, so an upper bound of its part of
	// RssAnon.
	HeapInuseBytes uint64 `json:"heap_inuse_bytes,omitempty"`
	HeapFreeBytes  uint64 `json:"heap_free_bytes,omitempty"`
	StackBytes     uint64 `json:"stack_bytes,omitempty"`
	RuntimeBytes   uint64 `json:"runtime_bytes,omitempty"`
}

// runtimeMemstats are the go_memstats_ gauges (without the prefix) that
// sum to MemorySample.RuntimeBytes.
var runtimeMemstats = []string{"mspan_inuse_bytes", "mcache_inuse_bytes", "gc_sys_bytes", "other_sys_bytes", "buck_hash_sys_bytes"}

// afterDeleteSettle is how long the after-delete reading waits once the
// agent runs no pod: the same for every agent and build, long enough for
// a runtime that returns memory in the background to be seen doing it.
const afterDeleteSettle = 30 * time.Second

// steadySettle is how long after the last pod was Ready the steady
// reading waits, the pods kept running: the same as afterDeleteSettle, for
// the same reasons.
const steadySettle = afterDeleteSettle

// memorySteady waits until steadySettle after lastReady and reads the
// agent's memory.
func memorySteady(ctx context.Context, a *agent, lastReady time.Time) (MemorySample, float64) {
	select {
	case <-ctx.Done():
	case <-time.After(time.Until(lastReady.Add(steadySettle))):
	}
	return readMemory(ctx, a), steadySettle.Seconds()
}

// readMemory reads pid's RSS split and, where /metrics answers, its heap.
func readMemory(ctx context.Context, a *agent) MemorySample {
	var s MemorySample
	if b, err := os.ReadFile(fmt.Sprintf("/proc/%d/status", a.pid)); err == nil {
		m := parseStatus(b)
		s.RSSBytes, s.RSSAnonBytes, s.RSSFileBytes = m.rss, m.anon, m.file
	}
	if a.roURL != "" {
		if ms, err := a.scrapeMetrics(ctx); err == nil {
			s.HeapBytes = uint64(ms.heapAlloc)
			s.HeapInuseBytes = uint64(ms.memstats["heap_inuse_bytes"])
			s.HeapFreeBytes = uint64(max(0, ms.memstats["heap_idle_bytes"]-ms.memstats["heap_released_bytes"]))
			s.StackBytes = uint64(ms.memstats["stack_inuse_bytes"])
			for _, k := range runtimeMemstats {
				s.RuntimeBytes += uint64(ms.memstats[k])
			}
		}
	}
	return s
}

// memoryAfterDelete waits until the agent reports no running pod (at most
// timeout), then afterDeleteSettle, and reads its memory.
func memoryAfterDelete(ctx context.Context, a *agent, timeout time.Duration) (MemorySample, float64) {
	deadline := time.Now().Add(timeout)
	for time.Now().Before(deadline) && ctx.Err() == nil {
		if ms, err := a.scrapeMetrics(ctx); err == nil && ms.runningPods == 0 {
			break
		}
		time.Sleep(200 * time.Millisecond)
	}
	select {
	case <-ctx.Done():
	case <-time.After(afterDeleteSettle):
	}
	return readMemory(ctx, a), afterDeleteSettle.Seconds()
}
