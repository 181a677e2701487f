package pod

import (
	"context"
	"errors"
	"fmt"
	"path/filepath"
	"strconv"
	"strings"
	"sync"
	"time"

	v1 "k8s.io/api/core/v1"
	runtimeapi "k8s.io/cri-api/pkg/apis/runtime/v1"

	"github.com/actorlet/actorlet/podspec"
)

// startError tells a failed create from a failed start.
type startError struct {
	started bool // CreateContainer succeeded, StartContainer failed
	hook    bool // the postStart hook failed (the container was killed)
	config  bool // the container config could not be made (CreateContainerConfigError)
	err     error
}

func (e *startError) Error() string { return e.err.Error() }
func (e *startError) Unwrap() error { return e.err }

// run starts one runtime operation in a goroutine; its result comes back as
// an opDone message, so the mailbox never blocks on the runtime.
func (a *Actor) run(act action, killing bool) {
	a.busy = true
	a.opSeq++
	rt, gen, sys, self := a.d.Runtime, a.gen, a.sys, a.self
	timeout := a.d.Config.OpTimeout
	name := ""
	if act.container != nil {
		name = act.container.Name
	}
	var f func(ctx context.Context) error
	switch {
	case killing:
		grace := podspec.GracePeriod(a.pod, a.kill.GracePeriod)
		if a.pod == nil {
			grace = orphanGrace(a.snap, a.kill.GracePeriod)
		}
		timeout += time.Duration(grace) * time.Second
		snap := a.snap
		stops := a.stopSpecs(snap.runningIDs())
		a.killingEvents(stops, a.kill.Reason)
		hooks, log := a.hooks(), a.log.Warn
		f = func(ctx context.Context) error { return killAll(ctx, rt, snap, stops, hooks, grace, log) }
	case act.kind == actRunSandbox:
		cfg := podspec.SandboxConfig(a.pod, act.attempt, a.d.Config.PodLogsDir)
		handler := a.d.Config.RuntimeHandler
		if a.pod.Spec.RuntimeClassName != nil && *a.pod.Spec.RuntimeClassName != "" {
			handler = *a.pod.Spec.RuntimeClassName
		}
		a.log.Info("run sandbox", "attempt", act.attempt)
		f = func(ctx context.Context) error {
			_, err := rt.RunPodSandbox(ctx, cfg, handler)
			return err
		}
	case act.kind == actStopContainers:
		grace := podspec.GracePeriod(a.pod, nil)
		if act.grace > 0 {
			grace = act.grace
		}
		timeout += time.Duration(grace) * time.Second
		stops := a.stopSpecs(act.ids)
		a.killingEvents(stops, act.reason)
		hooks, log := a.hooks(), a.log.Warn
		a.log.Info("stop containers", "reason", act.reason, "count", len(stops))
		f = func(ctx context.Context) error { return stopContainers(ctx, rt, stops, hooks, grace, log) }
	case act.kind == actStopSandbox:
		ids := act.ids
		f = func(ctx context.Context) error {
			var errs []error
			for _, id := range ids {
				errs = append(errs, ignoreNotFound(rt.StopPodSandbox(ctx, id)))
			}
			return errors.Join(errs...)
		}
	case act.kind == actRemoveContainers:
		ids := act.ids
		f = func(ctx context.Context) error {
			var errs []error
			for _, id := range ids {
				errs = append(errs, ignoreNotFound(rt.RemoveContainer(ctx, id)))
			}
			return errors.Join(errs...)
		}
	case act.kind == actStartContainer:
		f = a.startFunc(act)
	default:
		a.busy = false
		return
	}
	kind := act.kind
	if killing {
		kind = actStopContainers
	}
	go func() {
		ctx, cancel := context.WithTimeout(context.Background(), timeout)
		defer cancel()
		err := f(ctx)
		sys.Root.Send(self, &opDone{gen: gen, kind: kind, name: name, err: err})
	}()
}

