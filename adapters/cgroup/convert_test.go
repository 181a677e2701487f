package cgroup

import "testing"

func TestCPUSharesWeight(t *testing.T) {
	for shares, weight := range map[uint64]uint64{0: 0, 2: 1, 1024: 100, 262144: 10000} {
		if w := CPUSharesToWeight(shares); w != weight {
			t.Errorf("CPUSharesToWeight(%d) = %d, want %d", shares, w, weight)
		}
	}
	if s := CPUWeightToShares(100); s != 1024 {
		t.Errorf("CPUWeightToShares(100) = %d, want 1024", s)
	}
	// Every weight the conversion gives comes back as shares of that
	// weight, the largest of them.
	prev := uint64(0)
	for s := uint64(MinShares); s <= MaxShares; s++ {
		w := CPUSharesToWeight(s)
		if w == prev {
			continue
		}
		prev = w
		back := CPUWeightToShares(w)
		if CPUSharesToWeight(back) != w || (back < MaxShares && CPUSharesToWeight(back+1) == w) {
			t.Fatalf("weight %d (from %d shares) reads back as %d shares (weight %d)", w, s, back, CPUSharesToWeight(back))
		}
		if !SameCPUWeight(back, s) {
			t.Fatalf("SameCPUWeight(%d, %d) false", back, s)
		}
	}
	if CPUWeightToShares(0) != 0 || CPUWeightToShares(20000) != MaxShares {
		t.Error("out of range weights are not clamped")
	}
}

func TestHugePageSizeName(t *testing.T) {
	for size, name := range map[int64]string{64 << 10: "64KB", 2 << 20: "2MB", 1 << 30: "1GB", 16 << 30: "16GB"} {
		got, err := HugePageSizeName(size)
		if err != nil || got != name {
			t.Errorf("HugePageSizeName(%d) = %q, %v; want %q", size, got, err, name)
		}
		if b, err := hugePageSizeBytes(name); err != nil || b != size {
			t.Errorf("hugePageSizeBytes(%q) = %d, %v", name, b, err)
		}
	}
	for _, size := range []int64{0, -2048, 1000, 1536} {
		if _, err := HugePageSizeName(size); err == nil {
			t.Errorf("HugePageSizeName(%d) is no error", size)
		}
	}
	if _, err := hugePageSizeBytes("2XB"); err == nil {
		t.Error("hugePageSizeBytes(2XB) is no error")
	}
}
