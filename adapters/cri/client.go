// Package cri is actorlet's CRI v1 client: the outbound adapter through which
// actors talk to any container runtime (containerd, CRI-O, the simulated
// runtime) over gRPC.
//
// Every method takes a context first, bounds the call by the per-call timeout
// given to Dial (kubelet's --runtime-request-timeout), and returns errors
// wrapped with the operation and the object id and classified once (see
// errors.go), so callers branch with errors.Is(err, errdefs.ErrNotFound) and
// friends and never look at gRPC codes.
package cri

import (
	"context"
	"errors"
	"fmt"
	"math"
	"path/filepath"
	"runtime"
	"strings"
	"sync/atomic"
	"time"

	"google.golang.org/grpc"
	"google.golang.org/grpc/credentials/insecure"
	runtimeapi "k8s.io/cri-api/pkg/apis/runtime/v1"

	"github.com/actorlet/actorlet/errdefs"
)

const (
	// DefaultTimeout is the per-call timeout used when Dial gets none
	// (upstream kubelet's RuntimeRequestTimeout).
	DefaultTimeout = 2 * time.Minute
	// MaxMsgSize bounds gRPC messages both ways (as upstream's remote runtime).
	MaxMsgSize = 16 << 20
)

// Operation names passed to an Observer; the same as the "operation_type"
// label of upstream's kubelet_runtime_operations_total.
const (
	opVersion          = "version"
	opStatus           = "status"
	opRuntimeConfig    = "runtime_config"
	opRunPodSandbox    = "run_podsandbox"
	opStopPodSandbox   = "stop_podsandbox"
	opRemovePodSandbox = "remove_podsandbox"
	opPodSandboxStatus = "podsandbox_status"
	opListPodSandbox   = "list_podsandbox"
	opCreateContainer  = "create_container"
	opStartContainer   = "start_container"
	opStopContainer    = "stop_container"
	opRemoveContainer  = "remove_container"
	opListContainers   = "list_containers"
	opContainerStatus  = "container_status"
	opExecSync         = "exec_sync"
	opImageStatus      = "image_status"
	opPullImage        = "pull_image"
	opListImages       = "list_images"
	opRemoveImage      = "remove_image"

	opContainerStats      = "container_stats"
	opListContainerStats  = "list_container_stats"
	opPodSandboxStats     = "podsandbox_stats"
	opListPodSandboxStats = "list_podsandbox_stats"
	opImageFsInfo         = "image_fs_info"
)

// Observer receives one call per CRI operation: its name (see above), how long
// it took and its classified error (nil on success). It must be cheap and
// safe for concurrent use.
type Observer func(operation string, d time.Duration, err error)

// Option configures Dial.
type Option func(*options)

type options struct {
	observer    Observer
	dialOptions []grpc.DialOption
}

// WithObserver installs a hook called after every operation (metrics).
func WithObserver(fn func(operation string, d time.Duration, err error)) Option {
	return func(o *options) { o.observer = fn }
}

// WithDialOptions appends gRPC dial options (tests, interceptors).
func WithDialOptions(opts ...grpc.DialOption) Option {
	return func(o *options) { o.dialOptions = append(o.dialOptions, opts...) }
}

// Client is a CRI v1 runtime and image service client. It is safe for
// concurrent use.
type Client struct {
	conns          []*grpc.ClientConn
	runtimeClients []runtimeapi.RuntimeServiceClient
	imageClients   []runtimeapi.ImageServiceClient
	next           atomic.Uint32
	timeout        time.Duration
	observer       Observer
}

// maxConns bounds the connections to the runtime. One HTTP/2 connection
// carries every call through one writer goroutine and one lock
// (controlBuffer), both ends; at 10,000 pods starting it was 6 % of the
// agent's lock waiting on 2 cores (docs/BENCHMARKS.md "What serializes").
// Calls go to the connections in turn, one per core up to maxConns, so a
// one-core agent keeps one.
const maxConns = 4

func connsFor(procs int) int { return min(max(procs, 1), maxConns) }

