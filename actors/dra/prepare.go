package dra

import (
	"context"
	"errors"
	"fmt"
	"maps"
	"slices"
	"strings"

	"github.com/asynkron/protoactor-go/actor"
	v1 "k8s.io/api/core/v1"
	resourceapi "k8s.io/api/resource/v1"
	"k8s.io/apimachinery/pkg/api/resource"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/types"
	drapb "k8s.io/kubelet/pkg/apis/dra/v1"

	"github.com/actorlet/actorlet/internal/actorkit"
	"github.com/actorlet/actorlet/messages"
)

// errClaimNotFound: a claim made from a template is not in the pod's
// status yet (upstream's resourceclaim.ErrClaimNotFound).
var errClaimNotFound = errors.New("ResourceClaim not created yet")

// HasClaims reports whether a pod uses ResourceClaims: its own, or the
// claim of its DRA-backed extended resources.
func HasClaims(p *v1.Pod) bool {
	return len(p.Spec.ResourceClaims) > 0 || p.Status.ExtendedResourceClaimStatus != nil
}

// podClaims is the pod's claims: spec.resourceClaims and, for extended
// resources backed by DRA, the special claim in the pod's status.
func podClaims(p *v1.Pod) []v1.PodResourceClaim {
	out := append([]v1.PodResourceClaim(nil), p.Spec.ResourceClaims...)
	if s := p.Status.ExtendedResourceClaimStatus; s != nil {
		name := s.ResourceClaimName
		out = append(out, v1.PodResourceClaim{ResourceClaimName: &name})
	}
	return out
}

// claimName is the name of the ResourceClaim a pod claim stands for
// (upstream's resourceclaim.Name): nil when the template made none (no
// claim needed); mustCheckOwner for one made from a template.
func claimName(p *v1.Pod, pc *v1.PodResourceClaim) (name *string, mustCheckOwner bool, err error) {
	switch {
	case pc.ResourceClaimName != nil:
		return pc.ResourceClaimName, false, nil
	case pc.ResourceClaimTemplateName != nil:
		for _, s := range p.Status.ResourceClaimStatuses {
			if s.Name == pc.Name {
				return s.ResourceClaimName, true, nil
			}
		}
		return nil, false, fmt.Errorf(`pod "%s/%s": %w`, p.Namespace, p.Name, errClaimNotFound)
	default:
		return nil, false, fmt.Errorf(`pod "%s/%s", spec.resourceClaim %q: none of the supported fields are set`, p.Namespace, p.Name, pc.Name)
	}
}

// handlePrepare starts preparing a pod's claims, or joins the preparation
// in flight.
func (a *Actor) handlePrepare(m *messages.PrepareClaims) {
	p := m.Pod
	if p == nil || m.ReplyTo == nil {
		return
	}
	if !HasClaims(p) {
		a.self.SendTo(m.ReplyTo, &messages.ClaimsPrepared{UID: p.UID, Containers: map[string][]string{}})
		return
	}
	if op := a.ops[p.UID]; op != nil {
		if op.unprepare {
			a.self.SendTo(m.ReplyTo, failure(p.UID, errors.New("the pod's claims are being unprepared")))
			return
		}
		op.waiters = append(op.waiters, m.ReplyTo)
		return
	}
	delete(a.gone, p.UID) // the pod is back (a kill that did not happen)
	a.ops[p.UID] = &podOp{pod: p, waiters: []*actor.PID{m.ReplyTo}, start: a.cfg.Clock.Now()}
	getter := a.cfg.Claims
	actorkit.GoIn(a.self, a.ctx, a.cfg.APITimeout, func(ctx context.Context) *fetched {
		claims, err := fetchClaims(ctx, getter, p)
		return &fetched{uid: p.UID, claims: claims, err: err}
	})
}

