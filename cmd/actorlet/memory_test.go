package main

import (
	"strings"
	"testing"
)

func TestPodSettleReleasesAfterABigChangeHasSettled(t *testing.T) {
	tests := []struct {
		name string
		pods []int
		want []bool
	}{
		{name: "a fill released once the count held for two checks, then the drain",
			pods: []int{0, 400, 1000, 1000, 1000, 600, 100, 0, 0, 0, 0},
			want: []bool{false, false, false, false, true, false, false, false, false, true, false}},
		{name: "a small change keeps the memory",
			pods: []int{0, 30, 30, 30, 10, 10, 10},
			want: []bool{false, false, false, false, false, false, false}},
		{name: "100 pods started are worth a release",
			pods: []int{0, 100, 100, 100, 100},
			want: []bool{false, false, false, true, false}},
		{name: "a change of less than a quarter keeps the memory",
			pods: []int{0, 1000, 1000, 1000, 800, 800, 800, 1200, 1200, 1200},
			want: []bool{false, false, false, true, false, false, false, false, false, false}},
		{name: "a count that keeps moving is not interrupted",
			pods: []int{0, 100, 200, 300, 400, 500, 500, 500},
			want: []bool{false, false, false, false, false, false, false, true}},
		{name: "a second drain releases again",
			pods: []int{1000, 0, 0, 0, 800, 800, 800, 100, 100, 100},
			want: []bool{false, false, false, false, false, false, true, false, false, true}},
	}
	for _, tc := range tests {
		t.Run(tc.name, func(t *testing.T) {
			d := podSettle{minChange: memoryReleaseMinChange, holdChecks: memoryReleaseHoldChecks}
			for i, n := range tc.pods {
				if got := d.observe(n); got != tc.want[i] {
					t.Errorf("check %d (%d pods): release %v, want %v", i, n, got, tc.want[i])
				}
			}
		})
	}
}

func TestGCPaceTightensWhileThePodsHoldStill(t *testing.T) {
	tests := []struct {
		name string
		pods []int
		want []int // the GC percent in force after each check
	}{
		{name: "at rest from the start",
			pods: []int{0, 0, 0},
			want: []int{100, restingGCPercent, restingGCPercent}},
		{name: "a fill runs at the default pace, then rests",
			pods: []int{0, 0, 0, 300, 700, 1000, 1000, 1000, 1000},
			want: []int{100, restingGCPercent, restingGCPercent, 100, 100, 100, 100, restingGCPercent, restingGCPercent}},
		{name: "one pod more wakes it up",
			pods: []int{5, 5, 5, 6, 6, 6},
			want: []int{100, 100, restingGCPercent, 100, 100, restingGCPercent}},
	}
	for _, tc := range tests {
		t.Run(tc.name, func(t *testing.T) {
			percent, calls := 100, 0
			g := gcPace{holdChecks: memoryReleaseHoldChecks, set: func(p int) int {
				old := percent
				percent = p
				calls++
				return old
			}}
			for i, n := range tc.pods {
				g.observe(n)
				if percent != tc.want[i] {
					t.Errorf("check %d (%d pods): GC percent %d, want %d", i, n, percent, tc.want[i])
				}
			}
			changes := 0
			for i := range tc.want {
				if i == 0 && tc.want[i] != 100 || i > 0 && tc.want[i] != tc.want[i-1] {
					changes++
				}
			}
			if calls != changes {
				t.Errorf("%d calls to set the pace for %d changes: it is set only when it changes", calls, changes)
			}
		})
	}
}

func TestReadOnlyMappingOf(t *testing.T) {
	const exe = "/usr/bin/actorlet"
	tests := []struct {
		name   string
		line   string
		ok     bool
		lo, hi uintptr
	}{
		{name: "code", line: "00400000-01e2b000 r-xp 00000000 fe:00 9978301   /usr/bin/actorlet", ok: true, lo: 0x400000, hi: 0x1e2b000},
		{name: "read-only data", line: "01e2b000-03c78000 r--p 01a2b000 fe:00 9978301   /usr/bin/actorlet", ok: true, lo: 0x1e2b000, hi: 0x3c78000},
		{name: "writable data is kept", line: "03c79000-03d23000 rw-p 03878000 fe:00 9978301   /usr/bin/actorlet"},
		{name: "another file", line: "7f650fcaf000-7f650fe05000 r-xp 00026000 fe:00 326269 /usr/lib/x86_64-linux-gnu/libc.so.6"},
		{name: "anonymous", line: "9f3d7c00000-9f3d8c00000 rw-p 00000000 00:00 0"},
		{name: "a replaced binary", line: "00400000-01e2b000 r-xp 00000000 fe:00 9978301   /usr/bin/actorlet (deleted)"},
		{name: "a shared mapping", line: "00400000-01e2b000 r--s 00000000 fe:00 9978301   /usr/bin/actorlet"},
	}
	for _, tc := range tests {
		t.Run(tc.name, func(t *testing.T) {
			lo, hi, ok := readOnlyMappingOf(tc.line, exe)
			if ok != tc.ok || lo != tc.lo || hi != tc.hi {
				t.Errorf("got %#x-%#x %v, want %#x-%#x %v", lo, hi, ok, tc.lo, tc.hi, tc.ok)
			}
		})
	}
}

// TestDropExecutablePages unmaps this test binary's code and read-only
// data: the process goes on running (the pages come back from the file)
// and reads its data as before.
func TestDropExecutablePages(t *testing.T) {
	before := versionString()
	n, err := dropExecutablePages("/proc/self/smaps")
	if err != nil {
		t.Fatal(err)
	}
	if n <= 0 {
		t.Fatalf("unmapped %d bytes of the executable", n)
	}
	if after := versionString(); after != before || !strings.HasPrefix(after, "actorlet ") {
		t.Errorf("version %q after the drop, %q before", after, before)
	}
}
