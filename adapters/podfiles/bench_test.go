package podfiles_test

import (
	"strconv"
	"syscall"
	"testing"
	"time"

	"k8s.io/apimachinery/pkg/types"

	"github.com/actorlet/actorlet/adapters/podfiles"
)

// BenchmarkContainerStartFiles makes what the first container of a pod
// started now needs from the host: its termination-log file and the pod's
// /etc/hosts.
func BenchmarkContainerStartFiles(b *testing.B) {
	f := podfiles.New(b.TempDir(), "", quiet)
	hosts := []byte("127.0.0.1\tlocalhost\n10.88.0.5\tweb-0\n")
	b.ReportAllocs()
	cpu := processCPU(b)
	for i := 0; b.Loop(); i++ {
		uid := types.UID(strconv.Itoa(i))
		if _, err := f.TerminationLog(uid, "main", 0); err != nil {
			b.Fatal(err)
		}
		if _, err := f.Hosts(uid, hosts); err != nil {
			b.Fatal(err)
		}
	}
	// CPU, not only wall time: on a loaded machine the disk's wall time
	// is mostly waiting.
	b.ReportMetric(float64(processCPU(b)-cpu)/float64(b.N)/1e3, "cpu-us/op")
}

// processCPU is the CPU time (user and system) the process used so far.
func processCPU(b *testing.B) time.Duration {
	var ru syscall.Rusage
	if err := syscall.Getrusage(syscall.RUSAGE_SELF, &ru); err != nil {
		b.Fatal(err)
	}
	return time.Duration(ru.Utime.Nano() + ru.Stime.Nano())
}
