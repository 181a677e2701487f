package e2e

import (
	"context"
	"fmt"
	"os"
	"slices"
	"strings"
	"testing"
	"time"

	v1 "k8s.io/api/core/v1"
	resourceapi "k8s.io/api/resource/v1"
	apierrors "k8s.io/apimachinery/pkg/api/errors"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/client-go/util/retry"
	"k8s.io/utils/ptr"

	"github.com/actorlet/actorlet/internal/testenv"
)

// The DRA tests run the agent as a node of the local control plane
// (kube-scheduler allocates the claims), the project's test driver
// (test/dradriver) against the agent's root directory, and check what a
// user and the driver see: the pod's phase and events, the claim's
// allocation and reservation, the driver's record of its calls, the CDI
// device's environment variable inside the container.

const draDriverName = "dra.actorlet.dev"

// draRuntime is where the DRA tests run their pods.
type draRuntime struct {
	endpoint string // "" or sim://...: the embedded sim runtime
	image    string
	cdiDir   string // where the runtime reads CDI specs; "" : a temporary directory
	// cdi: the runtime applies the CDI specs, so the driver's environment
	// variable shows inside the container.
	cdi bool
}

// pickDRARuntime is containerd 2.x with CDI for a test that asks for it
// (the shared containerd where ACTORLET_CONTAINERD_LINE=2, else one of the
// test's own, built by deploy/local/containerd.sh build --line 2), else the
// sim runtime reading the driver's CDI specs from a directory of the test
// (sim://?cdi-spec-dirs=). Either way the runtime applies the specs, so the
// driver's environment variable shows inside the container.
func pickDRARuntime(t *testing.T, containerd2 bool) draRuntime {
	t.Helper()
	if !containerd2 {
		dir := t.TempDir()
		return draRuntime{endpoint: "sim://?cdi-spec-dirs=" + dir, image: simImage, cdiDir: dir, cdi: true}
	}
	env := testenv.ContainerdOnLine(t, 2, "aldra2", "10.244.186.0/24")
	if env.CDISpecDir == "" {
		t.Fatal("deploy/local/containerd.sh printed no CDI_SPEC_DIR for its line 2: this containerd cannot do CDI")
	}
	return draRuntime{endpoint: env.Endpoint, image: env.BusyboxImage, cdiDir: env.CDISpecDir, cdi: true}
}

// draNode is an agent joined as a node with the test driver registered.
type draNode struct {
	c     *cluster
	a     *agent
	name  string
	rt    draRuntime
	drv   *testenv.DRADriver
	class string // a DeviceClass selecting the driver's devices
	tmpl  string // a ResourceClaimTemplate of one device of class
}

// startDRANode joins an agent as node name, starts the test driver against
// its root directory (with driverArgs) and waits until the agent has
// registered it, and creates a DeviceClass and a ResourceClaimTemplate for
// its devices. Everything goes when the test ends.
func startDRANode(t *testing.T, name string, containerd2 bool, driverArgs ...string) *draNode {
	t.Helper()
	c := newCluster(t)
	rt := pickDRARuntime(t, containerd2)
	// Short: the driver's sockets live under it (108-byte limit).
	root, err := os.MkdirTemp("", "dra-")
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { _ = os.RemoveAll(root) })
	ip := nonLoopbackIPv4(t) // the API server proxies kubectl logs to the node
	a := c.startNode(t, name, agentOpts{endpoint: rt.endpoint, rootDir: root, extra: []string{"--node-ip", ip, "--address", ip}})
	a.host = ip
	c.waitNodeReady(t, name, v1.ConditionTrue, time.Minute)
	drv := testenv.StartDRADriver(t, testenv.DRADriverOpts{
		Name: draDriverName, Node: name, Kubeconfig: testenv.NodeKubeconfig(t, name),
		RootDir: root, CDIDir: rt.cdiDir, Devices: 2, Extra: driverArgs,
	})
	drv.WaitRegistered(t, time.Minute)
	n := &draNode{c: c, a: a, name: name, rt: rt, drv: drv}
	n.class = n.deviceClass(t, name, draDriverName)
	n.tmpl = n.claimTemplate(t, name, n.class)
	return n
}

