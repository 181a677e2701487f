package main

import (
	"context"
	"encoding/json"
	"os"
	"path/filepath"
	"slices"
	"strings"
	"testing"
	"time"

	"google.golang.org/grpc"
	"google.golang.org/grpc/credentials/insecure"
	v1 "k8s.io/api/core/v1"
	resourceapi "k8s.io/api/resource/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/types"
	"k8s.io/client-go/kubernetes/fake"
	drahealthv1 "k8s.io/kubelet/pkg/apis/dra-health/v1"
	drapbv1 "k8s.io/kubelet/pkg/apis/dra/v1"
	drapbv1beta1 "k8s.io/kubelet/pkg/apis/dra/v1beta1"
	registerapi "k8s.io/kubelet/pkg/apis/pluginregistration/v1"
	cdispec "tags.cncf.io/container-device-interface/specs-go"

	"github.com/actorlet/actorlet/internal/testenv"
)

func TestParseFlagsRefusesWhatItCannotHonour(t *testing.T) {
	base := []string{"--node-name", "n", "--kubeconfig", "k", "--registrar-dir", "r", "--plugin-dir", "p"}
	for _, tt := range []struct {
		name string
		args []string
		want string
	}{
		{"missing node", []string{"--kubeconfig", "k", "--registrar-dir", "r", "--plugin-dir", "p"}, "--node-name is required"},
		{"no devices", append(base, "--devices", "0"), "--devices 0"},
		{"too many devices", append(base, "--devices", "129"), "--devices 129"},
		{"bad driver name", append(base, "--driver-name", "Not_A_Domain"), "--driver-name"},
		{"negative delay", append(base, "--prepare-delay", "-1s"), "--prepare-delay"},
		{"unknown unhealthy device", append(base, "--devices", "2", "--unhealthy", "dev-2"), "--unhealthy"},
		{"stray argument", append(base, "extra"), "unexpected arguments"},
		{"unknown flag", append(base, "--gpus", "1"), "unknown flag"},
	} {
		t.Run(tt.name, func(t *testing.T) {
			_, err := parseFlags(tt.args)
			if err == nil || !strings.Contains(err.Error(), tt.want) {
				t.Fatalf("parseFlags(%q) = %v, want an error naming %q", tt.args, err, tt.want)
			}
		})
	}
	c, err := parseFlags(base)
	if err != nil {
		t.Fatal(err)
	}
	if c.driverName != "dra.actorlet.dev" || c.devices != 2 || c.stateFile != filepath.Join("p", "calls.jsonl") {
		t.Fatalf("defaults %+v", c)
	}
}

func TestEnvName(t *testing.T) {
	for in, want := range map[string]string{"dev-0": "DRA_DEV_0", "dev-17": "DRA_DEV_17"} {
		if got := EnvName(in); got != want {
			t.Errorf("EnvName(%q) = %q, want %q", in, got, want)
		}
	}
}

// allocated is a claim allocated devices of the test driver on node.
func allocated(ns, name, uid, node, pod string, devices ...string) *resourceapi.ResourceClaim {
	c := &resourceapi.ResourceClaim{
		ObjectMeta: metav1.ObjectMeta{Namespace: ns, Name: name, UID: types.UID(uid)},
		Status: resourceapi.ResourceClaimStatus{
			Allocation:  &resourceapi.AllocationResult{},
			ReservedFor: []resourceapi.ResourceClaimConsumerReference{{Resource: "pods", Name: pod, UID: types.UID(pod + "-uid")}},
		},
	}
	for _, d := range devices {
		c.Status.Allocation.Devices.Results = append(c.Status.Allocation.Devices.Results, resourceapi.DeviceRequestAllocationResult{
			Request: "gpu", Driver: "dra.actorlet.dev", Pool: node, Device: d,
		})
	}
	return c
}

func dial(t *testing.T, sock string) *grpc.ClientConn {
	t.Helper()
	conn, err := grpc.NewClient("unix://"+sock, grpc.WithTransportCredentials(insecure.NewCredentials()))
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { _ = conn.Close() })
	return conn
}

