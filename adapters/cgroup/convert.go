package cgroup

import (
	"fmt"
	"strconv"
	"strings"
)

// The ranges of cgroup v1 cpu.shares and cgroup v2 cpu.weight.
const (
	MinShares = 2
	MaxShares = 262144
	MinWeight = 1
	MaxWeight = 10000
)

// CPUSharesToWeight is the cgroup v2 cpu.weight written on a pod, QoS or
// kubepods cgroup for cgroup v1 shares: upstream's kubelet's linear map of
// [2, 262144] onto [1, 10000] (getCPUWeight in its cgroup manager), so
// that the weights actorlet writes are the ones an upstream node writes
// (1024 shares: weight 39). The containers' own weights are the runtime's
// (runc since 1.3.2 converts with a quadratic formula). 0 stays 0 (unset).
func CPUSharesToWeight(shares uint64) uint64 {
	switch {
	case shares == 0:
		return 0
	case shares <= MinShares:
		return MinWeight
	case shares >= MaxShares:
		return MaxWeight
	}
	return 1 + ((shares-2)*9999)/262142
}

// CPUWeightToShares reads a cgroup v2 weight back as shares, upstream's
// inverse (cpuWeightToCPUShares): not exact, so a value read back is
// compared with SameCPUWeight. Out-of-range weights are clamped; 0 stays
// 0.
func CPUWeightToShares(w uint64) uint64 {
	switch {
	case w == 0:
		return 0
	case w <= MinWeight:
		return MinShares
	case w >= MaxWeight:
		return MaxShares
	}
	return ((w-1)*262142)/9999 + 2
}

// SameCPUWeight says whether two shares values are written as the same
// cgroup v2 weight: what a shares value read back from v2 can be compared
// with (upstream's CPUSharesEqualAfterV2RoundTrip).
func SameCPUWeight(written, readBack uint64) bool {
	return CPUWeightToShares(CPUSharesToWeight(written)) == readBack || written == readBack
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