// fetchClaims reads the pod's claims and checks each is for the pod and
// reserved for it (off the mailbox).
func fetchClaims(ctx context.Context, getter ClaimGetter, p *v1.Pod) ([]*resourceapi.ResourceClaim, error) {
	if getter == nil {
		return nil, errors.New("no API server to read ResourceClaims from (standalone mode)")
	}
	var out []*resourceapi.ResourceClaim
	pcs := podClaims(p)
	for i := range pcs {
		name, mustCheckOwner, err := claimName(p, &pcs[i])
		if err != nil {
			return nil, err
		}
		if name == nil {
			continue
		}
		c, err := getter.GetClaim(ctx, p.Namespace, *name)
		if err != nil {
			return nil, fmt.Errorf("fetch ResourceClaim %s: %w", *name, err)
		}
		if mustCheckOwner && !metav1.IsControlledBy(c, p) {
			return nil, fmt.Errorf("ResourceClaim %s/%s was not created for Pod %s/%s (Pod is not owner)", c.Namespace, c.Name, p.Namespace, p.Name)
		}
		if !slices.ContainsFunc(c.Status.ReservedFor, func(r resourceapi.ResourceClaimConsumerReference) bool { return r.UID == p.UID }) {
			return nil, fmt.Errorf("pod %s (%s) is not allowed to use ResourceClaim %s (%s)", p.Name, p.UID, *name, c.UID)
		}
		out = append(out, c)
	}
	return out, nil
}

// newClaimInfo is a claim's record from its allocation, before its
// drivers prepared it.
func newClaimInfo(c *resourceapi.ResourceClaim) (*claimInfo, error) {
	if c.Status.Allocation == nil {
		return nil, fmt.Errorf("ResourceClaim %s: not allocated", c.Name)
	}
	ci := &claimInfo{UID: c.UID, Namespace: c.Namespace, Name: c.Name, Pods: map[types.UID]bool{}, Drivers: map[string]*driverState{}}
	for _, r := range c.Status.Allocation.Devices.Results {
		if r.Driver == "" {
			return nil, fmt.Errorf("ResourceClaim %s: DRA driver name is empty", c.Name)
		}
		ds := ci.Drivers[r.Driver]
		if ds == nil {
			ds = &driverState{}
			ci.Drivers[r.Driver] = ds
		}
		d := device{Pool: r.Pool, Device: r.Device, Requests: []string{baseRequest(r.Request)}}
		if r.ShareID != nil {
			d.ShareID = string(*r.ShareID)
		}
		ds.Devices = append(ds.Devices, d)
	}
	return ci, nil
}

// baseRequest strips a subrequest ("req/sub" -> "req"), as upstream's
// BaseRequestRef.
func baseRequest(r string) string {
	if i := strings.IndexByte(r, '/'); i >= 0 {
		return r[:i]
	}
	return r
}