// pick returns the index of the connection for the next call.
func (c *Client) pick() int {
	if len(c.conns) == 1 {
		return 0
	}
	return int(c.next.Add(1) % uint32(len(c.conns)))
}

func (c *Client) runtime() runtimeapi.RuntimeServiceClient { return c.runtimeClients[c.pick()] }

// conn is the connection for the next call made without a generated
// client (the lean listing).
func (c *Client) conn() *grpc.ClientConn { return c.conns[c.pick()] }

func (c *Client) images() runtimeapi.ImageServiceClient { return c.imageClients[c.pick()] }

// Dial connects to a CRI v1 runtime at endpoint ("unix:///run/containerd/
// containerd.sock" or a bare absolute socket path) and checks, within ctx and
// the per-call timeout, that it answers runtime.v1 Version. timeout is the
// per-call timeout (DefaultTimeout if <= 0).
func Dial(ctx context.Context, endpoint string, timeout time.Duration, opts ...Option) (*Client, error) {
	path, err := socketPath(endpoint)
	if err != nil {
		return nil, err
	}
	if timeout <= 0 {
		timeout = DefaultTimeout
	}
	var o options
	for _, opt := range opts {
		opt(&o)
	}
	dopts := append([]grpc.DialOption{
		grpc.WithTransportCredentials(insecure.NewCredentials()),
		grpc.WithDefaultCallOptions(grpc.MaxCallRecvMsgSize(MaxMsgSize), grpc.MaxCallSendMsgSize(MaxMsgSize)),
	}, o.dialOptions...)
	c := &Client{timeout: timeout, observer: o.observer}
	for range connsFor(runtime.GOMAXPROCS(0)) {
		conn, err := grpc.NewClient("unix://"+path, dopts...)
		if err != nil {
			_ = c.Close()
			return nil, errdefs.Wrap(errdefs.ErrInvalidArgument, fmt.Errorf("dial %s: %w", endpoint, err))
		}
		c.conns = append(c.conns, conn)
		c.runtimeClients = append(c.runtimeClients, runtimeapi.NewRuntimeServiceClient(conn))
		c.imageClients = append(c.imageClients, runtimeapi.NewImageServiceClient(conn))
	}
	if _, err := c.Version(ctx); err != nil {
		_ = c.Close()
		return nil, fmt.Errorf("dial %s: %w", endpoint, err)
	}
	return c, nil
}

// socketPath accepts "unix:///abs/path", "unix:/abs/path" and "/abs/path".
func socketPath(endpoint string) (string, error) {
	p := endpoint
	switch {
	case strings.HasPrefix(p, "unix://"):
		p = strings.TrimPrefix(p, "unix://")
	case strings.HasPrefix(p, "unix:"):
		p = strings.TrimPrefix(p, "unix:")
	case strings.Contains(p, "://"):
		return "", errdefs.Wrap(errdefs.ErrInvalidArgument,
			fmt.Errorf("endpoint %q: only unix sockets are supported", endpoint))
	}
	if p == "" || !filepath.IsAbs(p) {
		return "", errdefs.Wrap(errdefs.ErrInvalidArgument,
			fmt.Errorf("endpoint %q: want unix:///absolute/path or an absolute path", endpoint))
	}
	return filepath.Clean(p), nil
}

// Close closes the connections.
func (c *Client) Close() error {
	var errs []error
	for _, conn := range c.conns {
		errs = append(errs, conn.Close())
	}
	return errors.Join(errs...)
}

// call bounds ctx by d (none if d <= 0) and returns a done func that records
// the operation and returns the classified error.
func (c *Client) call(ctx context.Context, op string, d time.Duration) (context.Context, func(error) error) {
	cancel := context.CancelFunc(func() {})
	if d > 0 {
		ctx, cancel = context.WithTimeout(ctx, d)
	}
	start := time.Now()
	return ctx, func(err error) error {
		cancel()
		err = classify(op, err)
		if c.observer != nil {
			c.observer(op, time.Since(start), err)
		}
		return err
	}
}

