package cgroup

import "testing"

// TestCPUSharesWeight: upstream's linear map and its inverse, values
// computed by hand from its formulas.
func TestCPUSharesWeight(t *testing.T) {
	for shares, weight := range map[uint64]uint64{0: 0, 2: 1, 512: 20, 1024: 39, 2048: 79, 262144: 10000, 300000: 10000} {
		if w := CPUSharesToWeight(shares); w != weight {
			t.Errorf("CPUSharesToWeight(%d) = %d, want %d", shares, w, weight)
		}
	}
	for weight, shares := range map[uint64]uint64{0: 0, 1: 2, 39: 998, 100: 2597, 10000: 262144, 20000: 262144} {
		if s := CPUWeightToShares(weight); s != shares {
			t.Errorf("CPUWeightToShares(%d) = %d, want %d", weight, s, shares)
		}
	}
	// What is read back compares equal to what was written.
	for s := uint64(MinShares); s <= MaxShares; s += 7 {
		if back := CPUWeightToShares(CPUSharesToWeight(s)); !SameCPUWeight(s, back) {
			t.Fatalf("%d shares read back as %d: not the same weight", s, back)
		}
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
