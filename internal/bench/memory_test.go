package bench

import (
	"context"
	"os"
	"strings"
	"testing"
)

// TestReadMemorySplitsRSS reads this process: RSS is its anonymous and
// file parts (the kernel counts shmem apart: none here).
func TestReadMemorySplitsRSS(t *testing.T) {
	s := readMemory(context.Background(), &agent{pid: os.Getpid()})
	if s.RSSBytes == 0 || s.RSSAnonBytes == 0 || s.RSSFileBytes == 0 {
		t.Fatalf("got %+v", s)
	}
	if d := int64(s.RSSBytes) - int64(s.RSSAnonBytes+s.RSSFileBytes); d < -(1<<20) || d > 1<<20 {
		t.Errorf("RSS %d is not anon %d + file %d", s.RSSBytes, s.RSSAnonBytes, s.RSSFileBytes)
	}
	if s.HeapBytes != 0 {
		t.Errorf("heap %d read without /metrics", s.HeapBytes)
	}
}

// TestReadMemorySplitsTheGoRuntime reads the Go runtime's split from the
// go_memstats gauges: the heap's spans in use, its free spans not yet
// returned (idle less released), the stacks and the runtime's metadata.
func TestReadMemorySplitsTheGoRuntime(t *testing.T) {
	a := metricsServer(t, strings.Join([]string{
		"go_memstats_heap_alloc_bytes 1e+07",
		"go_memstats_heap_inuse_bytes 3e+07",
		"go_memstats_heap_idle_bytes 2.5e+07",
		"go_memstats_heap_released_bytes 2e+07",
		"go_memstats_stack_inuse_bytes 1.5e+06",
		"go_memstats_mspan_inuse_bytes 400000",
		"go_memstats_mcache_inuse_bytes 20000",
		"go_memstats_gc_sys_bytes 3e+06",
		"go_memstats_other_sys_bytes 1e+06",
		"go_memstats_buck_hash_sys_bytes 80000",
		"go_memstats_alloc_bytes_total 9e+09", // a counter, not part of the split
		"go_memstats_sys_bytes 7e+07",
	}, "\n")+"\n")
	a.pid = os.Getpid()
	s := readMemory(context.Background(), a)
	want := MemorySample{RSSBytes: s.RSSBytes, RSSAnonBytes: s.RSSAnonBytes, RSSFileBytes: s.RSSFileBytes,
		HeapBytes: 10e6, HeapInuseBytes: 30e6, HeapFreeBytes: 5e6, StackBytes: 1.5e6, RuntimeBytes: 4.5e6}
	if s != want {
		t.Fatalf("got  %+v\nwant %+v", s, want)
	}
}
