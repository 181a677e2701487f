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

	"github.com/actorlet/actorlet/errdefs"
	"github.com/actorlet/actorlet/internal/actorkit"
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

// opFunc is one runtime operation; it returns what it changed.
type opFunc func(ctx context.Context) (*delta, error)

// run starts one runtime operation off the mailbox; its result comes back
// as an opDone message with what it changed, so the mailbox never blocks
// on the runtime and the view follows the operation without a list.
func (a *Actor) run(act action, killing bool) {
	rt, files := a.d.Runtime, a.termReader()
	timeout := a.d.Config.OpTimeout
	name := ""
	if act.container != nil {
		name = act.container.Name
	}
	var f opFunc
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
		f = func(ctx context.Context) (*delta, error) {
			// Everything is removed: the next read confirms nothing is left.
			d := &delta{reread: true}
			err := killAll(ctx, rt, snap, stops, hooks, grace, log, func() { d.final = readFinal(ctx, rt, files, snap) })
			return d, err
		}
	case act.kind == actRunSandbox:
		cfg := a.sandboxConfig(act.attempt, true)
		handler := a.d.Config.RuntimeHandler
		if a.pod.Spec.RuntimeClassName != nil && *a.pod.Spec.RuntimeClassName != "" {
			handler = *a.pod.Spec.RuntimeClassName
		}
		// The steps of a pod's start log at Debug, as upstream's at V(4):
		// the events say them, and at thousands of pods an Info line per
		// step was the agent's most contended lock (the log handler's).
		a.log.Debug("run sandbox", "attempt", act.attempt)
		if act.attempt > 0 {
			// A sandbox of the pod existed: it is replaced, as upstream says.
			a.event(v1.EventTypeNormal, ReasonSandboxChanged, strconv.FormatUint(uint64(act.attempt), 10), "Pod sandbox changed, it will be killed and re-created.")
		}
		invalid := podspec.CheckHostname(a.pod, a.clusterDomain())
		f = func(ctx context.Context) (*delta, error) {
			if invalid != nil {
				return nil, invalid
			}
			id, err := rt.RunPodSandbox(ctx, cfg, handler)
			if err != nil {
				return nil, err
			}
			return sandboxDelta(ctx, rt, id), nil
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
		ids := act.ids
		f = func(ctx context.Context) (*delta, error) {
			if err := stopContainers(ctx, rt, stops, hooks, grace, log); err != nil {
				return nil, err
			}
			return containersDelta(ctx, rt, files, ids, nil), nil
		}
	case act.kind == actStopSandbox:
		ids := act.ids
		f = func(ctx context.Context) (*delta, error) {
			if err := forEachID(ctx, ids, rt.StopPodSandbox); err != nil {
				return nil, err
			}
			// Stopping a sandbox may stop what runs in it: read it all.
			return &delta{reread: true}, nil
		}
	case act.kind == actRemoveContainers:
		ids := act.ids
		f = func(ctx context.Context) (*delta, error) {
			return &delta{removed: ids}, forEachID(ctx, ids, rt.RemoveContainer)
		}
	case act.kind == actStartContainer:
		f = a.startFunc(act)
	case act.kind == actResize:
		f = a.resizeFunc(act.resize)
	default:
		return
	}
	kind := act.kind
	if killing {
		kind = actStopContainers
	}
	a.gate.beginOp()
	actorkit.Go(a.self, timeout, func(ctx context.Context) *opDone {
		d, err := f(ctx)
		return &opDone{kind: kind, name: name, d: d, err: err}
	})
}

// sandboxDelta reads back a sandbox the operation made.
func sandboxDelta(ctx context.Context, rt Inspector, id string) *delta {
	st, err := rt.PodSandboxStatus(ctx, id)
	if err != nil {
		return &delta{reread: true}
	}
	return &delta{sandboxes: []*runtimeapi.PodSandboxStatus{st}}
}

// containersDelta reads back containers the operation made or stopped;
// sandboxOf gives the sandbox of new ones.
func containersDelta(ctx context.Context, rt Inspector, files TerminationReader, ids []string, sandboxOf map[string]string) *delta {
	d := &delta{sandboxOf: sandboxOf}
	for _, id := range ids {
		st, err := containerStatus(ctx, rt, files, id)
		switch {
		case errdefs.IsNotFound(err):
			d.removed = append(d.removed, id)
		case err != nil:
			return &delta{reread: true}
		default:
			d.containers = append(d.containers, st)
		}
	}
	return d
}