// handleFetched checks the drivers and the record, adds the pod to its
// claims (checkpointed: a pod deleted before its claims are prepared is
// unprepared), then calls the drivers of the claims not prepared yet.
func (a *Actor) handleFetched(m *fetched) {
	op := a.ops[m.uid]
	if op == nil || op.unprepare {
		return
	}
	if m.err != nil {
		a.finishPrepare(m.uid, m.err, "")
		return
	}
	// Validation first, without touching the record: a pod that fails
	// here leaves nothing to unprepare (its driver may never come).
	infos := make([]*claimInfo, len(m.claims))
	for i, c := range m.claims {
		ci, err := newClaimInfo(c)
		if err != nil {
			a.finishPrepare(m.uid, err, "")
			return
		}
		for _, name := range slices.Sorted(maps.Keys(ci.Drivers)) {
			if a.driver(name) == nil {
				a.finishPrepare(m.uid, fmt.Errorf("DRA driver %s is not registered", name), name)
				return
			}
		}
		if old := a.claims[claimKey(c.Namespace, c.Name)]; old != nil {
			if old.UID != c.UID {
				a.finishPrepare(m.uid, fmt.Errorf("old ResourceClaim with same name %s and different UID %s still exists (previous pod force-deleted?!)", c.Name, old.UID), "")
				return
			}
			if old.unpreparing {
				a.finishPrepare(m.uid, fmt.Errorf("ResourceClaim %s is being unprepared", c.Name), "")
				return
			}
		}
		infos[i] = ci
	}
	batches := map[string][]*drapb.Claim{}
	for _, ci := range infos {
		key := claimKey(ci.Namespace, ci.Name)
		rec := a.claims[key]
		if rec == nil {
			rec = ci
			a.claims[key] = rec
		}
		rec.Pods[m.uid] = true
		if rec.Prepared {
			continue
		}
		for name := range rec.Drivers {
			batches[name] = append(batches[name], &drapb.Claim{Namespace: rec.Namespace, Uid: string(rec.UID), Name: rec.Name})
		}
	}
	if err := a.save(); err != nil {
		a.finishPrepare(m.uid, err, "")
		return
	}
	if len(batches) == 0 {
		a.finishPrepare(m.uid, nil, "")
		return
	}
	calls := map[string]Driver{}
	for name := range batches {
		calls[name] = a.driver(name).drv
	}
	actorkit.GoIn(a.self, a.ctx, 0, func(ctx context.Context) *prepared {
		out := &prepared{uid: m.uid}
		for _, name := range slices.Sorted(maps.Keys(batches)) {
			claims := batches[name]
			resp, err := calls[name].Prepare(ctx, claims)
			if err != nil {
				out.err, out.driver = fmt.Errorf("NodePrepareResources: %w", err), name
				return out
			}
			out.results = append(out.results, driverResult{driver: name, resp: resp})
			for uid, r := range resp.GetClaims() {
				i := slices.IndexFunc(claims, func(c *drapb.Claim) bool { return c.Uid == uid })
				if i < 0 {
					out.err, out.driver = fmt.Errorf("NodePrepareResources returned result for unknown claim UID %s", uid), name
					return out
				}
				if r.GetError() != "" {
					out.err, out.driver = fmt.Errorf("NodePrepareResources failed for ResourceClaim %s: %s", claims[i].Name, r.GetError()), name
					return out
				}
			}
			if n := len(claims) - len(resp.GetClaims()); n != 0 {
				out.err, out.driver = fmt.Errorf("NodePrepareResources skipped %d ResourceClaims", n), name
				return out
			}
		}
		return out
	})
}

// handlePrepared records the devices the drivers answered and, when all
// succeeded, marks the claims prepared.
func (a *Actor) handlePrepared(m *prepared) {
	op := a.ops[m.uid]
	if op == nil {
		return
	}
	byUID := map[string]*claimInfo{}
	for _, c := range a.claims {
		byUID[string(c.UID)] = c
	}
	for _, r := range m.results {
		for uid, res := range r.resp.GetClaims() {
			ci := byUID[uid]
			if ci == nil || res.GetError() != "" {
				continue
			}
			ds := &driverState{}
			for _, d := range res.GetDevices() {
				dev := device{Pool: d.GetPoolName(), Device: d.GetDeviceName(), Requests: d.GetRequestNames(), CDI: d.GetCdiDeviceIds()}
				if d.ShareId != nil {
					dev.ShareID = d.GetShareId()
				}
				ds.Devices = append(ds.Devices, dev)
			}
			ci.Drivers[r.driver] = ds
		}
	}
	if m.err == nil {
		for _, c := range a.claims {
			if c.Pods[m.uid] {
				c.Prepared = true
			}
		}
	}
	if err := a.save(); err != nil && m.err == nil {
		m.err = err
	}
	a.finishPrepare(m.uid, m.err, m.driver)
}

// failure is the answer of a preparation that failed.
func failure(uid types.UID, err error) *messages.ClaimsPrepared {
	return &messages.ClaimsPrepared{UID: uid, Reason: messages.ReasonFailedPrepareDynamicResources,
		Message: "prepare dynamic resources: " + err.Error()}
}

