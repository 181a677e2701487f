package cri

import (
	"strings"
	"testing"
)

func TestNoCDI(t *testing.T) {
	for _, tc := range []struct {
		name, version string
		refused       bool
	}{
		{"containerd", "1.6.20~ds1", true}, // Debian's
		{"containerd", "v1.6.20", true},
		{"containerd", "1.5.9", true},
		{"containerd", "1.7.0", false},
		{"containerd", "v2.4.2", false},
		{"containerd", "2.4.2+unknown", false},
		{"containerd", "garbage", false}, // unknown: trusted, as other runtimes
		{"cri-o", "1.20.0", false},
		{"actorlet-sim", "0.1.0", false},
	} {
		why := NoCDI(tc.name, tc.version)
		if (why != "") != tc.refused {
			t.Errorf("NoCDI(%q, %q) = %q, want refused=%t", tc.name, tc.version, why, tc.refused)
		}
		if why != "" && !strings.Contains(why, tc.version) {
			t.Errorf("NoCDI(%q, %q) = %q: want the version named", tc.name, tc.version, why)
		}
	}
}
