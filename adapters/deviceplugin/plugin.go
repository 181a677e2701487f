package deviceplugin

import (
	"context"
	"errors"
	"fmt"
	"io"
	"log/slog"
	"math"
	"path/filepath"
	"slices"
	"strings"
	"time"

	"google.golang.org/grpc"
	"google.golang.org/grpc/credentials/insecure"
	pluginapi "k8s.io/kubelet/pkg/apis/deviceplugin/v1beta1"
)

const (
	// dialTimeout bounds Dial's first call to the plugin (upstream: 10 s).
	dialTimeout = 10 * time.Second
	// preStartTimeout bounds PreStartContainer, as upstream's
	// pluginapi.KubeletPreStartContainerRPCTimeoutInSecs.
	preStartTimeout = pluginapi.KubeletPreStartContainerRPCTimeoutInSecs * time.Second
)

// Plugin is the client of one registered device plugin. Its methods are
// those of the DevicesActor's Provider: ResourceName, Watch, Allocate,
// PreferredAllocation and PreStart. It is safe for concurrent use.
type Plugin struct {
	resource  string
	endpoint  string
	preStart  bool
	preferred bool
	log       *slog.Logger
	conn      *grpc.ClientConn
	client    pluginapi.DevicePluginClient
}

// Dial connects to the device plugin serving resourceName on endpoint (its
// socket, an absolute path) and checks the connection with
// GetDevicePluginOptions (10 s at most). preStart and preferred are the
// options the plugin registered with (PreStartRequired,
// GetPreferredAllocationAvailable): PreStart and PreferredAllocation call
// the plugin only when they are set. log may be nil (slog.Default()).
func Dial(ctx context.Context, resourceName, endpoint string, preStart, preferred bool, log *slog.Logger) (*Plugin, error) {
	if log == nil {
		log = slog.Default()
	}
	if !filepath.IsAbs(endpoint) {
		return nil, fmt.Errorf("device plugin %s: endpoint %q is not an absolute path", resourceName, endpoint)
	}
	conn, err := grpc.NewClient("unix://"+endpoint, grpc.WithTransportCredentials(insecure.NewCredentials()))
	if err != nil {
		return nil, fmt.Errorf("device plugin %s: dial %s: %w", resourceName, endpoint, err)
	}
	p := &Plugin{
		resource:  resourceName,
		endpoint:  endpoint,
		preStart:  preStart,
		preferred: preferred,
		log:       log.With("component", "deviceplugin", "resource", resourceName, "endpoint", endpoint),
		conn:      conn,
		client:    pluginapi.NewDevicePluginClient(conn),
	}
	cctx, cancel := context.WithTimeout(ctx, dialTimeout)
	defer cancel()
	opts, err := p.client.GetDevicePluginOptions(cctx, &pluginapi.Empty{})
	if err != nil {
		_ = conn.Close()
		return nil, fmt.Errorf("device plugin %s: GetDevicePluginOptions on %s: %w", resourceName, endpoint, err)
	}
	if opts.GetPreStartRequired() != preStart || opts.GetGetPreferredAllocationAvailable() != preferred {
		p.log.Warn("device plugin options differ from its registration; the registered ones are used",
			"registeredPreStart", preStart, "registeredPreferred", preferred,
			"preStart", opts.GetPreStartRequired(), "preferred", opts.GetGetPreferredAllocationAvailable())
	}
	return p, nil
}

// Close releases the connection to the plugin; calls in flight fail.
func (p *Plugin) Close() error {
	if err := p.conn.Close(); err != nil {
		return fmt.Errorf("device plugin %s: close: %w", p.resource, err)
	}
	return nil
}

// ResourceName is the extended resource the plugin serves.
func (p *Plugin) ResourceName() string { return p.resource }

// Watch follows the plugin's ListAndWatch stream: each response becomes one
// update with the whole device list (devices with no ID or an ID seen before
// in the same response are dropped, a health other than "Healthy" reads
// "Unhealthy") and why, a summary of what changed since the previous
// response ("" for the first). It returns nil when ctx ends and an error
// when the stream fails or the plugin ends it.
func (p *Plugin) Watch(ctx context.Context, update func(devices []*pluginapi.Device, why string)) error {
	stream, err := p.client.ListAndWatch(ctx, &pluginapi.Empty{})
	if err != nil {
		if ctx.Err() != nil {
			return nil
		}
		return fmt.Errorf("device plugin %s: ListAndWatch: %w", p.resource, err)
	}
	var last map[string]string // device ID -> health of the previous response
	for {
		resp, err := stream.Recv()
		if err != nil {
			if ctx.Err() != nil {
				return nil
			}
			if errors.Is(err, io.EOF) {
				return fmt.Errorf("device plugin %s: the plugin ended its ListAndWatch stream", p.resource)
			}
			return fmt.Errorf("device plugin %s: ListAndWatch: %w", p.resource, err)
		}
		devices, health, bad := cleanDevices(resp.GetDevices())
		if bad != "" {
			p.log.Warn("device plugin sent bad devices; they are left out", "why", bad)
		}
		why := ""
		if last != nil {
			why = healthChanges(last, health)
		}
		last = health
		p.log.Debug("device plugin list", "devices", len(devices), "why", why)
		update(devices, why)
	}
}