// The driver answers a kubelet's calls as upstream's kubelet makes them:
// GetInfo and NotifyRegistrationStatus on the registration socket, then
// NodePrepareResources / NodeUnprepareResources (v1 and v1beta1) and the
// health stream on the DRA socket; it publishes the node's ResourceSlice
// and records every call in the state file.
func TestDriverServesAKubelet(t *testing.T) {
	root, err := os.MkdirTemp("", "dradrv") // short: unix socket paths are limited to 108 bytes
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { _ = os.RemoveAll(root) })
	const node = "node-a"
	cs := fake.NewClientset(
		&v1.Node{ObjectMeta: metav1.ObjectMeta{Name: node, UID: "node-a-uid"}},
		allocated("default", "good", "uid-good", node, "pod-a", "dev-0", "dev-2"),
		allocated("default", "bad", "uid-bad", node, "pod-b", "dev-1"),
		allocated("other", "elsewhere", "uid-else", node, "pod-refused", "dev-1"),
		allocated("default", "foreign", "uid-foreign", "node-b", "pod-c", "dev-1"),
	)
	c, err := parseFlags([]string{
		"--node-name", node, "--kubeconfig", "unused", "--devices", "3", "--unhealthy", "dev-1",
		"--registrar-dir", filepath.Join(root, "plugins_registry"),
		"--plugin-dir", filepath.Join(root, "plugins", "dra.actorlet.dev"),
		"--cdi-dir", filepath.Join(root, "cdi"),
		"--fail-prepare-for", "pod-refused",
	})
	if err != nil {
		t.Fatal(err)
	}
	ctx, cancel := context.WithCancelCause(context.Background())
	t.Cleanup(func() { cancel(nil) })
	d, err := start(ctx, c, cs, cancel)
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(d.helper.Stop)

	// Registration, as the kubelet's plugin watcher does it.
	reg := registerapi.NewRegistrationClient(dial(t, filepath.Join(root, "plugins_registry", "dra.actorlet.dev-reg.sock")))
	info, err := reg.GetInfo(ctx, &registerapi.InfoRequest{})
	if err != nil {
		t.Fatal(err)
	}
	if info.Type != registerapi.DRAPlugin || info.Name != "dra.actorlet.dev" || info.Endpoint != filepath.Join(root, "plugins", "dra.actorlet.dev", "dra.sock") {
		t.Fatalf("GetInfo = %+v", info)
	}
	for _, svc := range []string{drapbv1.DRAPluginService, drapbv1beta1.DRAPluginService, drahealthv1.DRAResourceHealthService} {
		if !slices.Contains(info.SupportedVersions, svc) {
			t.Errorf("supported versions %v lack %s", info.SupportedVersions, svc)
		}
	}
	if _, err := reg.NotifyRegistrationStatus(ctx, &registerapi.RegistrationStatus{PluginRegistered: true}); err != nil {
		t.Fatal(err)
	}

	// The ResourceSlice: one pool named after the node, three devices.
	testenv.WaitFor(t, 30*time.Second, "the node's ResourceSlice", func() (bool, error) {
		l, err := cs.ResourceV1().ResourceSlices().List(ctx, metav1.ListOptions{})
		if err != nil || len(l.Items) != 1 {
			return false, err
		}
		s := l.Items[0].Spec
		return s.Driver == "dra.actorlet.dev" && s.NodeName != nil && *s.NodeName == node && s.Pool.Name == node && len(s.Devices) == 3 &&
			*s.Devices[2].Attributes["index"].IntValue == 2 && *s.Devices[2].Attributes["model"].StringValue == "actorlet-test", nil
	})

	dra := drapbv1.NewDRAPluginClient(dial(t, info.Endpoint))
	claim := func(ns, name, uid string) *drapbv1.Claim { return &drapbv1.Claim{Namespace: ns, Name: name, Uid: uid} }
	resp, err := dra.NodePrepareResources(ctx, &drapbv1.NodePrepareResourcesRequest{Claims: []*drapbv1.Claim{
		claim("default", "good", "uid-good"), claim("other", "elsewhere", "uid-else"), claim("default", "foreign", "uid-foreign"),
	}})
	if err != nil {
		t.Fatal(err)
	}
	good := resp.Claims["uid-good"]
	if good.GetError() != "" || len(good.GetDevices()) != 2 {
		t.Fatalf("prepare good: %+v", good)
	}
	wantIDs := []string{"dra.actorlet.dev/dev=uid-good-dev-0", "dra.actorlet.dev/dev=uid-good-dev-2"}
	var gotIDs []string
	for _, dev := range good.Devices {
		gotIDs = append(gotIDs, dev.CdiDeviceIds...)
		if dev.PoolName != node || !slices.Equal(dev.RequestNames, []string{"gpu"}) {
			t.Errorf("device %+v", dev)
		}
	}
	if !slices.Equal(gotIDs, wantIDs) {
		t.Errorf("CDI IDs %v, want %v", gotIDs, wantIDs)
	}
	if e := resp.Claims["uid-else"].GetError(); !strings.Contains(e, "--fail-prepare-for=pod-refused") {
		t.Errorf("the claim of pod-refused: error %q", e)
	}
	if e := resp.Claims["uid-foreign"].GetError(); !strings.Contains(e, "not one of this node's") {
		t.Errorf("a claim of another node's devices: error %q", e)
	}

	// The CDI spec sets DRA_<DEVICE>=<namespace>/<name> for each device.
	b, err := os.ReadFile(filepath.Join(root, "cdi", "dra.actorlet.dev-uid-good.json"))
	if err != nil {
		t.Fatal(err)
	}
	var spec cdispec.Spec
	if err := json.Unmarshal(b, &spec); err != nil {
		t.Fatal(err)
	}
	if spec.Kind != "dra.actorlet.dev/dev" || spec.Version == "" || len(spec.Devices) != 2 ||
		spec.Devices[1].Name != "uid-good-dev-2" || !slices.Equal(spec.Devices[1].ContainerEdits.Env, []string{"DRA_DEV_2=default/good"}) {
		t.Fatalf("CDI spec %s", b)
	}

	// The older API upstream's kubelet still speaks: the same answer,
	// recorded as a repeated prepare.
	old, err := drapbv1beta1.NewDRAPluginClient(dial(t, info.Endpoint)).NodePrepareResources(ctx, &drapbv1beta1.NodePrepareResourcesRequest{Claims: []*drapbv1beta1.Claim{{Namespace: "default", Name: "good", Uid: "uid-good"}}})
	if err != nil {
		t.Fatal(err)
	}
	if g := old.Claims["uid-good"]; g.GetError() != "" || len(g.GetDevices()) != 2 {
		t.Fatalf("v1beta1 prepare: %+v", g)
	}

	// A claim that is not there is an error of the whole call.
	if _, err := dra.NodePrepareResources(ctx, &drapbv1.NodePrepareResourcesRequest{Claims: []*drapbv1.Claim{claim("default", "gone", "uid-gone")}}); err == nil {
		t.Error("prepare of a claim that does not exist succeeded")
	}

	// Unprepare removes the spec; twice is no error.
	for range 2 {
		u, err := dra.NodeUnprepareResources(ctx, &drapbv1.NodeUnprepareResourcesRequest{Claims: []*drapbv1.Claim{claim("default", "good", "uid-good")}})
		if err != nil || u.Claims["uid-good"].GetError() != "" {
			t.Fatalf("unprepare: %v %+v", err, u)
		}
	}
	if _, err := os.Stat(filepath.Join(root, "cdi", "dra.actorlet.dev-uid-good.json")); !os.IsNotExist(err) {
		t.Errorf("the CDI spec after unprepare: %v", err)
	}

	// The health stream: dev-1 Unhealthy, the others Healthy.
	hs, err := drahealthv1.NewDRAResourceHealthClient(dial(t, info.Endpoint)).NodeWatchResources(ctx, &drahealthv1.NodeWatchResourcesRequest{})
	if err != nil {
		t.Fatal(err)
	}
	h, err := hs.Recv()
	if err != nil {
		t.Fatal(err)
	}
	health := map[string]drahealthv1.HealthStatus{}
	for _, dh := range h.Devices {
		health[dh.GetDevice().GetDeviceName()] = dh.Health
	}
	if health["dev-0"] != drahealthv1.HealthStatus_HEALTHY || health["dev-1"] != drahealthv1.HealthStatus_UNHEALTHY || len(health) != 3 {
		t.Errorf("health %v", health)
	}

	// The state file tells the story.
	calls, err := testenv.ReadDRADriverCalls(c.stateFile)
	if err != nil {
		t.Fatal(err)
	}
	var story []string
	for _, call := range calls {
		s := call.Op + " " + call.Claim
		if call.Again {
			s += " again"
		}
		story = append(story, strings.TrimSpace(s))
	}
	want := []string{
		"registered", "prepare default/good", "prepare-failed other/elsewhere", "prepare-failed default/foreign",
		"prepare default/good again", "unprepare default/good", "unprepare default/good again",
	}
	if !slices.Equal(story, want) {
		t.Errorf("state file:\n%s\nwant\n%s", strings.Join(story, "\n"), strings.Join(want, "\n"))
	}
}