func invalid(format string, a ...any) error {
	return errdefs.Wrap(errdefs.ErrInvalidArgument, fmt.Errorf(format, a...))
}

func unknown(format string, a ...any) error {
	return errdefs.Wrap(errdefs.ErrUnknown, fmt.Errorf(format, a...))
}

// Version returns the runtime's name and versions.
func (c *Client) Version(ctx context.Context) (*runtimeapi.VersionResponse, error) {
	ctx, done := c.call(ctx, opVersion, c.timeout)
	resp, err := c.runtime().Version(ctx, &runtimeapi.VersionRequest{Version: "0.1.0"})
	if err == nil && resp.GetRuntimeApiVersion() == "" {
		err = unknown("empty runtime API version")
	}
	if err = done(err); err != nil {
		return nil, fmt.Errorf("version: %w", err)
	}
	return resp, nil
}

// Status returns the runtime's conditions (RuntimeReady, NetworkReady).
func (c *Client) Status(ctx context.Context) (*runtimeapi.RuntimeStatus, error) {
	ctx, done := c.call(ctx, opStatus, c.timeout)
	resp, err := c.runtime().Status(ctx, &runtimeapi.StatusRequest{})
	if err == nil && resp.GetStatus() == nil {
		err = unknown("empty status")
	}
	if err = done(err); err != nil {
		return nil, fmt.Errorf("runtime status: %w", err)
	}
	return resp.GetStatus(), nil
}

// RuntimeConfig returns the runtime's Linux configuration (its cgroup
// driver), or nil and no error when the runtime does not serve the call
// (containerd 1.6 answers Unimplemented): the caller then trusts its own
// flag, as upstream.
func (c *Client) RuntimeConfig(ctx context.Context) (*runtimeapi.LinuxRuntimeConfiguration, error) {
	ctx, done := c.call(ctx, opRuntimeConfig, c.timeout)
	resp, err := c.runtime().RuntimeConfig(ctx, &runtimeapi.RuntimeConfigRequest{})
	if err = done(err); err != nil {
		if errors.Is(err, errdefs.ErrUnimplemented) {
			return nil, nil
		}
		return nil, fmt.Errorf("runtime config: %w", err)
	}
	return resp.GetLinux(), nil
}

// RunPodSandbox creates and starts a pod sandbox and returns its id.
func (c *Client) RunPodSandbox(ctx context.Context, cfg *runtimeapi.PodSandboxConfig, runtimeHandler string) (string, error) {
	name := sandboxName(cfg)
	ctx, done := c.call(ctx, opRunPodSandbox, c.timeout)
	resp, err := c.runtime().RunPodSandbox(ctx, &runtimeapi.RunPodSandboxRequest{Config: cfg, RuntimeHandler: runtimeHandler})
	if err == nil && resp.GetPodSandboxId() == "" {
		err = unknown("empty pod sandbox id")
	}
	if err = done(err); err != nil {
		return "", fmt.Errorf("run pod sandbox %s: %w", name, err)
	}
	return resp.GetPodSandboxId(), nil
}

// StopPodSandbox stops all of a sandbox's processes and reclaims its network.
func (c *Client) StopPodSandbox(ctx context.Context, id string) error {
	ctx, done := c.call(ctx, opStopPodSandbox, c.timeout)
	_, err := c.runtime().StopPodSandbox(ctx, &runtimeapi.StopPodSandboxRequest{PodSandboxId: id})
	if err = done(err); err != nil {
		return fmt.Errorf("stop pod sandbox %s: %w", id, err)
	}
	return nil
}

// RemovePodSandbox removes a sandbox and its containers.
func (c *Client) RemovePodSandbox(ctx context.Context, id string) error {
	ctx, done := c.call(ctx, opRemovePodSandbox, c.timeout)
	_, err := c.runtime().RemovePodSandbox(ctx, &runtimeapi.RemovePodSandboxRequest{PodSandboxId: id})
	if err = done(err); err != nil {
		return fmt.Errorf("remove pod sandbox %s: %w", id, err)
	}
	return nil
}