// deviceClass creates a DeviceClass selecting driver's devices.
func (n *draNode) deviceClass(t *testing.T, name, driver string) string {
	t.Helper()
	ctx := context.Background()
	dc := &resourceapi.DeviceClass{
		ObjectMeta: metav1.ObjectMeta{Name: name},
		Spec: resourceapi.DeviceClassSpec{Selectors: []resourceapi.DeviceSelector{{
			CEL: &resourceapi.CELDeviceSelector{Expression: fmt.Sprintf("device.driver == %q", driver)},
		}}},
	}
	_ = n.c.cs.ResourceV1().DeviceClasses().Delete(ctx, name, metav1.DeleteOptions{}) // a leftover of an earlier run
	if _, err := n.c.cs.ResourceV1().DeviceClasses().Create(ctx, dc, metav1.CreateOptions{}); err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() {
		_ = n.c.cs.ResourceV1().DeviceClasses().Delete(context.Background(), name, metav1.DeleteOptions{})
	})
	return name
}

// claimTemplate creates a ResourceClaimTemplate in default: one device
// (request "dev") of class.
func (n *draNode) claimTemplate(t *testing.T, name, class string) string {
	t.Helper()
	ctx := context.Background()
	tmpl := &resourceapi.ResourceClaimTemplate{
		ObjectMeta: metav1.ObjectMeta{Name: name, Namespace: "default"},
		Spec: resourceapi.ResourceClaimTemplateSpec{Spec: resourceapi.ResourceClaimSpec{Devices: resourceapi.DeviceClaim{
			Requests: []resourceapi.DeviceRequest{{Name: "dev", Exactly: &resourceapi.ExactDeviceRequest{DeviceClassName: class}}},
		}}},
	}
	api := n.c.cs.ResourceV1().ResourceClaimTemplates("default")
	_ = api.Delete(ctx, name, metav1.DeleteOptions{})
	if _, err := api.Create(ctx, tmpl, metav1.CreateOptions{}); err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { _ = api.Delete(context.Background(), name, metav1.DeleteOptions{}) })
	return name
}

// createPod creates a pod for kube-scheduler to place on the node: one
// container printing the driver's variables, with a claim from tmpl.
func (n *draNode) createPod(t *testing.T, name, image, tmpl string) {
	t.Helper()
	p := apiPod(name, "", image, "sh", "-c", `echo "DRA_DEV_0=$DRA_DEV_0"; echo "DRA_DEV_1=$DRA_DEV_1"; sleep 3600`)
	p.Spec.NodeSelector = map[string]string{"kubernetes.io/hostname": n.name}
	p.Spec.ResourceClaims = []v1.PodResourceClaim{{Name: "dev", ResourceClaimTemplateName: ptr.To(tmpl)}}
	p.Spec.Containers[0].Resources.Claims = []v1.ResourceClaim{{Name: "dev"}}
	pods := n.c.cs.CoreV1().Pods("default")
	if _, err := pods.Create(context.Background(), p, metav1.CreateOptions{}); err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() {
		zero := int64(0)
		_ = pods.Delete(context.Background(), name, metav1.DeleteOptions{GracePeriodSeconds: &zero})
	})
}

// claimOf waits until kube-scheduler has placed pod on the node and the
// claim made for it is allocated and reserved for it, and returns that claim.
func (n *draNode) claimOf(t *testing.T, pod string) *resourceapi.ResourceClaim {
	t.Helper()
	ctx := context.Background()
	var claim *resourceapi.ResourceClaim
	testenv.WaitFor(t, time.Minute, pod+": scheduled to "+n.name+" with its claim allocated and reserved", func() (bool, error) {
		p, err := n.c.cs.CoreV1().Pods("default").Get(ctx, pod, metav1.GetOptions{})
		if err != nil {
			return false, err
		}
		if p.Spec.NodeName != n.name || len(p.Status.ResourceClaimStatuses) != 1 || p.Status.ResourceClaimStatuses[0].ResourceClaimName == nil {
			return false, fmt.Errorf("node %q claim statuses %v", p.Spec.NodeName, p.Status.ResourceClaimStatuses)
		}
		c, err := n.c.cs.ResourceV1().ResourceClaims("default").Get(ctx, *p.Status.ResourceClaimStatuses[0].ResourceClaimName, metav1.GetOptions{})
		if err != nil {
			return false, err
		}
		claim = c
		reserved := slices.ContainsFunc(c.Status.ReservedFor, func(r resourceapi.ResourceClaimConsumerReference) bool { return r.UID == p.UID })
		return c.Status.Allocation != nil && reserved, fmt.Errorf("allocation %v reservedFor %v", c.Status.Allocation, c.Status.ReservedFor)
	})
	return claim
}

