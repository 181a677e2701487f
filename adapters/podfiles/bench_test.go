package podfiles_test

import (
	"strconv"
	"testing"

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
	for i := 0; b.Loop(); i++ {
		uid := types.UID(strconv.Itoa(i))
		if _, err := f.TerminationLog(uid, "main", 0); err != nil {
			b.Fatal(err)
		}
		if _, err := f.Hosts(uid, hosts); err != nil {
			b.Fatal(err)
		}
	}
}
