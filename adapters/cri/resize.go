package cri

import (
	"context"
	"fmt"

	runtimeapi "k8s.io/cri-api/pkg/apis/runtime/v1"
)

// opUpdateContainerResources names UpdateContainerResources in the
// client's metrics and errors.
const opUpdateContainerResources = "update_container_resources"

// UpdateContainerResources changes a running container's CPU and memory in
// place (an in-place pod resize). The runtime keeps the fields left zero
// as they are (containerd); a refusal is classified as every other call's.
func (c *Client) UpdateContainerResources(ctx context.Context, id string, r *runtimeapi.LinuxContainerResources) error {
	ctx, done := c.call(ctx, opUpdateContainerResources, c.timeout)
	_, err := c.runtime().UpdateContainerResources(ctx, &runtimeapi.UpdateContainerResourcesRequest{ContainerId: id, Linux: r})
	if err = done(err); err != nil {
		return fmt.Errorf("update container resources %s: %w", id, err)
	}
	return nil
}