// allocatedDevice is the one device of claim, checked to be driver's on
// this node.
func (n *draNode) allocatedDevice(t *testing.T, claim *resourceapi.ResourceClaim, driver string) string {
	t.Helper()
	rs := claim.Status.Allocation.Devices.Results
	if len(rs) != 1 || rs[0].Driver != driver || rs[0].Pool != n.name || rs[0].Request != "dev" {
		t.Fatalf("claim %s allocated %+v, want one device of %s in pool %s", claim.Name, rs, driver, n.name)
	}
	return rs[0].Device
}

// waitCalls waits until the driver has made want calls of op for the
// claim of uid, and fails on more.
func (n *draNode) waitCalls(t *testing.T, op, uid string, want int) []testenv.DRADriverCall {
	t.Helper()
	got := n.waitCallsAtLeast(t, op, uid, want)
	if len(got) != want {
		t.Fatalf("%d %s calls for claim %s, want %d: %+v", len(got), op, uid, want, got)
	}
	return got
}

// waitCallsAtLeast waits until the driver has made at least want calls
// of op for the claim of uid (the agent retries failed prepares).
func (n *draNode) waitCallsAtLeast(t *testing.T, op, uid string, want int) []testenv.DRADriverCall {
	t.Helper()
	var got []testenv.DRADriverCall
	testenv.WaitFor(t, time.Minute, fmt.Sprintf("%d %s call(s) for claim %s", want, op, uid), func() (bool, error) {
		var err error
		got, err = n.drv.CallsFor(op, uid)
		return len(got) >= want, err
	})
	return got
}

// checkEnv checks, where the runtime applies CDI specs, that the
// container's log shows DRA_<DEVICE>=default/<claim>.
func (n *draNode) checkEnv(t *testing.T, pod, device, claim string) {
	t.Helper()
	if !n.rt.cdi {
		t.Logf("the sim runtime does not apply CDI specs: %s's environment not checked", pod)
		return
	}
	want := fmt.Sprintf("DRA_%s=default/%s", strings.ToUpper(strings.ReplaceAll(device, "-", "_")), claim)
	testenv.WaitFor(t, 30*time.Second, pod+"'s log showing "+want, func() (bool, error) {
		out, err := n.c.cs.CoreV1().Pods("default").GetLogs(pod, &v1.PodLogOptions{}).DoRaw(context.Background())
		if err != nil {
			return false, err
		}
		return slices.Contains(strings.Split(string(out), "\n"), want), fmt.Errorf("log %q", out)
	})
}

// deleteAndWaitGone deletes pod and waits until the API has no such pod.
func (n *draNode) deleteAndWaitGone(t *testing.T, pod string) {
	t.Helper()
	ctx := context.Background()
	if err := n.c.cs.CoreV1().Pods("default").Delete(ctx, pod, metav1.DeleteOptions{}); err != nil {
		t.Fatal(err)
	}
	testenv.WaitFor(t, time.Minute, pod+" deleted from the API", func() (bool, error) {
		_, err := n.c.cs.CoreV1().Pods("default").Get(ctx, pod, metav1.GetOptions{})
		return apierrors.IsNotFound(err), err
	})
}

// noSpecsLeft waits until the driver's CDI directory holds no spec: every
// prepared claim unprepared.
func (n *draNode) noSpecsLeft(t *testing.T) {
	t.Helper()
	testenv.WaitFor(t, time.Minute, "no CDI spec of the driver left", func() (bool, error) {
		specs, err := n.drv.Specs()
		return err == nil && len(specs) == 0, fmt.Errorf("specs %v (%v)", specs, err)
	})
}

// waitEvent waits for a Warning event of reason on pod whose message
// contains msg (in any case), and returns it.
func (n *draNode) waitEvent(t *testing.T, timeout time.Duration, pod, reason, msg string) v1.Event {
	t.Helper()
	var ev v1.Event
	testenv.WaitFor(t, timeout, fmt.Sprintf("a %s event on %s naming %q", reason, pod, msg), func() (bool, error) {
		evs, err := n.c.cs.CoreV1().Events("default").List(context.Background(), metav1.ListOptions{FieldSelector: "involvedObject.name=" + pod})
		if err != nil {
			return false, err
		}
		var seen []string
		for _, e := range evs.Items {
			if e.Reason == reason && e.Type == v1.EventTypeWarning && strings.Contains(strings.ToLower(e.Message), strings.ToLower(msg)) {
				ev = e
				return true, nil
			}
			seen = append(seen, e.Reason+": "+e.Message)
		}
		return false, fmt.Errorf("events %q", seen)
	})
	return ev
}

