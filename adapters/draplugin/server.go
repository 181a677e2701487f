package draplugin

import (
	"context"
	"errors"
	"fmt"
	"log/slog"
	"path/filepath"
	"sync"

	"google.golang.org/grpc"
	resourceapi "k8s.io/api/resource/v1"
	drapb "k8s.io/kubelet/pkg/apis/dra/v1"
	drapbv1beta1 "k8s.io/kubelet/pkg/apis/dra/v1beta1"
	registerapi "k8s.io/kubelet/pkg/apis/pluginregistration/v1"

	"github.com/actorlet/actorlet/internal/grpcsock"
)

// Claim is a ResourceClaim to prepare and its devices of this driver on
// this node.
type Claim struct {
	UID, Namespace, Name string
	Devices              []Device
}

// Device is one allocated device: the requests it serves, its pool and
// name in the slice, and its ID (the GPU's UUID).
type Device struct {
	Requests       []string
	Pool, Name, ID string
	CDIDevices     []string // set by the Preparer
}

// Result is one claim's prepared devices or its error.
type Result struct {
	Devices []Device
	Err     error
}

// Preparer prepares and unprepares claims (the DevicesActor). Its calls
// return within ctx's deadline.
type Preparer interface {
	Prepare(ctx context.Context, claims []Claim) (map[string]Result, error)
	Unprepare(ctx context.Context, claims []Claim) (map[string]error, error)
}

// ClaimGetter reads a ResourceClaim from the API server.
type ClaimGetter func(ctx context.Context, namespace, name string) (*resourceapi.ResourceClaim, error)

// Resolver maps a device's name in the slice ("gpu-0") to its ID.
type Resolver func(device string) (id string, ok bool)

// Config of the driver's servers.
type Config struct {
	Driver   string // "gpu.nvidia.com"
	NodeName string // the pool's name
	// PluginDir holds the driver's socket (dra.sock); RegistryDir the
	// registration socket (<driver>-reg.sock), watched by the node.
	PluginDir, RegistryDir string
	Claims                 ClaimGetter
	Resolve                Resolver
	Preparer               Preparer
	Log                    *slog.Logger
}

// Server is the driver's gRPC servers.
type Server struct {
	drapb.UnimplementedDRAPluginServer
	cfg Config
	log *slog.Logger

	dra, reg *grpcsock.Server // set by Start

	mu         sync.Mutex
	registered bool
	regErr     string
}

// New returns the servers (Start serves them).
func New(cfg Config) *Server {
	log := cfg.Log
	if log == nil {
		log = slog.Default()
	}
	return &Server{cfg: cfg, log: log.With("component", "dra-driver", "driver", cfg.Driver)}
}

// Endpoint is the driver's DRA socket.
func (s *Server) Endpoint() string { return filepath.Join(s.cfg.PluginDir, "dra.sock") }

// RegistrationSocket is the socket the node's plugin watcher finds.
func (s *Server) RegistrationSocket() string {
	return filepath.Join(s.cfg.RegistryDir, s.cfg.Driver+"-reg.sock")
}

// Start listens on both sockets (a stale socket file is replaced; the
// lifecycle of internal/grpcsock) and serves until Stop.
func (s *Server) Start() error {
	s.dra = grpcsock.New("DRA driver", s.Endpoint(), func(g *grpc.Server) {
		drapb.RegisterDRAPluginServer(g, s)
		// The older service upstream's kubelet still accepts, by k8s.io/kubelet's conversion.
		drapbv1beta1.RegisterDRAPluginServer(g, drapbv1beta1.V1ServerWrapper{DRAPluginServer: s})
	}, grpcsock.WithLogger(s.log, "", ""))
	s.reg = grpcsock.New("DRA driver registration", s.RegistrationSocket(), func(g *grpc.Server) {
		registerapi.RegisterRegistrationServer(g, registration{s: s})
	}, grpcsock.WithLogger(s.log, "", ""))
	if err := s.dra.Start(context.Background()); err != nil {
		return err
	}
	if err := s.reg.Start(context.Background()); err != nil {
		s.dra.Stop()
		return err
	}
	s.log.Info("DRA driver serving", "endpoint", s.Endpoint(), "registration", s.RegistrationSocket())
	return nil
}

// Stop stops serving and removes the sockets (the registration socket
// first: the node sees the driver go).
func (s *Server) Stop() {
	if s.reg != nil {
		s.reg.Stop()
	}
	if s.dra != nil {
		s.dra.Stop()
	}
}

// Registered says whether the node acknowledged the registration, and its
// error if it refused it.
func (s *Server) Registered() (bool, string) {
	s.mu.Lock()
	defer s.mu.Unlock()
	return s.registered, s.regErr
}

// registration is the pluginregistration v1 service.
type registration struct {
	registerapi.UnimplementedRegistrationServer
	s *Server
}

func (r registration) GetInfo(context.Context, *registerapi.InfoRequest) (*registerapi.PluginInfo, error) {
	return &registerapi.PluginInfo{
		Type:              registerapi.DRAPlugin,
		Name:              r.s.cfg.Driver,
		Endpoint:          r.s.Endpoint(),
		SupportedVersions: []string{drapb.DRAPluginService, drapbv1beta1.DRAPluginService},
	}, nil
}

func (r registration) NotifyRegistrationStatus(_ context.Context, st *registerapi.RegistrationStatus) (*registerapi.RegistrationStatusResponse, error) {
	r.s.mu.Lock()
	r.s.registered, r.s.regErr = st.GetPluginRegistered(), st.GetError()
	r.s.mu.Unlock()
	if st.GetPluginRegistered() {
		r.s.log.Info("DRA driver registered with the node")
	} else {
		r.s.log.Error("the node refused the DRA driver's registration", "err", st.GetError())
	}
	return &registerapi.RegistrationStatusResponse{}, nil
}

