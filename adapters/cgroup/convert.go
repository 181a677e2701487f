package cgroup

import (
	"fmt"
	"math"
	"strconv"
	"strings"

	"github.com/opencontainers/cgroups"
)

// The ranges of cgroup v1 cpu.shares and cgroup v2 cpu.weight.
const (
	MinShares = 2
	MaxShares = 262144
	MinWeight = 1
	MaxWeight = 10000
)

// CPUSharesToWeight is the cgroup v2 cpu.weight written for cgroup v1
// shares: the library's conversion (opencontainers/cgroups
// ConvertCPUSharesToCgroupV2Value, the quadratic formula runc since 1.3.2
// and crun use, which maps the default 1024 shares to the default weight
// 100), so that a pod cgroup and the containers the runtime makes in it
// are weighed alike. 0 stays 0 (unset).
func CPUSharesToWeight(shares uint64) uint64 {
	return cgroups.ConvertCPUSharesToCgroupV2Value(shares)
}

// CPUWeightToShares is the inverse of CPUSharesToWeight for Read: the
// shares whose weight is w, the largest of them where several map to w
// (1024 for 100). Out-of-range weights are clamped; 0 stays 0.
func CPUWeightToShares(w uint64) uint64 {
	switch {
	case w == 0:
		return 0
	case w <= MinWeight:
		return MinShares
	case w >= MaxWeight:
		return MaxShares
	}
	// The library's weight is ceil(10^((l*l+125*l)/612 - 7/34)) with
	// l = log2(shares): solve for l at the top of w's interval.
	e := math.Log10(float64(w)) + 7.0/34.0
	l := (-125 + math.Sqrt(125*125+4*612*e)) / 2
	s := uint64(math.Floor(math.Pow(2, l) + 1e-6))
	s = min(max(s, MinShares), MaxShares)
	// Floating point may land one off either side: walk to the largest
	// shares of weight w.
	for s < MaxShares && CPUSharesToWeight(s+1) <= w {
		s++
	}
	for s > MinShares && CPUSharesToWeight(s) > w {
		s--
	}
	return s
}

// SameCPUWeight says whether two shares values are written as the same
// cgroup v2 weight: what a shares value read back from v2 can be compared
// with (upstream's CPUSharesEqualAfterV2RoundTrip).
func SameCPUWeight(a, b uint64) bool {
	return CPUSharesToWeight(a) == CPUSharesToWeight(b)
}

var hugePageUnits = []string{"KB", "MB", "GB", "TB", "PB"}

// HugePageSizeName is the name the hugetlb controller files use for a
// page size in bytes ("2MB" for 2097152, "1GB"), as upstream's
// HugePageUnitSizeFromByteSize.
func HugePageSizeName(size int64) (string, error) {
	if size < 1024 || size%1024 != 0 {
		return "", fmt.Errorf("huge page size %d bytes is not a whole number of KiB", size)
	}
	size /= 1024
	i := 0
	for size >= 1024 && size%1024 == 0 && i < len(hugePageUnits)-1 {
		size /= 1024
		i++
	}
	return strconv.FormatInt(size, 10) + hugePageUnits[i], nil
}

// hugePageSizeBytes is the inverse of HugePageSizeName.
func hugePageSizeBytes(name string) (int64, error) {
	for i := len(hugePageUnits) - 1; i >= 0; i-- {
		if num, ok := strings.CutSuffix(name, hugePageUnits[i]); ok {
			n, err := strconv.ParseInt(num, 10, 64)
			if err != nil || n <= 0 {
				return 0, fmt.Errorf("huge page size %q: not a size", name)
			}
			for range i + 1 {
				n *= 1024
			}
			return n, nil
		}
	}
	return 0, fmt.Errorf("huge page size %q: unknown unit", name)
}