// PodSandboxStatus returns a sandbox's status.
func (c *Client) PodSandboxStatus(ctx context.Context, id string) (*runtimeapi.PodSandboxStatus, error) {
	ctx, done := c.call(ctx, opPodSandboxStatus, c.timeout)
	resp, err := c.runtime().PodSandboxStatus(ctx, &runtimeapi.PodSandboxStatusRequest{PodSandboxId: id})
	if err == nil && resp.GetStatus() == nil {
		err = unknown("empty status")
	}
	if err = done(err); err != nil {
		return nil, fmt.Errorf("pod sandbox status %s: %w", id, err)
	}
	return resp.GetStatus(), nil
}

// ListPodSandbox lists sandboxes matching filter (nil: all).
func (c *Client) ListPodSandbox(ctx context.Context, filter *runtimeapi.PodSandboxFilter) ([]*runtimeapi.PodSandbox, error) {
	ctx, done := c.call(ctx, opListPodSandbox, c.timeout)
	resp, err := c.runtime().ListPodSandbox(ctx, &runtimeapi.ListPodSandboxRequest{Filter: filter})
	if err = done(err); err != nil {
		return nil, fmt.Errorf("list pod sandboxes: %w", err)
	}
	return resp.GetItems(), nil
}

// CreateContainer creates a container in sandbox podID and returns its id.
// A name already reserved by another container is errdefs.ErrAlreadyExists.
func (c *Client) CreateContainer(ctx context.Context, podID string, cfg *runtimeapi.ContainerConfig, sandbox *runtimeapi.PodSandboxConfig) (string, error) {
	name := cfg.GetMetadata().GetName()
	ctx, done := c.call(ctx, opCreateContainer, c.timeout)
	resp, err := c.runtime().CreateContainer(ctx, &runtimeapi.CreateContainerRequest{
		PodSandboxId: podID, Config: cfg, SandboxConfig: sandbox,
	})
	if err == nil && resp.GetContainerId() == "" {
		err = unknown("empty container id")
	}
	if err = done(err); err != nil {
		return "", fmt.Errorf("create container %s in pod sandbox %s: %w", name, podID, err)
	}
	return resp.GetContainerId(), nil
}

// StartContainer starts a created container.
func (c *Client) StartContainer(ctx context.Context, id string) error {
	ctx, done := c.call(ctx, opStartContainer, c.timeout)
	_, err := c.runtime().StartContainer(ctx, &runtimeapi.StartContainerRequest{ContainerId: id})
	if err = done(err); err != nil {
		return fmt.Errorf("start container %s: %w", id, err)
	}
	return nil
}

// StopContainer stops a container, killing it after timeout seconds; the
// call's deadline is the per-call timeout plus that grace period.
func (c *Client) StopContainer(ctx context.Context, id string, timeout int64) error {
	d := c.timeout
	if timeout > 0 {
		d += time.Duration(min(timeout, math.MaxInt64/int64(time.Second)/2)) * time.Second
	}
	ctx, done := c.call(ctx, opStopContainer, d)
	_, err := c.runtime().StopContainer(ctx, &runtimeapi.StopContainerRequest{ContainerId: id, Timeout: timeout})
	if err = done(err); err != nil {
		return fmt.Errorf("stop container %s: %w", id, err)
	}
	return nil
}

// RemoveContainer removes a container (stopping it first if needed).
func (c *Client) RemoveContainer(ctx context.Context, id string) error {
	ctx, done := c.call(ctx, opRemoveContainer, c.timeout)
	_, err := c.runtime().RemoveContainer(ctx, &runtimeapi.RemoveContainerRequest{ContainerId: id})
	if err = done(err); err != nil {
		return fmt.Errorf("remove container %s: %w", id, err)
	}
	return nil
}

// ListContainers lists containers matching filter (nil: all).
func (c *Client) ListContainers(ctx context.Context, filter *runtimeapi.ContainerFilter) ([]*runtimeapi.Container, error) {
	ctx, done := c.call(ctx, opListContainers, c.timeout)
	resp, err := c.runtime().ListContainers(ctx, &runtimeapi.ListContainersRequest{Filter: filter})
	if err = done(err); err != nil {
		return nil, fmt.Errorf("list containers: %w", err)
	}
	return resp.GetContainers(), nil
}

