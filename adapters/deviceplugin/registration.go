// Package deviceplugin speaks the kubelet's device plugin API
// (k8s.io/kubelet/pkg/apis/deviceplugin/v1beta1) on both of its sides.
//
// Registration is the kubelet's registration server on
// <dir>/kubelet.sock (dir is <root-dir>/device-plugins): a vendor plugin
// calls Register there, the request is checked as upstream's device manager
// checks it, and an accepted one is handed on as a
// messages.DevicePluginRegistered. Plugin is the client of one registered
// plugin (its own socket in the same dir): ListAndWatch, Allocate,
// GetPreferredAllocation and PreStartContainer, with the methods of the
// DevicesActor's Provider, so the actor treats a vendor's plugin like its
// built-in GPUs.
//
// The package is an inbound adapter: it imports messages, never actors.
package deviceplugin

import (
	"context"
	"errors"
	"fmt"
	"log/slog"
	"os"
	"path/filepath"
	"slices"
	"strings"

	"google.golang.org/grpc"
	"google.golang.org/grpc/codes"
	"google.golang.org/grpc/status"
	v1 "k8s.io/api/core/v1"
	"k8s.io/apimachinery/pkg/util/validation"
	pluginapi "k8s.io/kubelet/pkg/apis/deviceplugin/v1beta1"

	"github.com/actorlet/actorlet/internal/grpcsock"
	"github.com/actorlet/actorlet/messages"
)

// SocketName is the name of the registration socket in the device plugins
// dir, as upstream's kubelet (pluginapi.KubeletSocket).
const SocketName = "kubelet.sock"

// Registration is the kubelet's device plugin registration server
// (pluginapi.RegistrationServer) on <dir>/kubelet.sock.
type Registration struct {
	dir  string
	send func(*messages.DevicePluginRegistered)
	log  *slog.Logger
	sock *grpcsock.Server
}

// NewRegistration returns a registration server for the device plugins dir
// (upstream: /var/lib/kubelet/device-plugins). send receives every accepted
// registration, the plugin's endpoint made an absolute path in dir; it is
// called from gRPC goroutines and must be safe for concurrent use and quick
// (an actor's Send). log may be nil (slog.Default()).
func NewRegistration(dir string, send func(*messages.DevicePluginRegistered), log *slog.Logger) *Registration {
	if log == nil {
		log = slog.Default()
	}
	if abs, err := filepath.Abs(dir); err == nil {
		dir = abs
	}
	r := &Registration{dir: dir, send: send, log: log.With("component", "deviceplugin-registration")}
	r.sock = grpcsock.New("device plugin registration", filepath.Join(dir, SocketName),
		func(srv *grpc.Server) { pluginapi.RegisterRegistrationServer(srv, &registrationServer{r: r}) },
		grpcsock.WithPrepare(r.prepare),
		grpcsock.WithLogger(r.log, "device plugin registration server listening",
			"device plugin registration server stopped", "version", pluginapi.Version))
	return r
}

// SocketPath is where the registration server listens: <dir>/kubelet.sock.
func (r *Registration) SocketPath() string {
	return r.sock.SocketPath()
}

// Start makes dir (0750) if it is missing, removes every socket in it (a
// stale registration socket and the sockets of plugins that registered with
// an earlier kubelet: as upstream, this is how plugins learn that they must
// register again; other files and dirs stay), listens on the registration
// socket and serves it in a goroutine until ctx ends or Stop is called.
func (r *Registration) Start(ctx context.Context) error {
	if err := r.checkConfig(); err != nil {
		return err
	}
	return r.sock.Start(ctx)
}

// Serve is Start, then waits until ctx ends (nil) or the server fails (the
// error), and stops it.
func (r *Registration) Serve(ctx context.Context) error {
	if err := r.checkConfig(); err != nil {
		return err
	}
	return r.sock.Serve(ctx)
}

// Stop stops serving (open RPCs are cancelled) and removes the socket. It
// is idempotent; Start may be called again afterwards.
func (r *Registration) Stop() {
	if r.sock != nil {
		r.sock.Stop()
	}
}

// checkConfig refuses a registration server that cannot serve.
func (r *Registration) checkConfig() error {
	if r.send == nil {
		return errors.New("device plugin registration: no send function")
	}
	if !filepath.IsAbs(r.dir) {
		return fmt.Errorf("device plugin registration: dir %q is not an absolute path", r.dir)
	}
	return nil
}

// prepare makes dir (0750) and removes the sockets in it before the server
// listens; grpcsock puts "device plugin registration: " before its errors.
func (r *Registration) prepare() error {
	if err := os.MkdirAll(r.dir, 0o750); err != nil {
		return err
	}
	return r.removeSockets()
}

