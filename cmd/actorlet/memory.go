package main

import (
	"bufio"
	"context"
	"log/slog"
	"os"
	"runtime"
	"runtime/debug"
	"strconv"
	"strings"
	"syscall"
	"time"
)

// Memory upkeep of the agent process. The Go runtime hands freed heap back
// to the OS only in the background and only past its next GC target, and
// an idle agent runs a GC at most every 2 minutes: after a node drained its
// pods, the heap their actors held stays resident for minutes. The
// executable's code and read-only data are mapped from the binary: every
// package's init touches its pages once at start (the kernel maps 64 KiB
// around each fault), so half of an idle agent's RSS is file pages it never
// reads again.

// memoryCheckPeriod is how often the upkeep looks at the pod count.
const memoryCheckPeriod = 5 * time.Second

// memoryReleaseMinChange is the smallest change in running pods, up or
// down from the count at the last release, that returns memory; it must
// also be a quarter of the larger of the two counts.
const memoryReleaseMinChange = 50

// memoryReleaseHoldChecks is how many checks in a row the pod count must
// hold still after a change before the memory is returned (10 s).
const memoryReleaseHoldChecks = 2

// podSettle decides when memory is handed back: once the running pods
// moved by at least minChange and by a quarter from the count at the last
// release (a node filled with pods, or drained), and then held still for
// holdChecks checks. Starting or stopping pods leaves garbage behind (the
// runtime's and the API server's answers, encoding buffers, the stacks of
// the calls): the heap grew to twice what those calls kept alive, and the
// Go runtime hands the free part back only slowly. A fill or a drain in
// progress is not interrupted by a full GC at every check, and the work
// that follows the last pod's change (its status write, its deletion in
// the API server) is done before the heap is measured and returned. A
// node whose pods come and go a few at a time never pays for a full GC.
type podSettle struct {
	minChange, holdChecks int
	settled, prev, held   int
}

// observe takes the running pods at one check and says whether to release.
func (d *podSettle) observe(n int) bool {
	if n == d.prev {
		d.held++
	} else {
		d.held = 0
	}
	d.prev = n
	change := n - d.settled
	if change < 0 {
		change = -change
	}
	if d.held < d.holdChecks || change < d.minChange || 4*change < max(n, d.settled) {
		return false
	}
	d.settled = n
	return true
}

// restingGCPercent is the GC's pace while the running pods hold still
// (see gcPace): the heap grows to 1.5 times what is live between two
// collections instead of 2 times.
const restingGCPercent = 50

// gcPace sets the GC's pace from what the pods do: the runtime's default
// (GOGC=100) while pods start or stop, when the agent allocates fast and a
// tighter heap would cost CPU at every start, and restingGCPercent once the
// count held still for holdChecks checks, when the agent allocates little
// (relists, status resyncs, probes) and a tighter heap costs almost no
// CPU. A node at rest with many pods then keeps a third less garbage. A
// GOGC set in the environment is the operator's: then the pace is left
// alone.
type gcPace struct {
	holdChecks int
	prev, held int
	resting    bool
	set        func(percent int) int
}

// observe takes the running pods at one check and sets the pace.
func (g *gcPace) observe(n int) {
	if n != g.prev {
		g.prev, g.held = n, 0
		if g.resting {
			g.set(100)
			g.resting = false
		}
		return
	}
	g.held++
	if !g.resting && g.held >= g.holdChecks {
		g.set(restingGCPercent)
		g.resting = true
	}
}

// runMemoryUpkeep releases memory once the agent has started (the garbage
// of start-up and the pages only init touched) and after each big fill or
// drain of pods has settled, and paces the GC (gcPace), until ctx is done.
func runMemoryUpkeep(ctx context.Context, pods func() int, log *slog.Logger) {
	releaseMemory(log, "started")
	d := podSettle{minChange: memoryReleaseMinChange, holdChecks: memoryReleaseHoldChecks}
	var pace *gcPace
	if os.Getenv("GOGC") == "" {
		pace = &gcPace{holdChecks: memoryReleaseHoldChecks, set: debug.SetGCPercent}
	}
	t := time.NewTicker(memoryCheckPeriod)
	defer t.Stop()
	for {
		select {
		case <-ctx.Done():
			return
		case <-t.C:
			n := pods()
			if pace != nil {
				pace.observe(n)
			}
			if d.observe(n) {
				releaseMemory(log, "pods changed", "running_pods", n)
			}
		}
	}
}

