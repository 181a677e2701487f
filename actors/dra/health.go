package dra

import (
	"context"
	"errors"
	"fmt"
	"maps"
	"slices"
	"strings"
	"time"

	"google.golang.org/grpc/codes"
	"google.golang.org/grpc/status"
	v1 "k8s.io/api/core/v1"
	"k8s.io/apimachinery/pkg/types"
	drahealthv1 "k8s.io/kubelet/pkg/apis/dra-health/v1"

	"github.com/actorlet/actorlet/messages"
)

// ErrNoHealth is what a Driver's WatchHealth answers when the driver has
// no health service (adapters/dra.ErrNoHealth wraps or equals it in
// meaning: the Dialer maps it).
var ErrNoHealth = errors.New("no resource health service")

// watchHealth follows a driver's health stream until ctx ends, restarting
// it after HealthRetry when it fails; a driver without the service (or
// answering Unimplemented) is not watched.
func (a *Actor) watchHealth(ctx context.Context, conn *driverConn) {
	self, retry, log := a.self, a.cfg.HealthRetry, a.log
	go func() {
		t := time.NewTimer(0)
		defer t.Stop()
		for {
			select {
			case <-ctx.Done():
				return
			case <-t.C:
			}
			err := conn.drv.WatchHealth(ctx, func(r *drahealthv1.NodeWatchResourcesResponse) {
				self.Send(&healthReport{driver: conn.name, conn: conn, resp: r})
			})
			self.Send(&healthEnded{driver: conn.name, conn: conn})
			if ctx.Err() != nil || errors.Is(err, ErrNoHealth) || status.Code(err) == codes.Unimplemented {
				if err != nil && ctx.Err() == nil && !errors.Is(err, ErrNoHealth) {
					log.Info("DRA driver does not support resource health", "driver", conn.name)
				}
				return
			}
			if err != nil {
				log.Info("DRA health stream ended, restarting", "driver", conn.name, "err", err, "retryIn", retry)
			}
			t.Reset(retry)
		}
	}()
}

// truncate a health message as upstream (v1.ResourceHealthMessageMaxLength).
func truncate(s string) string {
	if len(s) <= v1.ResourceHealthMessageMaxLength {
		return s
	}
	return s[:v1.ResourceHealthMessageMaxLength-3] + "..."
}

// handleHealth records a health report and tells the pods whose devices
// changed.
func (a *Actor) handleHealth(m *healthReport) {
	a.sh.mu.Lock()
	if a.sh.drivers[m.driver] != m.conn {
		a.sh.mu.Unlock()
		return // from a replaced connection
	}
	hs := a.sh.health[m.driver]
	if hs == nil {
		hs = map[string]deviceHealth{}
		a.sh.health[m.driver] = hs
	}
	changed := map[string]bool{}
	for _, d := range m.resp.GetDevices() {
		key := d.GetDevice().GetPoolName() + "/" + d.GetDevice().GetDeviceName()
		timeout := a.cfg.HealthTimeout
		if s := d.GetHealthCheckTimeoutSeconds(); s > 0 {
			timeout = time.Duration(s) * time.Second
		}
		h := deviceHealth{health: d.GetHealth(), message: truncate(d.GetMessage()), at: time.Unix(d.GetLastUpdatedTime(), 0), timeout: timeout}
		if old, ok := hs[key]; !ok || old.health != h.health || old.message != h.message {
			changed[key] = true
		}
		hs[key] = h
	}
	a.sh.mu.Unlock()
	if len(changed) == 0 {
		return
	}
	for _, uid := range a.podsUsing(m.driver, changed) {
		a.sendHealth(uid, true)
	}
}

// handleHealthEnded forgets the health of a driver whose stream ended, as
// upstream (its devices read Unknown until it reports again).
func (a *Actor) handleHealthEnded(m *healthEnded) {
	a.sh.mu.Lock()
	if cur := a.sh.drivers[m.driver]; cur != nil && cur != m.conn {
		a.sh.mu.Unlock()
		return
	}
	old := a.sh.health[m.driver]
	delete(a.sh.health, m.driver)
	a.sh.mu.Unlock()
	if len(old) == 0 {
		return
	}
	changed := map[string]bool{}
	for k := range old {
		changed[k] = true
	}
	for _, uid := range a.podsUsing(m.driver, changed) {
		a.sendHealth(uid, true)
	}
}