// cleanDevices drops devices with no ID or a repeated ID and makes every
// health other than Healthy read Unhealthy. It returns the devices, their
// health by ID, and what was wrong ("" when nothing).
func cleanDevices(in []*pluginapi.Device) ([]*pluginapi.Device, map[string]string, string) {
	out := make([]*pluginapi.Device, 0, len(in))
	health := make(map[string]string, len(in))
	var bad []string
	for _, d := range in {
		switch {
		case d == nil || d.GetID() == "":
			bad = append(bad, "a device with no ID")
			continue
		case health[d.GetID()] != "":
			bad = append(bad, fmt.Sprintf("device %q listed twice", d.GetID()))
			continue
		}
		h := d.GetHealth()
		if h != pluginapi.Healthy {
			h = pluginapi.Unhealthy
		}
		health[d.GetID()] = h
		out = append(out, &pluginapi.Device{ID: d.GetID(), Health: h, Topology: d.GetTopology()})
	}
	return out, health, strings.Join(bad, "; ")
}

// healthChanges summarises the difference between two device lists (health
// by ID), sorted by ID: "dev-2: Healthy -> Unhealthy; dev-4: added
// (Healthy); dev-1: removed". "" when nothing changed.
func healthChanges(before, after map[string]string) string {
	ids := make([]string, 0, len(before)+len(after))
	for id := range before {
		ids = append(ids, id)
	}
	for id := range after {
		if _, ok := before[id]; !ok {
			ids = append(ids, id)
		}
	}
	slices.Sort(ids)
	var parts []string
	for _, id := range ids {
		b, wasThere := before[id]
		a, isThere := after[id]
		switch {
		case !wasThere:
			parts = append(parts, fmt.Sprintf("%s: added (%s)", id, a))
		case !isThere:
			parts = append(parts, id+": removed")
		case a != b:
			parts = append(parts, fmt.Sprintf("%s: %s -> %s", id, b, a))
		}
	}
	return strings.Join(parts, "; ")
}

// Allocate asks the plugin what one container gets for the devices ids (an
// AllocateRequest with one ContainerRequest) and returns its answer.
func (p *Plugin) Allocate(ctx context.Context, ids []string) (*pluginapi.ContainerAllocateResponse, error) {
	if len(ids) == 0 {
		return nil, fmt.Errorf("device plugin %s: Allocate: no device IDs", p.resource)
	}
	resp, err := p.client.Allocate(ctx, &pluginapi.AllocateRequest{
		ContainerRequests: []*pluginapi.ContainerAllocateRequest{{DevicesIds: ids}},
	})
	if err != nil {
		return nil, fmt.Errorf("device plugin %s: Allocate %v: %w", p.resource, ids, err)
	}
	if n := len(resp.GetContainerResponses()); n != 1 || resp.GetContainerResponses()[0] == nil {
		return nil, fmt.Errorf("device plugin %s: Allocate %v: the plugin answered %d container responses for 1 request", p.resource, ids, n)
	}
	return resp.GetContainerResponses()[0], nil
}

// PreferredAllocation asks the plugin which size devices of available
// (mustInclude among them) it prefers. Without GetPreferredAllocation in the
// plugin's registration, or for size 0, it answers nil, nil (no
// preference). An answer that
// names a device not in available, names one twice or names more than size
// is an error.
func (p *Plugin) PreferredAllocation(ctx context.Context, available, mustInclude []string, size int) ([]string, error) {
	if !p.preferred || size <= 0 {
		return nil, nil
	}
	if size > math.MaxInt32 {
		return nil, fmt.Errorf("device plugin %s: GetPreferredAllocation: size %d is too large", p.resource, size)
	}
	resp, err := p.client.GetPreferredAllocation(ctx, &pluginapi.PreferredAllocationRequest{
		ContainerRequests: []*pluginapi.ContainerPreferredAllocationRequest{{
			AvailableDeviceIDs:   available,
			MustIncludeDeviceIDs: mustInclude,
			AllocationSize:       int32(size),
		}},
	})
	if err != nil {
		return nil, fmt.Errorf("device plugin %s: GetPreferredAllocation: %w", p.resource, err)
	}
	if n := len(resp.GetContainerResponses()); n != 1 || resp.GetContainerResponses()[0] == nil {
		return nil, fmt.Errorf("device plugin %s: GetPreferredAllocation: the plugin answered %d container responses for 1 request", p.resource, n)
	}
	ids := resp.GetContainerResponses()[0].GetDeviceIDs()
	if len(ids) > size {
		return nil, fmt.Errorf("device plugin %s: GetPreferredAllocation: the plugin preferred %d devices, %d were asked for", p.resource, len(ids), size)
	}
	seen := make(map[string]bool, len(ids))
	for _, id := range ids {
		if !slices.Contains(available, id) {
			return nil, fmt.Errorf("device plugin %s: GetPreferredAllocation: the plugin preferred %q, which is not available", p.resource, id)
		}
		if seen[id] {
			return nil, fmt.Errorf("device plugin %s: GetPreferredAllocation: the plugin preferred %q twice", p.resource, id)
		}
		seen[id] = true
	}
	return ids, nil
}

// PreStart calls the plugin's PreStartContainer for these devices (30 s at
// most, as upstream) when its registration asked for it; otherwise it does
// nothing.
func (p *Plugin) PreStart(ctx context.Context, ids []string) error {
	if !p.preStart {
		return nil
	}
	ctx, cancel := context.WithTimeout(ctx, preStartTimeout)
	defer cancel()
	if _, err := p.client.PreStartContainer(ctx, &pluginapi.PreStartContainerRequest{DevicesIds: ids}); err != nil {
		return fmt.Errorf("device plugin %s: PreStartContainer %v: %w", p.resource, ids, err)
	}
	return nil
}