func containerWaiting(p *v1.Pod, reason string) bool {
	return p.Status.Phase == v1.PodPending && len(p.Status.ContainerStatuses) == 1 &&
		p.Status.ContainerStatuses[0].State.Waiting != nil && p.Status.ContainerStatuses[0].State.Waiting.Reason == reason
}

// A pod with a claim: kube-scheduler allocates one of the driver's
// devices on the node and reserves the claim for the pod, the agent has the
// driver prepare it once before the container starts, the CDI device's
// variable is in the container, and the claim is unprepared (its CDI spec
// gone) after the pod is deleted.
func TestE2EClusterDRAPodWithClaim(t *testing.T) {
	n := startDRANode(t, "e2e-dra", true)
	ctx := context.Background()

	// The driver's ResourceSlice, as kube-scheduler sees it.
	testenv.WaitFor(t, time.Minute, "the driver's ResourceSlice for e2e-dra", func() (bool, error) {
		l, err := n.c.cs.ResourceV1().ResourceSlices().List(ctx, metav1.ListOptions{FieldSelector: "spec.nodeName=e2e-dra,spec.driver=" + draDriverName})
		if err != nil {
			return false, err
		}
		return len(l.Items) == 1 && len(l.Items[0].Spec.Devices) == 2, fmt.Errorf("%d slices", len(l.Items))
	})

	n.createPod(t, "with-claim", n.rt.image, n.tmpl)
	claim := n.claimOf(t, "with-claim")
	dev := n.allocatedDevice(t, claim, draDriverName)
	n.c.waitPod(t, "default", "with-claim", "Running", 2*time.Minute, isRunning)
	prep := n.waitCalls(t, "prepare", string(claim.UID), 1)[0]
	if want := draDriverName + "/dev=" + string(claim.UID) + "-" + dev; !slices.Equal(prep.CDI, []string{want}) || prep.Claim != "default/"+claim.Name {
		t.Errorf("prepare %+v, want claim default/%s, CDI device %s", prep, claim.Name, want)
	}
	n.checkEnv(t, "with-claim", dev, claim.Name)
	if specs, err := n.drv.Specs(); err != nil || len(specs) != 1 {
		t.Errorf("CDI specs while the pod runs: %v %v", specs, err)
	}

	n.deleteAndWaitGone(t, "with-claim")
	n.waitCalls(t, "unprepare", string(claim.UID), 1)
	n.noSpecsLeft(t)
	n.waitCalls(t, "prepare", string(claim.UID), 1) // still one
	// The claim made from the template goes with its pod
	// (kube-controller-manager's resource claim controller).
	testenv.WaitFor(t, time.Minute, "claim "+claim.Name+" deleted", func() (bool, error) {
		_, err := n.c.cs.ResourceV1().ResourceClaims("default").Get(ctx, claim.Name, metav1.GetOptions{})
		return apierrors.IsNotFound(err), err
	})
}