func (a *Actor) startFunc(act action) func(ctx context.Context) error {
	rt, metrics := a.d.Runtime, a.d.Metrics
	ctype := "container"
	if act.isInit {
		ctype = "init_container"
	}
	if act.createdID != "" {
		id := act.createdID
		a.log.Info("start created container", "container", act.container.Name, "id", id)
		return func(ctx context.Context) error {
			if err := rt.StartContainer(ctx, id); err != nil {
				return &startError{started: true, err: fmt.Errorf("start container %s: %w", id, err)}
			}
			if metrics != nil {
				metrics.IncStartedContainers(ctype)
			}
			return nil
		}
	}
	sbCfg := podspec.SandboxConfig(a.pod, act.sandbox.GetMetadata().GetAttempt(), a.d.Config.PodLogsDir)
	image := act.imageRef
	if image == "" {
		image = act.container.Image
	}
	cfg := podspec.ContainerConfig(a.pod, act.container, act.attempt, image, act.isInit)
	mounts, err := volumeMounts(act.container, a.volPaths)
	if err != nil {
		return func(context.Context) error { return &startError{config: true, err: err} }
	}
	cfg.Mounts = append(cfg.Mounts, mounts...)
	var files []string // host files to create before the container
	if dir := a.d.Config.PodsDir; dir != "" {
		host := podspec.TerminationLogPath(dir, string(a.pod.UID), act.container.Name, act.attempt)
		cfg.Mounts = append(cfg.Mounts, &runtimeapi.Mount{
			ContainerPath: podspec.TerminationMessagePath(act.container),
			HostPath:      host,
		})
		files = append(files, host)
	}
	sandboxID := act.sandbox.Id
	spec := act.container.DeepCopy()
	hooks, grace, log := a.hooks(), podspec.GracePeriod(a.pod, nil), a.log
	hooks.podIP = act.sandbox.GetNetwork().GetIp()
	if a.pod.Spec.HostNetwork || hooks.podIP == "" {
		hooks.podIP = a.d.Config.HostIP
	}
	a.log.Info("create container", "container", act.container.Name, "attempt", act.attempt)
	pod, src, podsDir, hostIP := a.pod.DeepCopy(), a.d.ConfigSource, a.d.Config.PodsDir, a.d.Config.HostIP
	alloc := a.d.Config.NodeAllocatable // never written after the start: shared read-only
	return func(ctx context.Context) error {
		envs, command, args, err := makeEnv(ctx, envInput{pod: pod, c: spec, podIP: hooks.podIP, hostIP: hostIP, src: src, allocatable: alloc})
		if err != nil {
			return &startError{config: true, err: err}
		}
		cfg.Envs, cfg.Command, cfg.Args = envs, command, args
		if podsDir != "" && !pod.Spec.HostNetwork {
			path, err := writeHostsFile(podsDir, pod, hooks.podIP)
			if err != nil {
				return &startError{err: fmt.Errorf("create container %s: hosts file: %w", cfg.Metadata.Name, err)}
			}
			cfg.Mounts = append(cfg.Mounts, &runtimeapi.Mount{ContainerPath: "/etc/hosts", HostPath: path})
		}
		for _, f := range files {
			if err := createEmptyFile(f); err != nil {
				return &startError{err: fmt.Errorf("create container %s: termination message file: %w", cfg.Metadata.Name, err)}
			}
		}
		id, err := rt.CreateContainer(ctx, sandboxID, cfg, sbCfg)
		if err != nil {
			return &startError{err: fmt.Errorf("create container %s: %w", cfg.Metadata.Name, err)}
		}
		if err := rt.StartContainer(ctx, id); err != nil {
			return &startError{started: true, err: fmt.Errorf("start container %s: %w", id, err)}
		}
		if metrics != nil {
			metrics.IncStartedContainers(ctype)
		}
		if spec.Lifecycle != nil && spec.Lifecycle.PostStart != nil {
			if herr := hooks.run(ctx, spec.Lifecycle.PostStart, spec, id); herr != nil {
				msg := fmt.Sprintf("PostStartHook failed: %v", herr)
				log.Warn("postStart hook failed, killing the container", "reason", ReasonFailedPostStart, "container", spec.Name, "message", msg)
				_ = ignoreNotFound(rt.StopContainer(ctx, id, grace))
				return &startError{started: true, hook: true, err: errors.New(msg)}
			}
		}
		return nil
	}
}

// killingEvents records a Killing event per container being stopped.
func (a *Actor) killingEvents(stops []stopSpec, reason string) {
	for _, s := range stops {
		if s.name != "" {
			a.event(v1.EventTypeNormal, "Killing", s.id, "Stopping container %s (%s)", s.name, reason)
		}
	}
}