// removeSockets removes every socket in dir, as upstream's device manager
// does when it starts (CleanupPluginDirectory).
func (r *Registration) removeSockets() error {
	entries, err := os.ReadDir(r.dir)
	if err != nil {
		return err
	}
	var errs []error
	for _, e := range entries {
		if e.Type()&os.ModeSocket == 0 {
			continue
		}
		p := filepath.Join(r.dir, e.Name())
		if err := os.Remove(p); err != nil && !errors.Is(err, os.ErrNotExist) {
			errs = append(errs, err)
			continue
		}
		if e.Name() != SocketName {
			r.log.Info("removed a device plugin socket of an earlier kubelet; its plugin must register again", "socket", p)
		}
	}
	if err := errors.Join(errs...); err != nil {
		return fmt.Errorf("remove old sockets: %w", err)
	}
	return nil
}

// registrationServer is the gRPC face of a Registration.
type registrationServer struct {
	pluginapi.UnimplementedRegistrationServer
	r *Registration
}

// Register checks a plugin's registration as upstream's device manager does
// and tells the DevicesActor about an accepted one.
func (s *registrationServer) Register(_ context.Context, req *pluginapi.RegisterRequest) (*pluginapi.Empty, error) {
	msg, err := s.r.check(req)
	if err != nil {
		s.r.log.Warn("device plugin registration refused", "resource", req.GetResourceName(),
			"endpoint", req.GetEndpoint(), "version", req.GetVersion(), "err", err)
		return nil, err
	}
	s.r.log.Info("device plugin registered", "resource", msg.ResourceName, "endpoint", msg.Endpoint,
		"preStartRequired", msg.PreStartRequired, "preferredAllocation", msg.GetPreferredAllocationAvailable)
	s.r.send(msg)
	return &pluginapi.Empty{}, nil
}

// check validates a registration and returns the message it becomes, or a
// gRPC status error saying why it is refused.
func (r *Registration) check(req *pluginapi.RegisterRequest) (*messages.DevicePluginRegistered, error) {
	if !slices.Contains(pluginapi.SupportedVersions[:], req.GetVersion()) {
		return nil, status.Errorf(codes.InvalidArgument,
			"requested API version %q is not supported by kubelet. Supported version is %q",
			req.GetVersion(), pluginapi.SupportedVersions)
	}
	if err := ValidateResourceName(req.GetResourceName()); err != nil {
		return nil, status.Error(codes.InvalidArgument, err.Error())
	}
	if err := validateEndpoint(req.GetEndpoint()); err != nil {
		return nil, status.Error(codes.InvalidArgument, err.Error())
	}
	endpoint := filepath.Join(r.dir, req.GetEndpoint())
	fi, err := os.Stat(endpoint)
	if err != nil {
		return nil, status.Errorf(codes.FailedPrecondition,
			"the Endpoint %q: the plugin must serve its socket before it registers: %v", req.GetEndpoint(), err)
	}
	if fi.Mode()&os.ModeSocket == 0 {
		return nil, status.Errorf(codes.FailedPrecondition, "the Endpoint %q: %s is not a socket", req.GetEndpoint(), endpoint)
	}
	opts := req.GetOptions()
	return &messages.DevicePluginRegistered{
		ResourceName:                    req.GetResourceName(),
		Endpoint:                        endpoint,
		PreStartRequired:                opts.GetPreStartRequired(),
		GetPreferredAllocationAvailable: opts.GetGetPreferredAllocationAvailable(),
	}, nil
}

// ValidateResourceName says whether name may be served by a device plugin:
// an extended resource name as upstream's IsExtendedResourceName has it
// (domain-prefixed, not in the kubernetes.io/ namespace, no "requests."
// prefix, and a qualified name once "requests." is put before it).
func ValidateResourceName(name string) error {
	invalid := func(why string) error {
		return fmt.Errorf("the ResourceName %q is invalid: %s", name, why)
	}
	switch {
	case name == "":
		return invalid("it is empty")
	case !strings.Contains(name, "/"):
		return invalid("an extended resource needs a domain prefix (example.com/name); unprefixed names are native resources")
	case strings.Contains(name, v1.ResourceDefaultNamespacePrefix):
		return invalid("the kubernetes.io/ namespace is reserved for native resources")
	case strings.HasPrefix(name, v1.DefaultResourceRequestsPrefix):
		return invalid("the requests. prefix is reserved for quota")
	}
	if errs := validation.IsQualifiedName(v1.DefaultResourceRequestsPrefix + name); len(errs) > 0 {
		return invalid(strings.Join(errs, "; "))
	}
	return nil
}

// validateEndpoint checks that a plugin's endpoint is a socket file name in
// the device plugins dir.
func validateEndpoint(endpoint string) error {
	invalid := func(why string) error {
		return fmt.Errorf("the Endpoint %q is invalid: %s", endpoint, why)
	}
	switch {
	case endpoint == "":
		return invalid("it is empty; it must be the name of the plugin's socket file in the device plugins dir")
	case strings.ContainsAny(endpoint, `/\`):
		return invalid(`it must be a file name in the device plugins dir, without "/"`)
	case strings.Contains(endpoint, ".."), endpoint == ".":
		return invalid(`it must be a file name in the device plugins dir, without ".."`)
	case endpoint == SocketName:
		return invalid("it is the kubelet's own registration socket")
	case strings.ContainsRune(endpoint, 0):
		return invalid("it contains a NUL byte")
	}
	return nil
}