// ContainerStatus returns a container's status.
func (c *Client) ContainerStatus(ctx context.Context, id string) (*runtimeapi.ContainerStatus, error) {
	ctx, done := c.call(ctx, opContainerStatus, c.timeout)
	resp, err := c.runtime().ContainerStatus(ctx, &runtimeapi.ContainerStatusRequest{ContainerId: id})
	if err == nil && resp.GetStatus() == nil {
		err = unknown("empty status")
	}
	if err = done(err); err != nil {
		return nil, fmt.Errorf("container status %s: %w", id, err)
	}
	return resp.GetStatus(), nil
}

// ExecSync runs cmd in a container and returns its output and exit code; a
// non-zero exit code is not an error. timeout bounds the command (rounded up
// to whole seconds; 0: no limit) and extends the call's deadline; with 0 the
// call is bounded by ctx only, as upstream.
func (c *Client) ExecSync(ctx context.Context, id string, cmd []string, timeout time.Duration) (stdout, stderr []byte, exitCode int32, err error) {
	if len(cmd) == 0 {
		return nil, nil, 0, fmt.Errorf("exec in container %s: %w", id, invalid("empty command"))
	}
	var d time.Duration
	var secs int64
	if timeout > 0 {
		secs = int64((timeout + time.Second - 1) / time.Second)
		d = c.timeout + timeout
	}
	ctx, done := c.call(ctx, opExecSync, d)
	resp, err := c.runtime().ExecSync(ctx, &runtimeapi.ExecSyncRequest{ContainerId: id, Cmd: cmd, Timeout: secs})
	if err = done(err); err != nil {
		return nil, nil, 0, fmt.Errorf("exec %q in container %s: %w", cmd[0], id, err)
	}
	return resp.GetStdout(), resp.GetStderr(), resp.GetExitCode(), nil
}

// ImageStatus returns the image ref resolves to, or nil, nil when the
// runtime does not have it.
func (c *Client) ImageStatus(ctx context.Context, ref string) (*runtimeapi.Image, error) {
	ctx, done := c.call(ctx, opImageStatus, c.timeout)
	resp, err := c.images().ImageStatus(ctx, &runtimeapi.ImageStatusRequest{Image: &runtimeapi.ImageSpec{Image: ref}})
	if err = done(err); err != nil {
		if errors.Is(err, errdefs.ErrNotFound) {
			return nil, nil
		}
		return nil, fmt.Errorf("image status %s: %w", ref, err)
	}
	return resp.GetImage(), nil
}

// PullImage pulls ref and returns the image reference the runtime stored
// (usually the digest). sandbox may be nil. Like upstream, a pull is bounded
// by ctx only, not by the per-call timeout: large images take longer.
func (c *Client) PullImage(ctx context.Context, ref string, sandbox *runtimeapi.PodSandboxConfig) (string, error) {
	ctx, done := c.call(ctx, opPullImage, 0)
	resp, err := c.images().PullImage(ctx, &runtimeapi.PullImageRequest{
		Image: &runtimeapi.ImageSpec{Image: ref}, SandboxConfig: sandbox,
	})
	if err == nil && resp.GetImageRef() == "" {
		err = unknown("empty image ref")
	}
	if err = done(err); err != nil {
		return "", fmt.Errorf("pull image %s: %w", ref, err)
	}
	return resp.GetImageRef(), nil
}

// ListImages lists all images.
func (c *Client) ListImages(ctx context.Context) ([]*runtimeapi.Image, error) {
	ctx, done := c.call(ctx, opListImages, c.timeout)
	resp, err := c.images().ListImages(ctx, &runtimeapi.ListImagesRequest{})
	if err = done(err); err != nil {
		return nil, fmt.Errorf("list images: %w", err)
	}
	return resp.GetImages(), nil
}