// kill -9 of the agent after its claim was prepared and before the
// container started (the image cannot be pulled until the test fixes it):
// the restarted agent neither prepares the claim again nor loses it, the
// pod runs with its device once the image is right, and the claim is
// unprepared once after the pod is deleted.
func TestE2EClusterDRAPreparedClaimSurvivesAgentKill(t *testing.T) {
	n := startDRANode(t, "e2e-dra-kill", true)
	ctx := context.Background()
	n.createPod(t, "prepared", "registry.invalid/actorlet/absent:1", n.tmpl)
	claim := n.claimOf(t, "prepared")
	dev := n.allocatedDevice(t, claim, draDriverName)
	n.waitCalls(t, "prepare", string(claim.UID), 1)
	n.c.waitPod(t, "default", "prepared", "waiting on its image", time.Minute, func(p *v1.Pod) bool {
		return containerWaiting(p, "ErrImagePull") || containerWaiting(p, "ImagePullBackOff")
	})

	n.a.kill9()
	n.a.start()
	// The new agent takes the driver in again (its registration socket
	// is still there).
	testenv.WaitFor(t, time.Minute, "the restarted agent to register the driver again", func() (bool, error) {
		calls, err := n.drv.Calls()
		reg := 0
		for _, c := range calls {
			if c.Op == "registered" {
				reg++
			}
		}
		return reg >= 2, err
	})

	// The agent writes the pod's status meanwhile: a conflict is read
	// again and retried.
	if err := retry.RetryOnConflict(retry.DefaultRetry, func() error {
		p, err := n.c.cs.CoreV1().Pods("default").Get(ctx, "prepared", metav1.GetOptions{})
		if err != nil {
			return err
		}
		p.Spec.Containers[0].Image = n.rt.image
		_, err = n.c.cs.CoreV1().Pods("default").Update(ctx, p, metav1.UpdateOptions{})
		return err
	}); err != nil {
		t.Fatal(err)
	}
	n.c.waitPod(t, "default", "prepared", "Running with the right image", 2*time.Minute, isRunning)
	n.checkEnv(t, "prepared", dev, claim.Name)
	if calls, err := n.drv.CallsFor("prepare", string(claim.UID)); err != nil || len(calls) != 1 {
		t.Errorf("prepare calls across the kill: %+v (%v), want the one before it", calls, err)
	}
	if calls, err := n.drv.CallsFor("unprepare", string(claim.UID)); err != nil || len(calls) != 0 {
		t.Errorf("unprepare calls while the pod runs: %+v (%v)", calls, err)
	}

	n.deleteAndWaitGone(t, "prepared")
	n.waitCalls(t, "unprepare", string(claim.UID), 1)
	n.noSpecsLeft(t)
	if calls, err := n.drv.CallsFor("prepare", string(claim.UID)); err != nil || len(calls) != 1 {
		t.Errorf("prepare calls at the end: %+v (%v)", calls, err)
	}
}