// NodePrepareResources (v1, and v1beta1 through the wrapper) reads each claim's allocation from the API server,
// keeps the devices of this driver and node, and asks the Preparer.
// Failures of one claim are in its answer.
func (s *Server) NodePrepareResources(ctx context.Context, req *drapb.NodePrepareResourcesRequest) (*drapb.NodePrepareResourcesResponse, error) {
	out := &drapb.NodePrepareResourcesResponse{Claims: map[string]*drapb.NodePrepareResourceResponse{}}
	var claims []Claim
	for _, c := range req.GetClaims() {
		claim, err := s.claim(ctx, c)
		if err != nil {
			s.log.Warn("DRA claim not prepared", "claim", c.GetNamespace()+"/"+c.GetName(), "uid", c.GetUid(), "err", err)
			out.Claims[c.GetUid()] = &drapb.NodePrepareResourceResponse{Error: err.Error()}
			continue
		}
		claims = append(claims, claim)
	}
	if len(claims) == 0 {
		return out, nil
	}
	res, err := s.cfg.Preparer.Prepare(ctx, claims)
	if err != nil {
		return nil, fmt.Errorf("prepare claims: %w", err)
	}
	for _, c := range claims {
		r, ok := res[c.UID]
		switch {
		case !ok:
			out.Claims[c.UID] = &drapb.NodePrepareResourceResponse{Error: "no answer for the claim"}
		case r.Err != nil:
			out.Claims[c.UID] = &drapb.NodePrepareResourceResponse{Error: r.Err.Error()}
		default:
			resp := &drapb.NodePrepareResourceResponse{}
			for _, d := range r.Devices {
				resp.Devices = append(resp.Devices, &drapb.Device{
					RequestNames: d.Requests, PoolName: d.Pool, DeviceName: d.Name, CdiDeviceIds: d.CDIDevices,
				})
			}
			out.Claims[c.UID] = resp
		}
	}
	return out, nil
}

// claim reads the claim's allocation: the results of this driver in this
// node's pool, each device resolved to its ID.
func (s *Server) claim(ctx context.Context, c *drapb.Claim) (Claim, error) {
	if c.GetUid() == "" || c.GetNamespace() == "" || c.GetName() == "" {
		return Claim{}, errors.New("claim without its namespace, name or UID")
	}
	rc, err := s.cfg.Claims(ctx, c.GetNamespace(), c.GetName())
	if err != nil {
		return Claim{}, fmt.Errorf("get ResourceClaim %s/%s: %w", c.GetNamespace(), c.GetName(), err)
	}
	if string(rc.UID) != c.GetUid() {
		return Claim{}, fmt.Errorf("ResourceClaim %s/%s has UID %s, not %s (deleted and recreated)", c.GetNamespace(), c.GetName(), rc.UID, c.GetUid())
	}
	if rc.Status.Allocation == nil {
		return Claim{}, fmt.Errorf("ResourceClaim %s/%s is not allocated", c.GetNamespace(), c.GetName())
	}
	out := Claim{UID: c.GetUid(), Namespace: c.GetNamespace(), Name: c.GetName()}
	byDevice := map[string]int{}
	for _, r := range rc.Status.Allocation.Devices.Results {
		if r.Driver != s.cfg.Driver {
			continue
		}
		if r.Pool != s.cfg.NodeName {
			return Claim{}, fmt.Errorf("device %s of request %s is in pool %q, not this node's (%q)", r.Device, r.Request, r.Pool, s.cfg.NodeName)
		}
		if i, ok := byDevice[r.Device]; ok { // one device for several requests
			out.Devices[i].Requests = append(out.Devices[i].Requests, r.Request)
			continue
		}
		id, ok := s.cfg.Resolve(r.Device)
		if !ok {
			return Claim{}, fmt.Errorf("unknown device %q in pool %q (request %s)", r.Device, r.Pool, r.Request)
		}
		byDevice[r.Device] = len(out.Devices)
		out.Devices = append(out.Devices, Device{Requests: []string{r.Request}, Pool: r.Pool, Name: r.Device, ID: id})
	}
	if len(out.Devices) == 0 {
		return Claim{}, fmt.Errorf("ResourceClaim %s/%s has no device of driver %s", c.GetNamespace(), c.GetName(), s.cfg.Driver)
	}
	return out, nil
}

// NodeUnprepareResources asks the Preparer to unprepare the claims (one
// never prepared is no error).
func (s *Server) NodeUnprepareResources(ctx context.Context, req *drapb.NodeUnprepareResourcesRequest) (*drapb.NodeUnprepareResourcesResponse, error) {
	out := &drapb.NodeUnprepareResourcesResponse{Claims: map[string]*drapb.NodeUnprepareResourceResponse{}}
	var claims []Claim
	for _, c := range req.GetClaims() {
		if c.GetUid() == "" {
			continue
		}
		claims = append(claims, Claim{UID: c.GetUid(), Namespace: c.GetNamespace(), Name: c.GetName()})
	}
	if len(claims) == 0 {
		return out, nil
	}
	res, err := s.cfg.Preparer.Unprepare(ctx, claims)
	if err != nil {
		return nil, fmt.Errorf("unprepare claims: %w", err)
	}
	for _, c := range claims {
		resp := &drapb.NodeUnprepareResourceResponse{}
		if err, ok := res[c.UID]; !ok {
			resp.Error = "no answer for the claim"
		} else if err != nil {
			resp.Error = err.Error()
		}
		out.Claims[c.UID] = resp
	}
	return out, nil
}