// RemoveImage removes an image; removing an absent image is not an error in
// CRI.
func (c *Client) RemoveImage(ctx context.Context, ref string) error {
	ctx, done := c.call(ctx, opRemoveImage, c.timeout)
	_, err := c.images().RemoveImage(ctx, &runtimeapi.RemoveImageRequest{Image: &runtimeapi.ImageSpec{Image: ref}})
	if err = done(err); err != nil {
		return fmt.Errorf("remove image %s: %w", ref, err)
	}
	return nil
}

// ContainerStats returns one container's stats (CPU, memory, writable
// layer).
func (c *Client) ContainerStats(ctx context.Context, id string) (*runtimeapi.ContainerStats, error) {
	ctx, done := c.call(ctx, opContainerStats, c.timeout)
	resp, err := c.runtime().ContainerStats(ctx, &runtimeapi.ContainerStatsRequest{ContainerId: id})
	if err == nil && resp.GetStats() == nil {
		err = unknown("empty stats")
	}
	if err = done(err); err != nil {
		return nil, fmt.Errorf("container stats %s: %w", id, err)
	}
	return resp.GetStats(), nil
}

// ListContainerStats returns the stats of the containers matching filter
// (nil: all).
func (c *Client) ListContainerStats(ctx context.Context, filter *runtimeapi.ContainerStatsFilter) ([]*runtimeapi.ContainerStats, error) {
	ctx, done := c.call(ctx, opListContainerStats, c.timeout)
	resp, err := c.runtime().ListContainerStats(ctx, &runtimeapi.ListContainerStatsRequest{Filter: filter})
	if err = done(err); err != nil {
		return nil, fmt.Errorf("list container stats: %w", err)
	}
	return resp.GetStats(), nil
}

// PodSandboxStats returns one sandbox's stats (CPU, memory, network,
// processes, its containers). Runtimes without it (containerd 1.6) answer
// errdefs.ErrUnimplemented.
func (c *Client) PodSandboxStats(ctx context.Context, id string) (*runtimeapi.PodSandboxStats, error) {
	ctx, done := c.call(ctx, opPodSandboxStats, c.timeout)
	resp, err := c.runtime().PodSandboxStats(ctx, &runtimeapi.PodSandboxStatsRequest{PodSandboxId: id})
	if err == nil && resp.GetStats() == nil {
		err = unknown("empty stats")
	}
	if err = done(err); err != nil {
		return nil, fmt.Errorf("pod sandbox stats %s: %w", id, err)
	}
	return resp.GetStats(), nil
}

// ListPodSandboxStats returns the stats of the sandboxes matching filter
// (nil: all). Runtimes without it (containerd 1.6) answer
// errdefs.ErrUnimplemented.
func (c *Client) ListPodSandboxStats(ctx context.Context, filter *runtimeapi.PodSandboxStatsFilter) ([]*runtimeapi.PodSandboxStats, error) {
	ctx, done := c.call(ctx, opListPodSandboxStats, c.timeout)
	resp, err := c.runtime().ListPodSandboxStats(ctx, &runtimeapi.ListPodSandboxStatsRequest{Filter: filter})
	if err = done(err); err != nil {
		return nil, fmt.Errorf("list pod sandbox stats: %w", err)
	}
	return resp.GetStats(), nil
}

// ImageFsInfo returns the usage of the filesystems the runtime keeps images
// on and, where it keeps them apart, containers' writable layers on.
func (c *Client) ImageFsInfo(ctx context.Context) (*runtimeapi.ImageFsInfoResponse, error) {
	ctx, done := c.call(ctx, opImageFsInfo, c.timeout)
	resp, err := c.images().ImageFsInfo(ctx, &runtimeapi.ImageFsInfoRequest{})
	if err = done(err); err != nil {
		return nil, fmt.Errorf("image fs info: %w", err)
	}
	return resp, nil
}

func sandboxName(cfg *runtimeapi.PodSandboxConfig) string {
	md := cfg.GetMetadata()
	return md.GetNamespace() + "/" + md.GetName() + " (uid " + md.GetUid() + ")"
}