// Bad input: a claim of a driver that is not registered on the node, a
// driver that answers an error, a driver that does not answer in time. The pod waits in ContainerCreating with a
// FailedPrepareDynamicResources event naming the reason; nothing is left
// prepared when it is deleted; the unregistered driver's pod runs once the
// driver registers.
func TestE2EClusterDRABadInput(t *testing.T) {
	n := startDRANode(t, "e2e-dra-bad", false, "--fail-prepare-for", "refused")

	t.Run("driver answers an error", func(t *testing.T) {
		n.createPod(t, "refused", n.rt.image, n.tmpl)
		claim := n.claimOf(t, "refused")
		n.waitCallsAtLeast(t, "prepare-failed", string(claim.UID), 1)
		n.waitEvent(t, time.Minute, "refused", "FailedPrepareDynamicResources", "--fail-prepare-for=refused")
		n.c.waitPod(t, "default", "refused", "waiting in ContainerCreating", time.Minute, func(p *v1.Pod) bool {
			return containerWaiting(p, "ContainerCreating")
		})
		n.deleteAndWaitGone(t, "refused")
		n.noSpecsLeft(t)
		if calls, err := n.drv.CallsFor("prepare", string(claim.UID)); err != nil || len(calls) != 0 {
			t.Errorf("a refused claim was prepared: %+v (%v)", calls, err)
		}
	})

	t.Run("driver times out", func(t *testing.T) {
		// A driver that never answers in time: the agent gives up on
		// the call (upstream's kubelet after 45 s), the pod waits.
		const slow = "slow.actorlet.dev"
		drv := testenv.StartDRADriver(t, testenv.DRADriverOpts{
			Name: slow, Node: n.name, Kubeconfig: testenv.NodeKubeconfig(t, n.name), RootDir: n.a.rootDir,
			CDIDir: n.rt.cdiDir, Devices: 1, Extra: []string{"--prepare-delay", "10m"},
		})
		drv.WaitRegistered(t, time.Minute)
		tmpl := n.claimTemplate(t, "e2e-dra-slow", n.deviceClass(t, "e2e-dra-slow", slow))
		n.createPod(t, "slow", n.rt.image, tmpl)
		claim := n.claimOf(t, "slow")
		n.waitEvent(t, 2*time.Minute, "slow", "FailedPrepareDynamicResources", "deadline")
		g := &draNode{c: n.c, name: n.name, rt: n.rt, drv: drv}
		g.waitCallsAtLeast(t, "prepare-abandoned", string(claim.UID), 1)
		n.c.waitPod(t, "default", "slow", "waiting in ContainerCreating", time.Minute, func(p *v1.Pod) bool {
			return containerWaiting(p, "ContainerCreating")
		})
		n.deleteAndWaitGone(t, "slow")
		g.noSpecsLeft(t)
		if calls, err := drv.CallsFor("prepare", string(claim.UID)); err != nil || len(calls) != 0 {
			t.Errorf("a claim whose prepare timed out was prepared: %+v (%v)", calls, err)
		}
	})

	t.Run("driver not registered", func(t *testing.T) {
		// A second driver publishes its devices for the node but
		// registers elsewhere: kube-scheduler allocates its devices, the
		// agent does not know it.
		const ghost = "ghost.actorlet.dev"
		elsewhere, err := os.MkdirTemp("", "dra-ghost-")
		if err != nil {
			t.Fatal(err)
		}
		t.Cleanup(func() { _ = os.RemoveAll(elsewhere) })
		kubeconfig := testenv.NodeKubeconfig(t, n.name)
		unregistered := testenv.StartDRADriver(t, testenv.DRADriverOpts{Name: ghost, Node: n.name, Kubeconfig: kubeconfig, RootDir: elsewhere, Devices: 1})
		class := n.deviceClass(t, "e2e-dra-ghost", ghost)
		tmpl := n.claimTemplate(t, "e2e-dra-ghost", class)

		n.createPod(t, "unregistered", n.rt.image, tmpl)
		claim := n.claimOf(t, "unregistered")
		dev := n.allocatedDevice(t, claim, ghost)
		n.waitEvent(t, time.Minute, "unregistered", "FailedPrepareDynamicResources", ghost)
		n.c.waitPod(t, "default", "unregistered", "waiting in ContainerCreating", time.Minute, func(p *v1.Pod) bool {
			return containerWaiting(p, "ContainerCreating")
		})

		// The driver comes to the node: the pod waited, now it runs.
		unregistered.Stop()
		root := n.a.rootDir
		registered := testenv.StartDRADriver(t, testenv.DRADriverOpts{Name: ghost, Node: n.name, Kubeconfig: kubeconfig, RootDir: root, CDIDir: n.rt.cdiDir, Devices: 1})
		registered.WaitRegistered(t, time.Minute)
		n.c.waitPod(t, "default", "unregistered", "Running once its driver registered", 2*time.Minute, isRunning)
		g := &draNode{c: n.c, name: n.name, rt: n.rt, drv: registered}
		g.waitCalls(t, "prepare", string(claim.UID), 1)
		g.checkEnv(t, "unregistered", dev, claim.Name)
		g.deleteAndWaitGone(t, "unregistered")
		g.waitCalls(t, "unprepare", string(claim.UID), 1)
		g.noSpecsLeft(t)
	})

	t.Run("deleted while waiting on an unregistered driver", func(t *testing.T) {
		const absent = "absent.actorlet.dev"
		elsewhere, err := os.MkdirTemp("", "dra-absent-")
		if err != nil {
			t.Fatal(err)
		}
		t.Cleanup(func() { _ = os.RemoveAll(elsewhere) })
		drv := testenv.StartDRADriver(t, testenv.DRADriverOpts{Name: absent, Node: n.name, Kubeconfig: testenv.NodeKubeconfig(t, n.name), RootDir: elsewhere, Devices: 1})
		class := n.deviceClass(t, "e2e-dra-absent", absent)
		tmpl := n.claimTemplate(t, "e2e-dra-absent", class)
		n.createPod(t, "abandoned", n.rt.image, tmpl)
		n.claimOf(t, "abandoned")
		n.waitEvent(t, time.Minute, "abandoned", "FailedPrepareDynamicResources", absent)
		n.deleteAndWaitGone(t, "abandoned")
		if calls, err := drv.Calls(); err != nil || len(calls) != 0 {
			t.Errorf("the driver the agent never registered was called: %+v (%v)", calls, err)
		}
		// The agent still serves pods (the failure stayed with the pod).
		n.createPod(t, "after", n.rt.image, n.tmpl)
		n.c.waitPod(t, "default", "after", "Running", 2*time.Minute, isRunning)
	})
}
