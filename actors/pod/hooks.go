package pod

import (
	"context"
	"errors"
	"fmt"
	"strings"
	"time"

	v1 "k8s.io/api/core/v1"
	runtimeapi "k8s.io/cri-api/pkg/apis/runtime/v1"
	"k8s.io/utils/clock"

	"github.com/actorlet/actorlet/actors/probe"
	"github.com/actorlet/actorlet/podspec"
)

// hookRunner runs lifecycle hooks (postStart, preStop) off the mailbox.
type hookRunner struct {
	h     probe.Handlers
	clk   clock.Clock
	podIP string
}

// run runs one hook handler in container id; an error says why it failed.
func (r hookRunner) run(ctx context.Context, hook *v1.LifecycleHandler, c *v1.Container, id string) error {
	switch {
	case hook.Exec != nil:
		if r.h.Exec == nil {
			return errors.New("exec hook: no exec handler")
		}
		cmd := podspec.ExpandCommand(hook.Exec.Command, c.Env)
		stdout, stderr, code, err := r.h.Exec.ExecSync(ctx, id, cmd, 0)
		if err != nil {
			return err
		}
		if code != 0 {
			return fmt.Errorf("command %q exited with %d: %s", strings.Join(cmd, " "), code, truncateMsg(string(stdout)+string(stderr)))
		}
		return nil
	case hook.HTTPGet != nil:
		if r.h.HTTP == nil {
			return errors.New("httpGet hook: no HTTP handler")
		}
		u, header, err := podspec.HTTPTarget(hook.HTTPGet, c, r.podIP)
		if err != nil {
			return err
		}
		timeout := time.Minute
		if dl, ok := ctx.Deadline(); ok {
			timeout = time.Until(dl)
		}
		ok, _, msg, err := r.h.HTTP.HTTPGet(ctx, u, header, timeout) // a warning is a success
		if err != nil {
			return err
		}
		if !ok {
			return fmt.Errorf("http lifecycle hook (%s) failed: %s", u.Path, msg)
		}
		return nil
	case hook.Sleep != nil:
		select {
		case <-r.clk.After(time.Duration(hook.Sleep.Seconds) * time.Second):
		case <-ctx.Done():
		}
		return nil
	}
	return errors.New("lifecycle hook has no handler")
}

func truncateMsg(s string) string {
	if len(s) > 1024 {
		return s[:1024]
	}
	return s
}

// stopSpec is one container to stop, with its preStop hook if it has one.
type stopSpec struct {
	id        string
	container *v1.Container // nil: no hook
	name      string        // container name ("" when unknown)
	sidecar   bool          // a restartable init container: stopped after the others
}

// stopSpecs pairs container IDs with their specs (for preStop hooks).
func (a *Actor) stopSpecs(ids []string) []stopSpec {
	out := make([]stopSpec, 0, len(ids))
	for _, id := range ids {
		s := stopSpec{id: id}
		if a.pod != nil && a.snap != nil {
			for name, cs := range a.snap.containers {
				for _, c := range cs {
					if c.Id == id && c.State == runtimeapi.ContainerState_CONTAINER_RUNNING {
						spec := podspec.FindContainer(a.pod, name)
						s.name = name
						if spec != nil {
							s.sidecar = podspec.IsSidecar(spec)
						}
						if spec != nil && spec.Lifecycle != nil && spec.Lifecycle.PreStop != nil {
							s.container = spec.DeepCopy()
						}
					}
				}
			}
		}
		out = append(out, s)
	}
	return out
}

// podIP of the pod's newest sandbox (the host's for host network).
func (a *Actor) podIP() string {
	if a.pod != nil && a.pod.Spec.HostNetwork {
		return a.d.Config.HostIP
	}
	if ip := a.snap.latestSandbox().GetNetwork().GetIp(); ip != "" {
		return ip
	}
	return a.d.Config.HostIP
}

// stopWithHook runs the preStop hook (bounded by the grace period) and then
// stops the container with what is left of the grace period (at least 2 s,
// as upstream).
func stopWithHook(ctx context.Context, rt Containers, hooks hookRunner, s stopSpec, grace int64, log func(msg string, args ...any)) error {
	if s.container != nil {
		start := hooks.clk.Now()
		hctx, cancel := context.WithTimeout(ctx, time.Duration(grace)*time.Second)
		err := hooks.run(hctx, s.container.Lifecycle.PreStop, s.container, s.id)
		cancel()
		if err != nil {
			log("preStop hook failed", "reason", ReasonFailedPreStopHook, "container", s.container.Name, "err", err)
		}
		grace -= int64(hooks.clk.Since(start) / time.Second)
		if grace < podspec.MinimumGracePeriodSeconds {
			grace = podspec.MinimumGracePeriodSeconds
		}
	}
	return ignoreNotFound(rt.StopContainer(ctx, s.id, grace))
}
