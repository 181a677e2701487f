package sim

import (
	"context"
	"fmt"
	"runtime"
	"testing"

	"google.golang.org/protobuf/proto"
	runtimeapi "k8s.io/cri-api/pkg/apis/runtime/v1"
)

// BenchmarkKeptPerPod is what the runtime keeps per running pod (a sandbox
// and one container with the labels, annotations and mounts the agent
// gives, from requests decoded as gRPC decodes them): the heap and the
// goroutine stacks after a GC, in kept-B/pod. In the agent on sim:// this
// is what 10,000 pods cost in the sim. Keeping the config's fields shared
// and compact, and indexing only the pod UID label, took it from 6,857 to
// 3,367 B a pod (10,000x). The container runs `sleep infinity` (sleep), as
// the density benchmarks' pods do, or a shell script that waits (sh).
func BenchmarkKeptPerPod(b *testing.B) {
	for _, bc := range []struct {
		name string
		cmd  []string
	}{
		{"sleep", []string{"sleep", "infinity"}},
		{"sh", []string{"sh", "-c", "touch /tmp/ready; sleep infinity"}},
	} {
		b.Run(bc.name, func(b *testing.B) { benchKeptPerPod(b, bc.cmd) })
	}
}

func benchKeptPerPod(b *testing.B, cmd []string) {
	r := New(Config{IPBase: testIPBase})
	defer r.Close()
	ctx := context.Background()
	decoded := func(m proto.Message) proto.Message {
		buf, err := proto.Marshal(m)
		if err != nil {
			b.Fatal(err)
		}
		out := m.ProtoReflect().New().Interface()
		if err := proto.Unmarshal(buf, out); err != nil {
			b.Fatal(err)
		}
		return out
	}
	var before, after runtime.MemStats
	runtime.GC()
	runtime.ReadMemStats(&before)
	b.ResetTimer()
	for i := range b.N {
		sbReq, ctrReq := benchPod(i)
		sbReq = decoded(sbReq).(*runtimeapi.RunPodSandboxRequest)
		sb, err := r.RunPodSandbox(ctx, sbReq)
		if err != nil {
			b.Fatal(err)
		}
		ctrReq.PodSandboxId = sb.PodSandboxId
		ctrReq.Config.Command = cmd
		ctrReq = decoded(ctrReq).(*runtimeapi.CreateContainerRequest)
		ctr, err := r.CreateContainer(ctx, ctrReq)
		if err != nil {
			b.Fatal(err)
		}
		if _, err := r.StartContainer(ctx, &runtimeapi.StartContainerRequest{ContainerId: ctr.ContainerId}); err != nil {
			b.Fatal(err)
		}
	}
	b.StopTimer()
	runtime.GC()
	runtime.ReadMemStats(&after)
	kept := after.HeapAlloc + after.StackInuse - before.HeapAlloc - before.StackInuse
	b.ReportMetric(float64(kept)/float64(b.N), "kept-B/pod")
	runtime.KeepAlive(r)
}

// benchPod is pod i of the benchmarks as the agent asks for it: its
// sandbox and its one container (PodSandboxId left to fill), with the
// labels, annotations and mounts the agent gives.
func benchPod(i int) (*runtimeapi.RunPodSandboxRequest, *runtimeapi.CreateContainerRequest) {
	name, uid := fmt.Sprint("pod-", i), fmt.Sprintf("%08d-0000-4000-8000-000000000000", i)
	sbReq := &runtimeapi.RunPodSandboxRequest{Config: &runtimeapi.PodSandboxConfig{
		Metadata:     &runtimeapi.PodSandboxMetadata{Name: name, Namespace: "bench", Uid: uid},
		Hostname:     name,
		LogDirectory: "/var/log/pods/bench_" + name + "_" + uid,
		Labels:       map[string]string{"app": "bench", indexedLabel: uid, "io.kubernetes.pod.name": name, "io.kubernetes.pod.namespace": "bench"},
		Annotations:  map[string]string{"kubernetes.io/config.seen": fmt.Sprint("2026-01-01T00:00:00.", i, "Z"), "kubernetes.io/config.source": "api"},
		Linux: &runtimeapi.LinuxPodSandboxConfig{SecurityContext: &runtimeapi.LinuxSandboxSecurityContext{
			NamespaceOptions: &runtimeapi.NamespaceOption{Network: runtimeapi.NamespaceMode_POD, Pid: runtimeapi.NamespaceMode_CONTAINER, Ipc: runtimeapi.NamespaceMode_POD}}},
	}}
	ctrReq := &runtimeapi.CreateContainerRequest{Config: &runtimeapi.ContainerConfig{
		Metadata: &runtimeapi.ContainerMetadata{Name: "app"},
		Image:    &runtimeapi.ImageSpec{Image: "sim/preloaded/busybox:1", UserSpecifiedImage: "busybox:1"},
		Command:  []string{"sleep", "infinity"},
		Labels:   map[string]string{indexedLabel: uid, "io.kubernetes.pod.name": name, "io.kubernetes.pod.namespace": "bench", "io.kubernetes.container.name": "app"},
		Annotations: map[string]string{"io.kubernetes.container.hash": "8f2c1a7b", "io.kubernetes.container.restartCount": "0",
			"io.kubernetes.container.terminationMessagePath": "/dev/termination-log", "io.kubernetes.container.terminationMessagePolicy": "File",
			"io.kubernetes.pod.terminationGracePeriod": "30"},
		Mounts: []*runtimeapi.Mount{
			{ContainerPath: "/dev/termination-log", HostPath: "/var/lib/kubelet/pods/" + uid + "/containers/app/0"},
			{ContainerPath: "/etc/hosts", HostPath: "/var/lib/kubelet/pods/" + uid + "/etc-hosts"},
		},
		LogPath: "app/0.log",
		Linux:   &runtimeapi.LinuxContainerConfig{Resources: &runtimeapi.LinuxContainerResources{CpuShares: 2, MemoryLimitInBytes: 64 << 20}},
	}}
	return sbReq, ctrReq
}