// volumeMounts maps a container's volumeMounts to CRI mounts of the
// volumes' host paths (subPath within them).
func volumeMounts(c *v1.Container, paths map[string]string) ([]*runtimeapi.Mount, error) {
	var out []*runtimeapi.Mount
	for _, m := range c.VolumeMounts {
		host, ok := paths[m.Name]
		if !ok {
			if paths == nil {
				continue // no VolumeActor wired: nothing to mount
			}
			return nil, fmt.Errorf("volumeMount %q: no volume of that name is set up", m.Name)
		}
		if m.SubPath != "" {
			sub := filepath.Clean(m.SubPath)
			if filepath.IsAbs(sub) || strings.HasPrefix(sub, "..") {
				return nil, fmt.Errorf("volumeMount %q: subPath %q must stay inside the volume", m.Name, m.SubPath)
			}
			host = filepath.Join(host, sub)
		}
		mount := &runtimeapi.Mount{ContainerPath: m.MountPath, HostPath: host, Readonly: m.ReadOnly}
		if m.MountPropagation != nil {
			switch *m.MountPropagation {
			case v1.MountPropagationHostToContainer:
				mount.Propagation = runtimeapi.MountPropagation_PROPAGATION_HOST_TO_CONTAINER
			case v1.MountPropagationBidirectional:
				mount.Propagation = runtimeapi.MountPropagation_PROPAGATION_BIDIRECTIONAL
			}
		}
		out = append(out, mount)
	}
	return out, nil
}

// stopContainers stops containers in parallel, each with the grace period
// (a preStop hook runs first, inside it).
func stopContainers(ctx context.Context, rt Containers, stops []stopSpec, hooks hookRunner, grace int64, log func(string, ...any)) error {
	errs := make([]error, len(stops))
	var wg sync.WaitGroup
	for i, s := range stops {
		wg.Add(1)
		go func() {
			defer wg.Done()
			errs[i] = stopWithHook(ctx, rt, hooks, s, grace, log)
		}()
	}
	wg.Wait()
	return errors.Join(errs...)
}

// hooks returns the runner of the pod's lifecycle hooks.
func (a *Actor) hooks() hookRunner {
	return hookRunner{h: a.d.Probes.Handlers, clk: a.d.Clock, podIP: a.podIP()}
}

// runningIDs lists the running or created containers of the snapshot.
func (s *snapshot) runningIDs() []string {
	var ids []string
	for _, cs := range s.containers {
		for _, c := range cs {
			if c.State == runtimeapi.ContainerState_CONTAINER_RUNNING || c.State == runtimeapi.ContainerState_CONTAINER_CREATED {
				ids = append(ids, c.Id)
			}
		}
	}
	return ids
}

// killAll terminates a pod: running containers get the grace period, then
// sandboxes stop, then everything is removed.
func killAll(ctx context.Context, rt Runtime, snap *snapshot, stops []stopSpec, hooks hookRunner, grace int64, log func(string, ...any)) error {
	var all []string
	for _, cs := range snap.containers {
		for _, c := range cs {
			all = append(all, c.Id)
		}
	}
	// Main containers first, sidecars (restartable init containers) after
	// them, as upstream.
	var main, sidecars []stopSpec
	for _, s := range stops {
		if s.sidecar {
			sidecars = append(sidecars, s)
		} else {
			main = append(main, s)
		}
	}
	for _, group := range [][]stopSpec{main, sidecars} {
		if err := stopContainers(ctx, rt, group, hooks, grace, log); err != nil {
			return err
		}
	}
	var errs []error
	for _, sb := range snap.sandboxes {
		errs = append(errs, ignoreNotFound(rt.StopPodSandbox(ctx, sb.Id)))
	}
	for _, id := range all {
		errs = append(errs, ignoreNotFound(rt.RemoveContainer(ctx, id)))
	}
	for _, sb := range snap.sandboxes {
		errs = append(errs, ignoreNotFound(rt.RemovePodSandbox(ctx, sb.Id)))
	}
	return errors.Join(errs...)
}

// orphanGrace is the grace period for a pod nobody desires any more: the
// override, else what its containers recorded, else the default.
func orphanGrace(snap *snapshot, override *int64) int64 {
	if override != nil {
		return podspec.GracePeriod(nil, override)
	}
	for _, cs := range snap.containers {
		for _, c := range cs {
			if g, err := strconv.ParseInt(c.GetAnnotations()[podspec.AnnotationPodTerminationGrace], 10, 64); err == nil {
				return podspec.GracePeriod(nil, &g)
			}
		}
	}
	return podspec.GracePeriod(nil, nil)
}