// --prepare-delay: a caller that gives up first gets an error and no
// result, and the state file says the prepare was abandoned.
func TestSlowPrepareAbandonedWhenTheCallerGivesUp(t *testing.T) {
	dir := t.TempDir()
	c, err := parseFlags([]string{"--node-name", "n", "--kubeconfig", "k", "--registrar-dir", dir, "--plugin-dir", dir,
		"--cdi-dir", filepath.Join(dir, "cdi"), "--prepare-delay", "1h"})
	if err != nil {
		t.Fatal(err)
	}
	f, err := os.Create(c.stateFile)
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { _ = f.Close() })
	d := &driver{c: c, log: f}
	ctx, cancel := context.WithTimeout(context.Background(), 50*time.Millisecond)
	defer cancel()
	res, err := d.PrepareResourceClaims(ctx, []*resourceapi.ResourceClaim{allocated("default", "slow", "uid-slow", "n", "p", "dev-0")})
	if err == nil || !strings.Contains(err.Error(), "deadline exceeded") || res != nil {
		t.Fatalf("prepare past the caller's deadline = %v, %v; want the deadline's error", res, err)
	}
	calls, err := testenv.ReadDRADriverCalls(c.stateFile)
	if err != nil {
		t.Fatal(err)
	}
	if len(calls) != 1 || calls[0].Op != "prepare-abandoned" || calls[0].UID != "uid-slow" {
		t.Fatalf("state file %+v", calls)
	}
}