// finishPrepare answers the pod's waiters and ends its op; a kill that
// came meanwhile unprepares now.
func (a *Actor) finishPrepare(uid types.UID, err error, driver string) {
	op := a.ops[uid]
	delete(a.ops, uid)
	if op == nil {
		return
	}
	if a.cfg.Metrics != nil {
		a.cfg.Metrics.ObserveOperation(opPrepare, a.cfg.Clock.Since(op.start), err != nil)
	}
	var ans *messages.ClaimsPrepared
	if err != nil {
		a.driverError(driver, "NodePrepareResources")
		a.log.Info("claims not prepared: the pod waits", "pod", op.pod.Namespace+"/"+op.pod.Name, "uid", uid, "err", err)
		ans = failure(uid, err)
	} else {
		ans = &messages.ClaimsPrepared{UID: uid, Containers: a.containerCDI(op.pod)}
		a.log.Debug("claims prepared", "pod", op.pod.Namespace+"/"+op.pod.Name, "uid", uid)
		ref := &podRef{pod: op.pod, to: op.waiters[len(op.waiters)-1]}
		if old := a.pods[uid]; old != nil {
			ref.sent = old.sent
		}
		a.pods[uid] = ref
	}
	for _, to := range op.waiters {
		a.self.SendTo(to, ans)
	}
	if err == nil {
		a.sendHealth(uid, false)
	}
	if _, ok := a.gone[uid]; ok {
		a.handleUnprepare(uid)
	}
}

// containerCDI maps the prepared devices to the containers that use them:
// by container.resources.claims (a claim, or one request of it) and, for
// DRA-backed extended resources, by the pod's request mappings.
func (a *Actor) containerCDI(p *v1.Pod) map[string][]string {
	out := map[string][]string{}
	for _, c := range allContainers(p) {
		var ids []string
		for claim, requests := range containerRequests(p, c) {
			ci := a.claims[claimKey(p.Namespace, claim)]
			if ci == nil {
				continue
			}
			for _, req := range requests {
				for _, name := range slices.Sorted(maps.Keys(ci.Drivers)) {
					for _, d := range ci.Drivers[name].Devices {
						if req != "" && !slices.Contains(d.Requests, baseRequest(req)) {
							continue
						}
						for _, id := range d.CDI {
							if !slices.Contains(ids, id) {
								ids = append(ids, id)
							}
						}
					}
				}
			}
		}
		if len(ids) > 0 {
			out[c.Name] = ids
		}
	}
	return out
}

// allContainers are the pod's init and regular containers.
func allContainers(p *v1.Pod) []*v1.Container {
	var out []*v1.Container
	for i := range p.Spec.InitContainers {
		out = append(out, &p.Spec.InitContainers[i])
	}
	for i := range p.Spec.Containers {
		out = append(out, &p.Spec.Containers[i])
	}
	return out
}

// containerRequests is what a container uses, by ResourceClaim name: the
// requests named ("" for the whole claim).
func containerRequests(p *v1.Pod, c *v1.Container) map[string][]string {
	out := map[string][]string{}
	for _, rc := range c.Resources.Claims {
		for i := range p.Spec.ResourceClaims {
			if p.Spec.ResourceClaims[i].Name != rc.Name {
				continue
			}
			name, _, err := claimName(p, &p.Spec.ResourceClaims[i])
			if err == nil && name != nil {
				out[*name] = append(out[*name], rc.Request)
			}
		}
	}
	if s := p.Status.ExtendedResourceClaimStatus; s != nil {
		for _, rm := range s.RequestMappings {
			q, ok := c.Resources.Requests[v1.ResourceName(rm.ResourceName)]
			if !ok {
				q = c.Resources.Limits[v1.ResourceName(rm.ResourceName)]
			}
			if rm.ContainerName == c.Name && !isZero(q) {
				out[s.ResourceClaimName] = append(out[s.ResourceClaimName], rm.RequestName)
			}
		}
	}
	return out
}

func isZero(q resource.Quantity) bool { return q.IsZero() }