// releaseMemory runs a GC, returns the free heap to the OS, and unmaps the
// executable's read-only pages (they come back from the page cache on the
// next touch, so only the pages still in use return to the RSS).
func releaseMemory(log *slog.Logger, why string, args ...any) {
	debug.FreeOSMemory()
	n, err := dropExecutablePages("/proc/self/smaps")
	if err != nil {
		log.Debug("memory: read-only pages of the executable kept", "err", err)
	}
	var ms runtime.MemStats
	runtime.ReadMemStats(&ms)
	log.Info("memory returned to the OS", append([]any{"why", why, "heap_alloc_bytes", ms.HeapAlloc,
		"heap_retained_bytes", ms.HeapSys - ms.HeapReleased, "executable_bytes_unmapped", n}, args...)...)
}

// dropExecutablePages calls madvise(MADV_DONTNEED) on the mappings of the
// executable that are private, not writable and hold no page of their own
// (its code, read-only data and pclntab), and returns their size. Such a
// mapping holds exactly the file's bytes, so the kernel maps them again
// from the page cache at the next touch. A mapping with anonymous pages
// differs from the file: the data segment, and the RELRO page the dynamic
// loader relocated and then made read-only (its GOT: dropping it would
// bring back unrelocated pointers); those are left alone. smaps is
// /proc/self/smaps.
func dropExecutablePages(smaps string) (int, error) {
	exe, err := os.Executable()
	if err != nil {
		return 0, err
	}
	f, err := os.Open(smaps)
	if err != nil {
		return 0, err
	}
	defer func() { _ = f.Close() }()
	total := 0
	var start, end uintptr
	candidate := false
	sc := bufio.NewScanner(f)
	for sc.Scan() {
		line := sc.Text()
		if v, ok := strings.CutPrefix(line, "Anonymous:"); ok {
			if candidate && strings.TrimSpace(v) == "0 kB" {
				if _, _, e := syscall.Syscall(syscall.SYS_MADVISE, start, end-start, syscall.MADV_DONTNEED); e != 0 {
					return total, e
				}
				total += int(end - start)
			}
			candidate = false
			continue
		}
		if s, e, ok := readOnlyMappingOf(line, exe); ok {
			start, end, candidate = s, e, true
		} else if isMappingHeader(line) {
			candidate = false
		}
	}
	return total, sc.Err()
}

// isMappingHeader says whether a line of smaps starts a mapping (its first
// field is an address range, where the other lines start with a key).
func isMappingHeader(line string) bool {
	first, _, _ := strings.Cut(line, " ")
	return strings.Contains(first, "-") && !strings.HasSuffix(first, ":")
}

// readOnlyMappingOf parses one line of /proc/PID/maps ("start-end perms
// offset dev inode path") and says whether it privately maps path without
// write permission. A binary replaced on disk ("path (deleted)") is left
// alone.
func readOnlyMappingOf(line, path string) (start, end uintptr, ok bool) {
	f := strings.Fields(line)
	if len(f) != 6 || f[5] != path || len(f[1]) < 4 || f[1][1] == 'w' || f[1][3] != 'p' {
		return 0, 0, false
	}
	lo, hi, found := strings.Cut(f[0], "-")
	if !found {
		return 0, 0, false
	}
	s, err1 := strconv.ParseUint(lo, 16, 64)
	e, err2 := strconv.ParseUint(hi, 16, 64)
	if err1 != nil || err2 != nil || e <= s {
		return 0, 0, false
	}
	return uintptr(s), uintptr(e), true
}
