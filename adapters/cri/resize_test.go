package cri

import (
	"context"
	"errors"
	"testing"

	"google.golang.org/grpc/codes"
	"google.golang.org/grpc/status"
	runtimeapi "k8s.io/cri-api/pkg/apis/runtime/v1"

	"github.com/actorlet/actorlet/errdefs"
)

func (f *fakeServer) UpdateContainerResources(ctx context.Context, r *runtimeapi.UpdateContainerResourcesRequest) (*runtimeapi.UpdateContainerResourcesResponse, error) {
	return &runtimeapi.UpdateContainerResourcesResponse{}, f.rt.UpdateContainerResources(ctx, r.ContainerId, &runtimeapi.ContainerResources{Linux: r.Linux})
}

// UpdateContainerResources reaches the runtime, and its refusal is
// classified and named as every other call's.
func TestClientUpdateContainerResources(t *testing.T) {
	c, fs, rec := startFake(t, unixURL)
	ctx := context.Background()
	r := &runtimeapi.LinuxContainerResources{CpuShares: 204, CpuQuota: 40000, CpuPeriod: 100000, MemoryLimitInBytes: 256 << 20}
	if err := c.UpdateContainerResources(ctx, "abc", r); err != nil {
		t.Fatalf("UpdateContainerResources: %v", err)
	}
	if o := rec.last(); o.op != "update_container_resources" || o.err != nil {
		t.Errorf("observer saw %+v", o)
	}
	fs.rt.InjectError("UpdateContainerResources", status.Error(codes.Unknown, "failed to update resources: EBUSY"))
	err := c.UpdateContainerResources(ctx, "abc", r)
	if err == nil || !errors.Is(err, errdefs.ErrUnknown) || err.Error()[:len("update container resources abc: ")] != "update container resources abc: " {
		t.Fatalf("refused update = %v, want a named ErrUnknown", err)
	}
}