func (a *Actor) startFunc(act action) opFunc {
	rt, metrics, files := a.d.Runtime, a.d.Metrics, a.termReader()
	ctype := "container"
	if act.isInit {
		ctype = "init_container"
	}
	if act.ephemeral {
		ctype = "ephemeral_container"
	}
	sandboxID := act.sandbox.Id
	if act.createdID != "" {
		id := act.createdID
		a.log.Debug("start created container", "container", act.container.Name, "id", id)
		return func(ctx context.Context) (*delta, error) {
			if err := rt.StartContainer(ctx, id); err != nil {
				return nil, &startError{started: true, err: fmt.Errorf("start container %s: %w", id, err)}
			}
			if metrics != nil {
				metrics.IncStartedContainers(ctype)
			}
			return containersDelta(ctx, rt, files, []string{id}, map[string]string{id: sandboxID}), nil
		}
	}
	sbCfg := a.sandboxConfig(act.sandbox.GetMetadata().GetAttempt(), false)
	hosts := a.hostsInput(act.sandbox)
	image := act.imageRef
	if image == "" {
		image = act.container.Image
	}
	cfg := podspec.ContainerConfig(a.pod, act.container, act.attempt, image, act.isInit,
		podspec.WithMemoryCapacity(a.d.Config.MemoryCapacity))
	ephemeralConfig(cfg, act)
	mounts, subs, err := volumeMounts(act.container, a.volumes.paths)
	if err != nil {
		return func(context.Context) (*delta, error) { return nil, &startError{config: true, err: err} }
	}
	cfg.Mounts = append(cfg.Mounts, mounts...)
	spec := act.container // read only, as the pod it is part of
	imgs, _ := a.d.Runtime.(ImageInspector)
	hooks, grace, log := a.hooks(), podspec.GracePeriod(a.pod, nil), a.log
	hooks.podIP = act.sandbox.GetNetwork().GetIp()
	if a.pod.Spec.HostNetwork || hooks.podIP == "" {
		hooks.podIP = a.d.Config.HostIP
	}
	a.log.Debug("create container", "container", act.container.Name, "attempt", act.attempt)
	// The pod is read only (messages package doc): the operation reads it
	// off the mailbox without a copy.
	pod, src, hostIP, hostFiles := a.pod, a.d.ConfigSource, a.d.Config.HostIP, HostFiles(a.d.Files)
	alloc := a.d.Config.NodeAllocatable // never written after the start: shared read-only
	attempt := act.attempt
	devs := a.devices.containers[act.container.Name] // read only once answered
	cdi := a.claims.containers[act.container.Name]   // the same
	noCDI := a.d.Config.NoCDI
	podCgroup := a.resizeRestartCgroup()
	return func(ctx context.Context) (*delta, error) {
		envs, command, args, err := makeEnv(ctx, envInput{pod: pod, c: spec, podIP: hooks.podIP, hostIP: hostIP, src: src, allocatable: alloc})
		if err != nil {
			return nil, &startError{config: true, err: err}
		}
		cfg.Envs, cfg.Command, cfg.Args = envs, command, args
		if err := resolveSubPaths(subs, envs, hostFiles); err != nil {
			return nil, &startError{config: true, err: fmt.Errorf("failed to prepare subPath for container %q: %w", spec.Name, err)}
		}
		if err := verifyNonRoot(ctx, imgs, pod, spec, image); err != nil {
			return nil, &startError{config: true, err: err}
		}
		applyDevices(cfg, devs)
		applyClaims(cfg, cdi)
		if err := hostMounts(cfg, hostFiles, pod, spec, attempt, hosts); err != nil {
			return nil, &startError{err: fmt.Errorf("create container %s: %w", cfg.Metadata.Name, err)}
		}
		if err := cdiSupported(cfg, noCDI); err != nil {
			return nil, &startError{config: true, err: err}
		}
		if podCgroup != nil {
			if err := podCgroup(); err != nil {
				return nil, &startError{err: fmt.Errorf("create container %s: %w", cfg.Metadata.Name, err)}
			}
		}
		id, err := rt.CreateContainer(ctx, sandboxID, cfg, sbCfg)
		if err != nil {
			return nil, &startError{err: fmt.Errorf("create container %s: %w", cfg.Metadata.Name, err)}
		}
		if err := rt.StartContainer(ctx, id); err != nil {
			return nil, &startError{started: true, err: fmt.Errorf("start container %s: %w", id, err)}
		}
		if metrics != nil {
			metrics.IncStartedContainers(ctype)
		}
		if spec.Lifecycle != nil && spec.Lifecycle.PostStart != nil {
			if herr := hooks.run(ctx, spec.Lifecycle.PostStart, spec, id); herr != nil {
				msg := fmt.Sprintf("PostStartHook failed: %v", herr)
				log.Warn("postStart hook failed, killing the container", "reason", ReasonFailedPostStart, "container", spec.Name, "message", msg)
				_ = ignoreNotFound(rt.StopContainer(ctx, id, grace))
				return nil, &startError{started: true, hook: true, err: errors.New(msg)}
			}
		}
		return containersDelta(ctx, rt, files, []string{id}, map[string]string{id: sandboxID}), nil
	}
}