// podsUsing lists the answered pods holding one of the driver's devices.
func (a *Actor) podsUsing(driver string, devices map[string]bool) []types.UID {
	set := map[types.UID]bool{}
	for _, ci := range a.claims {
		ds := ci.Drivers[driver]
		if ds == nil {
			continue
		}
		for _, d := range ds.Devices {
			if devices[d.Pool+"/"+d.Device] {
				for uid := range ci.Pods {
					if a.pods[uid] != nil {
						set[uid] = true
					}
				}
			}
		}
	}
	return slices.Sorted(maps.Keys(set))
}

// sendHealth tells a pod's PodActor the health of its devices, unless it
// is what was sent last (always: even when empty, after a change).
func (a *Actor) sendHealth(uid types.UID, always bool) {
	ref := a.pods[uid]
	if ref == nil || ref.to == nil {
		return
	}
	h := a.podHealth(ref.pod)
	key := fmt.Sprint(h)
	if key == ref.sent || (!always && len(h) == 0) {
		return
	}
	ref.sent = key
	a.self.SendTo(ref.to, &messages.ClaimsHealth{UID: uid, Containers: h})
}

// podHealth is upstream's allocatedResourcesStatus of each container that
// uses claims: one entry per claim (or claim/request), one resource per
// device, its ID the device's first CDI ID (else driver/pool/device).
func (a *Actor) podHealth(p *v1.Pod) map[string][]v1.ResourceStatus {
	now := a.cfg.Clock.Now()
	a.sh.mu.Lock()
	defer a.sh.mu.Unlock()
	out := map[string][]v1.ResourceStatus{}
	for _, c := range p.Spec.Containers {
		var statuses []v1.ResourceStatus
		for _, rc := range c.Resources.Claims {
			var name *string
			for i := range p.Spec.ResourceClaims {
				if p.Spec.ResourceClaims[i].Name == rc.Name {
					name, _, _ = claimName(p, &p.Spec.ResourceClaims[i])
				}
			}
			if name == nil {
				continue
			}
			ci := a.claims[claimKey(p.Namespace, *name)]
			if ci == nil {
				continue
			}
			rs := v1.ResourceStatus{Name: v1.ResourceName("claim:" + rc.Name)}
			if rc.Request != "" {
				rs.Name = v1.ResourceName("claim:" + rc.Name + "/" + rc.Request)
			}
			seen := map[v1.ResourceID]bool{}
			for _, driver := range slices.Sorted(maps.Keys(ci.Drivers)) {
				for _, d := range ci.Drivers[driver].Devices {
					if rc.Request != "" && len(d.Requests) > 0 && !slices.Contains(d.Requests, baseRequest(rc.Request)) {
						continue
					}
					rh := v1.ResourceHealth{Health: v1.ResourceHealthStatusUnknown}
					if len(d.CDI) > 0 {
						rh.ResourceID = v1.ResourceID(d.CDI[0])
					} else {
						rh.ResourceID = v1.ResourceID(strings.Join([]string{driver, d.Pool, d.Device}, "/"))
					}
					if seen[rh.ResourceID] {
						continue
					}
					seen[rh.ResourceID] = true
					if h, ok := a.sh.health[driver][d.Pool+"/"+d.Device]; ok && now.Sub(h.at) <= h.timeout {
						switch h.health {
						case drahealthv1.HealthStatus_HEALTHY:
							rh.Health = v1.ResourceHealthStatusHealthy
						case drahealthv1.HealthStatus_UNHEALTHY:
							rh.Health = v1.ResourceHealthStatusUnhealthy
						}
						if h.message != "" {
							msg := h.message
							rh.Message = &msg
						}
					}
					rs.Resources = append(rs.Resources, rh)
				}
			}
			if len(rs.Resources) > 0 {
				statuses = append(statuses, rs)
			}
		}
		if len(statuses) > 0 {
			out[c.Name] = statuses
		}
	}
	return out
}
