// Package dra speaks the kubelet's side of Dynamic Resource Allocation's
// node protocols (k8s.io/kubelet/pkg/apis): the plugin registration
// directory (pluginregistration/v1: a DRA driver puts a registration socket
// in <root-dir>/plugins_registry, the Watcher dials it, asks GetInfo and
// answers NotifyRegistrationStatus as upstream's plugin manager), the DRA
// gRPC service of a registered driver (dra/v1, and dra/v1beta1 which
// upstream still accepts) and its resource health stream (dra-health/v1,
// and v1alpha1 which upstream accepts until v1.40). Wiper deletes the
// node's ResourceSlices of drivers that are gone, as upstream's kubelet.
//
// The package is an inbound adapter: it imports messages, never actors.
package dra

import (
	"context"
	"errors"
	"fmt"
	"slices"
	"time"

	"google.golang.org/grpc"
	"google.golang.org/grpc/credentials/insecure"
	grpcstats "google.golang.org/grpc/stats"
	drahealthv1 "k8s.io/kubelet/pkg/apis/dra-health/v1"
	drahealthv1alpha1 "k8s.io/kubelet/pkg/apis/dra-health/v1alpha1"
	drapb "k8s.io/kubelet/pkg/apis/dra/v1"
	drapbv1beta1 "k8s.io/kubelet/pkg/apis/dra/v1beta1"
)

// Services are the DRA gRPC services the kubelet speaks, most recent first
// (upstream's servicesSupportedByKubelet): a driver must announce one.
var Services = []string{drapb.DRAPluginService, drapbv1beta1.DRAPluginService}

// HealthServices are the resource health services, most recent first.
var HealthServices = []string{drahealthv1.DRAResourceHealthService, drahealthv1alpha1.DRAResourceHealthService}

// ErrNoHealth is WatchHealth's error for a driver that announced no health
// service: there is nothing to watch.
var ErrNoHealth = errors.New("the driver announced no resource health service")

// ChooseServices picks the DRA service and the health service ("" when the
// driver has none) of a driver's announced services, as upstream: the
// first of Services the driver announced. An error names what is missing.
func ChooseServices(announced []string) (service, health string, err error) {
	if len(announced) == 0 {
		return "", "", errors.New("empty list of supported gRPC services (aka supported versions)")
	}
	for _, s := range Services {
		if slices.Contains(announced, s) {
			service = s
			break
		}
	}
	if service == "" {
		return "", "", fmt.Errorf("none of services supported by the plugin (%q) are supported by the kubelet (%q)", announced, Services)
	}
	for _, s := range HealthServices {
		if slices.Contains(announced, s) {
			health = s
			break
		}
	}
	return service, health, nil
}

// Client is the gRPC client of one registered DRA driver.
type Client struct {
	driver, endpoint string
	service, health  string
	timeout          time.Duration
	conn             *grpc.ClientConn
	observe          func(driver, method string, d time.Duration, err error)
}

// Dial returns the client of a driver's endpoint (an absolute unix socket
// path) for the services it announced. The connection is made at once and
// kept (gRPC reconnects by itself; no idle timeout); timeout bounds every
// call (upstream: 45s). observe, when not nil, gets every call's duration
// and error (metrics); connected, when not nil, is told whenever the
// connection comes up (true) or goes down (false), as upstream watches a
// driver's connection (a driver that died without removing its
// registration socket is seen this way).
func Dial(driver, endpoint string, announced []string, timeout time.Duration, observe func(driver, method string, d time.Duration, err error), connected func(bool)) (*Client, error) {
	service, health, err := ChooseServices(announced)
	if err != nil {
		return nil, fmt.Errorf("invalid supported gRPC versions of DRA driver plugin %s at endpoint %s: %w", driver, endpoint, err)
	}
	if timeout <= 0 {
		timeout = 45 * time.Second
	}
	c := &Client{driver: driver, endpoint: endpoint, service: service, health: health, timeout: timeout, observe: observe}
	opts := []grpc.DialOption{
		grpc.WithTransportCredentials(insecure.NewCredentials()),
		grpc.WithChainUnaryInterceptor(c.intercept),
		grpc.WithIdleTimeout(0), // an idle driver stays connected
	}
	if connected != nil {
		opts = append(opts, grpc.WithStatsHandler(connWatch(connected)))
	}
	conn, err := grpc.NewClient("unix:"+endpoint, opts...)
	if err != nil {
		return nil, fmt.Errorf("create gRPC connection to DRA driver %s plugin at endpoint %s: %w", driver, endpoint, err)
	}
	conn.Connect() // find out early whether the driver is there
	c.conn = conn
	return c, nil
}

