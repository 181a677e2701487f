package cri

import (
	"context"
	"errors"
	"testing"

	"google.golang.org/grpc"
	runtimeapi "k8s.io/cri-api/pkg/apis/runtime/v1"

	"github.com/actorlet/actorlet/errdefs"
	"github.com/actorlet/actorlet/runtimes/sim"
)

// serveSim serves a fresh simulated runtime and returns a connected client.
func serveSim(t testing.TB) (*Client, *recorder) {
	t.Helper()
	c, _, rec := serveSimRuntime(t)
	return c, rec
}

// serveSimRuntime is serveSim that also returns the runtime, to fill it
// in-process.
func serveSimRuntime(t testing.TB) (*Client, *sim.Runtime, *recorder) {
	t.Helper()
	r := sim.New(sim.Config{IPBase: "127.78.0.1", ImageSizes: map[string]string{"busybox": "5Mi"}})
	t.Cleanup(r.Close)
	c, rec := serve(t, unixURL, func(srv *grpc.Server) {
		runtimeapi.RegisterRuntimeServiceServer(srv, r)
		runtimeapi.RegisterImageServiceServer(srv, r)
	})
	return c, r, rec
}

func TestClientStats(t *testing.T) {
	c, rec := serveSim(t)
	ctx := context.Background()
	sb, err := c.RunPodSandbox(ctx, podConfig("stats"), "")
	if err != nil {
		t.Fatal(err)
	}
	img, err := c.PullImage(ctx, "busybox:1.36", nil)
	if err != nil {
		t.Fatal(err)
	}
	cid, err := c.CreateContainer(ctx, sb, &runtimeapi.ContainerConfig{
		Metadata: &runtimeapi.ContainerMetadata{Name: "app"},
		Image:    &runtimeapi.ImageSpec{Image: img},
		Command:  []string{"sh", "-c", "alloc 64Mi; sleep 3600"},
	}, podConfig("stats"))
	if err != nil {
		t.Fatal(err)
	}
	if err := c.StartContainer(ctx, cid); err != nil {
		t.Fatal(err)
	}

	tests := []struct {
		name, op string
		check    func(t *testing.T) error
	}{
		{"container stats", "container_stats", func(t *testing.T) error {
			st, err := c.ContainerStats(ctx, cid)
			if err == nil && st.GetMemory().GetWorkingSetBytes().GetValue() < 64<<20 {
				t.Errorf("working set %d, want at least 64Mi", st.GetMemory().GetWorkingSetBytes().GetValue())
			}
			return err
		}},
		{"list container stats", "list_container_stats", func(t *testing.T) error {
			sts, err := c.ListContainerStats(ctx, &runtimeapi.ContainerStatsFilter{PodSandboxId: sb})
			if err == nil && (len(sts) != 1 || sts[0].GetAttributes().GetId() != cid) {
				t.Errorf("stats %v", sts)
			}
			return err
		}},
		{"pod sandbox stats", "podsandbox_stats", func(t *testing.T) error {
			st, err := c.PodSandboxStats(ctx, sb)
			if err == nil && st.GetLinux().GetProcess().GetProcessCount().GetValue() != 2 {
				t.Errorf("processes %d", st.GetLinux().GetProcess().GetProcessCount().GetValue())
			}
			return err
		}},
		{"list pod sandbox stats", "list_podsandbox_stats", func(t *testing.T) error {
			sts, err := c.ListPodSandboxStats(ctx, nil)
			if err == nil && (len(sts) != 1 || sts[0].GetAttributes().GetMetadata().GetUid() != "stats-uid") {
				t.Errorf("stats %v", sts)
			}
			return err
		}},
		{"image fs info", "image_fs_info", func(t *testing.T) error {
			fs, err := c.ImageFsInfo(ctx)
			if err == nil && (len(fs.GetImageFilesystems()) != 1 || fs.GetImageFilesystems()[0].GetUsedBytes().GetValue() != 5<<20) {
				t.Errorf("image filesystems %v", fs.GetImageFilesystems())
			}
			return err
		}},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			if err := tt.check(t); err != nil {
				t.Fatal(err)
			}
			if o := rec.last(); o.op != tt.op || o.err != nil {
				t.Errorf("observer saw %+v, want %s", o, tt.op)
			}
		})
	}

	t.Run("unknown ids are NotFound", func(t *testing.T) {
		if _, err := c.ContainerStats(ctx, "nope"); !errors.Is(err, errdefs.ErrNotFound) {
			t.Errorf("ContainerStats(nope) = %v", err)
		}
		if _, err := c.PodSandboxStats(ctx, "nope"); !errors.Is(err, errdefs.ErrNotFound) {
			t.Errorf("PodSandboxStats(nope) = %v", err)
		}
	})
	t.Run("a runtime without sandbox stats is Unimplemented", func(t *testing.T) {
		old, _, _ := startFake(t, unixURL) // cri-api's fake serves no ListPodSandboxStats here
		if _, err := old.ListPodSandboxStats(ctx, nil); !errors.Is(err, errdefs.ErrUnimplemented) {
			t.Fatalf("ListPodSandboxStats = %v, want ErrUnimplemented", err)
		}
	})
}