// hostMounts adds the files the node keeps for a container: the
// termination-message file and the managed /etc/hosts (unless the
// container mounts its own there).
func hostMounts(cfg *runtimeapi.ContainerConfig, files HostFiles, pod *v1.Pod, c *v1.Container, attempt uint32, hosts hostsInput) error {
	if files == nil {
		return nil
	}
	path, err := files.TerminationLog(pod.UID, c.Name, attempt)
	if err != nil {
		return err
	}
	if path != "" {
		cfg.Mounts = append(cfg.Mounts, &runtimeapi.Mount{ContainerPath: podspec.TerminationMessagePath(c), HostPath: path})
	}
	if !podspec.MountsEtcHosts(c) {
		return nil
	}
	content, err := hostsFile(pod, hosts)
	if err != nil || content == nil {
		return err
	}
	path, err = files.Hosts(pod.UID, content)
	if err != nil {
		return err
	}
	if path != "" {
		cfg.Mounts = append(cfg.Mounts, &runtimeapi.Mount{ContainerPath: "/etc/hosts", HostPath: path})
	}
	return nil
}

// killingEvents records a Killing event per container being stopped.
func (a *Actor) killingEvents(stops []stopSpec, reason string) {
	for _, s := range stops {
		if s.name != "" {
			a.event(v1.EventTypeNormal, "Killing", s.id, "Stopping container %s (%s)", s.name, reason)
		}
	}
}

// subMount is a mount whose host path is a subPath (or a subPathExpr,
// expanded with the container's environment) inside its volume, resolved
// and made inside the start operation (resolveSubPaths).
type subMount struct {
	mount        *runtimeapi.Mount
	name         string // the volumeMount's
	volume       string // the volume's host directory
	sub, subExpr string
}

// volumeMounts maps a container's volumeMounts to CRI mounts of the
// volumes' host paths; those with a subPath or subPathExpr are also
// returned as subMounts, their host path set later by resolveSubPaths.
func volumeMounts(c *v1.Container, paths map[string]string) ([]*runtimeapi.Mount, []subMount, error) {
	var out []*runtimeapi.Mount
	var subs []subMount
	for _, m := range c.VolumeMounts {
		host, ok := paths[m.Name]
		if !ok {
			if paths == nil {
				continue // no VolumeActor wired: nothing to mount
			}
			return nil, nil, fmt.Errorf("volumeMount %q: no volume of that name is set up", m.Name)
		}
		mount := &runtimeapi.Mount{ContainerPath: m.MountPath, HostPath: host, Readonly: m.ReadOnly}
		if m.SubPath != "" || m.SubPathExpr != "" {
			if m.SubPath != "" {
				if err := checkSubPath(m.SubPath); err != nil {
					return nil, nil, fmt.Errorf("volumeMount %q: %w", m.Name, err)
				}
				mount.HostPath = filepath.Join(host, filepath.Clean(m.SubPath))
			}
			subs = append(subs, subMount{mount: mount, name: m.Name, volume: host, sub: m.SubPath, subExpr: m.SubPathExpr})
		}
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
	return out, subs, nil
}

// checkSubPath refuses what upstream refuses of a (expanded) subPath: an
// absolute path or one that steps out with "..".
func checkSubPath(sub string) error {
	if filepath.IsAbs(sub) {
		return fmt.Errorf("error SubPath `%s` must not be an absolute path", sub)
	}
	for _, part := range strings.Split(filepath.ToSlash(sub), "/") {
		if part == ".." {
			return fmt.Errorf("unable to provision SubPath `%s`: must not contain '..'", sub)
		}
	}
	return nil
}

// resolveSubPaths expands subPathExprs with the container's environment
// (every $(VAR) must have a value, as upstream) and sets each subMount's
// host path, the directory made when missing (files: nil leaves the
// joined path to the runtime).
func resolveSubPaths(subs []subMount, envs []*runtimeapi.KeyValue, files HostFiles) error {
	if len(subs) == 0 {
		return nil
	}
	env := make(map[string]string, len(envs))
	for _, kv := range envs {
		env[kv.Key] = string(kv.Value)
	}
	for _, s := range subs {
		sub := s.sub
		if s.subExpr != "" {
			var missing []string
			sub = podspec.Expand(s.subExpr, func(k string) (string, bool) {
				v, ok := env[k]
				if !ok || v == "" {
					missing = append(missing, k)
				}
				return v, true
			})
			if len(missing) > 0 {
				return fmt.Errorf("volumeMount %q: subPathExpr %q: missing value for %s", s.name, s.subExpr, strings.Join(missing, ", "))
			}
			if err := checkSubPath(sub); err != nil {
				return fmt.Errorf("volumeMount %q: %w", s.name, err)
			}
		}
		if sub == "" {
			continue
		}
		if files == nil {
			s.mount.HostPath = filepath.Join(s.volume, filepath.Clean(sub))
			continue
		}
		host, err := files.SubPath(s.volume, sub)
		if err != nil {
			return fmt.Errorf("volumeMount %q: %w", s.name, err)
		}
		s.mount.HostPath = host
	}
	return nil
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
func killAll(ctx context.Context, rt Runtime, snap *snapshot, stops []stopSpec, hooks hookRunner, grace int64, log func(string, ...any), stopped func()) error {
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
	if stopped != nil {
		stopped() // read what stopped before it is removed
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