func (c *Client) intercept(ctx context.Context, method string, req, reply any, cc *grpc.ClientConn, invoker grpc.UnaryInvoker, opts ...grpc.CallOption) error {
	start := time.Now()
	err := invoker(ctx, method, req, reply, cc, opts...)
	if c.observe != nil {
		c.observe(c.driver, method, time.Since(start), err)
	}
	return err
}

// Service is the DRA service in use ("v1.DRAPlugin" or "v1beta1.DRAPlugin").
func (c *Client) Service() string { return c.service }

// Endpoint is the driver's socket.
func (c *Client) Endpoint() string { return c.endpoint }

// plugin is the DRA service of the driver as a v1 client (v1beta1 calls
// converted to and from v1).
func (c *Client) plugin() drapb.DRAPluginClient {
	if c.service == drapbv1beta1.DRAPluginService {
		return drapbv1beta1.V1Beta1ClientWrapper{DRAPluginClient: drapbv1beta1.NewDRAPluginClient(c.conn)}
	}
	return drapb.NewDRAPluginClient(c.conn)
}

// Prepare calls NodePrepareResources for claims.
func (c *Client) Prepare(ctx context.Context, claims []*drapb.Claim) (*drapb.NodePrepareResourcesResponse, error) {
	ctx, cancel := context.WithTimeout(ctx, c.timeout)
	defer cancel()
	return c.plugin().NodePrepareResources(ctx, &drapb.NodePrepareResourcesRequest{Claims: claims})
}

// Unprepare calls NodeUnprepareResources for claims.
func (c *Client) Unprepare(ctx context.Context, claims []*drapb.Claim) (*drapb.NodeUnprepareResourcesResponse, error) {
	ctx, cancel := context.WithTimeout(ctx, c.timeout)
	defer cancel()
	return c.plugin().NodeUnprepareResources(ctx, &drapb.NodeUnprepareResourcesRequest{Claims: claims})
}

// WatchHealth follows the driver's NodeWatchResources stream (v1, or
// v1alpha1 converted to v1) and hands every report to report, until ctx
// ends (its error) or the stream ends (nil at EOF, else its error; a
// driver that announced the service without implementing it answers
// codes.Unimplemented). ErrNoHealth when the driver announced none.
func (c *Client) WatchHealth(ctx context.Context, report func(*drahealthv1.NodeWatchResourcesResponse)) error {
	var stream drahealthv1.DRAResourceHealth_NodeWatchResourcesClient
	var err error
	switch c.health {
	case drahealthv1.DRAResourceHealthService:
		stream, err = drahealthv1.NewDRAResourceHealthClient(c.conn).NodeWatchResources(ctx, &drahealthv1.NodeWatchResourcesRequest{})
	case drahealthv1alpha1.DRAResourceHealthService:
		stream, err = drahealthv1.V1Alpha1ClientWrapper{Client: drahealthv1alpha1.NewDRAResourceHealthClient(c.conn)}.NodeWatchResources(ctx, &drahealthv1.NodeWatchResourcesRequest{})
	default:
		return ErrNoHealth
	}
	if err != nil {
		return err
	}
	for {
		resp, err := stream.Recv()
		if err != nil {
			if isEOF(err) {
				return nil
			}
			return err
		}
		report(resp)
	}
}

// Close closes the connection.
func (c *Client) Close() error { return c.conn.Close() }

// connWatch is a gRPC stats handler that reports the connection's state.
type connWatch func(bool)

func (w connWatch) TagRPC(ctx context.Context, _ *grpcstats.RPCTagInfo) context.Context   { return ctx }
func (w connWatch) HandleRPC(context.Context, grpcstats.RPCStats)                         {}
func (w connWatch) TagConn(ctx context.Context, _ *grpcstats.ConnTagInfo) context.Context { return ctx }
func (w connWatch) HandleConn(_ context.Context, s grpcstats.ConnStats) {
	switch s.(type) {
	case *grpcstats.ConnBegin:
		w(true)
	case *grpcstats.ConnEnd:
		w(false)
	}
}
