// Package volume is the VolumeActor: it sets up a pod's volumes on the host
// (emptyDir, hostPath, projected service-account tokens, ConfigMaps,
// Secrets, the downward API, pod certificates and ClusterTrustBundles),
// keeps projected tokens and certificates fresh and tears everything down
// when the pod is gone. File I/O and API calls run off the
// mailbox; results come back as messages.
package volume

import (
	"context"
	"fmt"
	"log/slog"
	"maps"
	"path/filepath"
	"time"

	"github.com/asynkron/protoactor-go/actor"
	authenticationv1 "k8s.io/api/authentication/v1"
	v1 "k8s.io/api/core/v1"
	"k8s.io/apimachinery/pkg/types"
	"k8s.io/utils/clock"

	"github.com/actorlet/actorlet/errdefs"
	"github.com/actorlet/actorlet/internal/actorkit"
	"github.com/actorlet/actorlet/messages"
	"github.com/actorlet/actorlet/podspec"
)

// Files writes volume contents.
type Files interface {
	// HostPath prepares and checks a hostPath volume's path by its type
	// (upstream's checkType: DirectoryOrCreate and FileOrCreate create
	// what is missing; Directory, File, Socket, CharDevice, BlockDevice
	// must find it; "" checks nothing).
	HostPath(path string, typ v1.HostPathType) error
	// EmptyDir sets up an emptyDir: a 0777 directory, a tmpfs of size
	// bytes mounted on it when memory-backed, given to fsGroup if set.
	EmptyDir(dir string, memory bool, size int64, fsGroup *int64) error
	// WriteAtomic makes dir hold exactly files, given to fsGroup if set;
	// memory: on a tmpfs of its own of size bytes (secret, projected and
	// downwardAPI volumes, as upstream), or on disk where this process
	// may not mount.
	WriteAtomic(dir string, files map[string]podspec.VolumeFile, fsGroup *int64, memory bool, size int64) error
	// RemoveAll unmounts what is mounted under dir, then removes it.
	RemoveAll(dir string) error
}

// API gives what projected, ConfigMap and Secret volumes need (cluster
// mode); nil in standalone mode.
type API interface {
	CreateToken(ctx context.Context, namespace, serviceAccount string, req *authenticationv1.TokenRequest) (*authenticationv1.TokenRequest, error)
	ConfigMap(ctx context.Context, namespace, name string) (*v1.ConfigMap, error)
	Secret(ctx context.Context, namespace, name string) (*v1.Secret, error)
}

// Config of the actor.
type Config struct {
	PodsDir    string        // <root-dir>/pods
	ResyncEach time.Duration // ConfigMap/Secret contents are refreshed this often (1 m)
	Timeout    time.Duration
	// NodeAllocatable stands in for the limits a container does not set
	// (downward API resourceFieldRef limits.*) and sizes memory-backed
	// emptyDirs, as upstream. Never written after the start.
	NodeAllocatable v1.ResourceList
	// Certs serves podCertificate and clusterTrustBundle projections
	// (cluster mode); nil: they are refused.
	Certs Certs
	// Recorder records the pod events of pod certificates (denied,
	// failed, overdue, expired); nil: none.
	Recorder Recorder
}

// setupRetry paces the setups of a pod whose volumes failed: 2 s doubling
// to 30 s.
var setupRetry = actorkit.Backoff{Base: 2 * time.Second, Cap: 30 * time.Second}

// New returns the VolumeActor producer; api may be nil.
func New(files Files, api API, cfg Config, clk clock.WithDelayedExecution, log *slog.Logger) actor.Producer {
	if files == nil || clk == nil || cfg.PodsDir == "" {
		panic("volume.New: files, clock and PodsDir are required")
	}
	if cfg.ResyncEach <= 0 {
		cfg.ResyncEach = time.Minute
	}
	if cfg.Timeout <= 0 {
		cfg.Timeout = 30 * time.Second
	}
	if log == nil {
		log = slog.Default()
	}
	return func() actor.Actor {
		return &Actor{files: files, api: api, cfg: cfg, clk: clk, log: log.With("actor", "volumes")}
	}
}

// token is a projected service-account token and when to renew it.
type token struct {
	value   []byte
	renewAt time.Time
}

// Actor is the VolumeActor.
type Actor struct {
	files Files
	api   API
	cfg   Config
	clk   clock.WithDelayedExecution
	log   *slog.Logger

	self actorkit.Self
	pods map[types.UID]*podVolumes
}

type podVolumes struct {
	pod      *v1.Pod
	tokens   map[string]token     // by volume/path: reused until 80 % of their life
	certs    map[string]certState // podCertificate projections, by certKey
	emptyDir map[string]bool      // emptyDirs set up (by name): not set up again on a refresh
	paths    map[string]string
	ready    bool
	busy     bool
	again    bool // a refresh was asked while busy: set up once more after
	waiters  []*actor.PID
	refresh  actorkit.Timer // named by the pod UID
	lastErr  string
	failures int
	// gone: the pod was torn down while a setup was in flight; the
	// teardown runs once that setup is back, so that it does not write
	// (or mount) into what the teardown removed.
	gone bool
}

type (
	setUp struct {
		actorkit.Tag
		uid       types.UID
		paths     map[string]string
		tokens    map[string]token
		certs     map[string]certState
		emptyDir  map[string]bool
		refreshIn time.Duration
		err       error
	}
	tornDown struct {
		actorkit.Tag
		uid types.UID
		err error
	}
)

// Receive implements actor.Actor.
func (a *Actor) Receive(ctx actor.Context) {
	switch m := ctx.Message().(type) {
	case *actor.Started:
		a.self = actorkit.Start(ctx, a.clk)
		// A restarted VolumeActor knows no pod: PodActors ask again, and
		// setting up is idempotent.
		a.pods = map[types.UID]*podVolumes{}
	case *actor.Restarting, *actor.Stopping:
		for _, pv := range a.pods {
			pv.refresh.Stop()
		}
	case *messages.EnsureVolumes:
		a.handleEnsure(ctx, m)
	case *setUp:
		if a.self.Mine(m) {
			a.handleSetUp(ctx, m)
		}
	case *actorkit.Fired:
		if pv, ok := a.pods[types.UID(m.Name)]; ok && pv.refresh.Fired(a.self, m) {
			a.start(pv)
		}
	case *messages.CredentialsChanged:
		a.handleCredentialsChanged(m)
	case *messages.TearDownVolumes:
		a.handleTearDown(m)
	case *tornDown:
		// Logged even when it comes from before a restart: nothing of the
		// actor's state depends on it.
		if m.err != nil {
			a.log.Warn("volume teardown", "uid", m.uid, "err", m.err)
		}
	}
}

func (a *Actor) handleEnsure(ctx actor.Context, m *messages.EnsureVolumes) {
	if m.Pod == nil {
		return
	}
	pv, ok := a.pods[m.Pod.UID]
	if !ok {
		pv = &podVolumes{refresh: actorkit.NewTimer(string(m.Pod.UID))}
		a.pods[m.Pod.UID] = pv
	}
	pv.pod = m.Pod
	pv.gone = false // wanted again before its teardown ran
	if pv.ready {
		if m.ReplyTo != nil {
			ctx.Send(m.ReplyTo, &messages.VolumesReady{UID: m.Pod.UID, Paths: copyPaths(pv.paths)})
		}
		if m.Refresh {
			a.refreshNow(pv)
		}
		return
	}
	if m.ReplyTo != nil {
		pv.waiters = append(pv.waiters, m.ReplyTo)
	}
	a.start(pv)
}

// handleCredentialsChanged sets up again the volumes of the pod whose
// PodCertificateRequest changed, or of every pod with a clusterTrustBundle
// projection.
func (a *Actor) handleCredentialsChanged(m *messages.CredentialsChanged) {
	if !m.TrustBundles {
		if pv, ok := a.pods[m.UID]; ok && !pv.gone {
			a.refreshNow(pv)
		}
		return
	}
	for _, pv := range a.pods {
		if !pv.gone && hasTrustBundle(pv.pod) {
			a.refreshNow(pv)
		}
	}
}

func hasTrustBundle(pod *v1.Pod) bool {
	for _, v := range pod.Spec.Volumes {
		if v.Projected == nil {
			continue
		}
		for _, s := range v.Projected.Sources {
			if s.ClusterTrustBundle != nil {
				return true
			}
		}
	}
	return false
}

// refreshNow sets up a ready pod's volumes again now (its downward API
// files follow a metadata change), or right after the setup in flight.
func (a *Actor) refreshNow(pv *podVolumes) {
	if pv.busy {
		pv.again = true
		return
	}
	pv.refresh.Stop()
	a.start(pv)
}

func copyPaths(p map[string]string) map[string]string {
	out := make(map[string]string, len(p))
	for k, v := range p {
		out[k] = v
	}
	return out
}

// start sets up (or refreshes) a pod's volumes off the mailbox.
func (a *Actor) start(pv *podVolumes) {
	if pv.busy {
		return
	}
	pv.busy = true
	// The pod is shared read only (messages/doc.go): the setup reads it off
	// the mailbox while a newer EnsureVolumes may replace pv.pod, never
	// change it.
	pod := pv.pod
	files, api, cfg, now := a.files, a.api, a.cfg, a.clk.Now()
	tokens := maps.Clone(pv.tokens)
	if tokens == nil {
		tokens = map[string]token{}
	}
	emptyDir := maps.Clone(pv.emptyDir)
	if emptyDir == nil {
		emptyDir = map[string]bool{}
	}
	certs := maps.Clone(pv.certs)
	if certs == nil {
		certs = map[string]certState{}
	}
	actorkit.Go(a.self, cfg.Timeout, func(ctx context.Context) *setUp {
		paths, refreshIn, err := setUpPod(ctx, files, api, cfg, pod, now, podState{tokens: tokens, emptyDir: emptyDir, certs: certs})
		return &setUp{uid: pod.UID, paths: paths, tokens: tokens, certs: certs, emptyDir: emptyDir, refreshIn: refreshIn, err: err}
	})
}

func (a *Actor) handleSetUp(ctx actor.Context, m *setUp) {
	pv, ok := a.pods[m.uid]
	if !ok {
		return // torn down meanwhile
	}
	pv.busy = false
	if pv.gone {
		a.tearDown(m.uid)
		return
	}
	if m.tokens != nil {
		pv.tokens = m.tokens
	}
	if m.emptyDir != nil {
		pv.emptyDir = m.emptyDir
	}
	if m.certs != nil {
		pv.certs = m.certs
	}
	next := m.refreshIn
	if m.err != nil {
		pv.failures++
		if msg := m.err.Error(); msg != pv.lastErr {
			a.log.Warn("volume setup failed", "pod", pv.pod.Namespace+"/"+pv.pod.Name, "err", m.err)
			pv.lastErr = msg
		}
		for _, w := range pv.waiters {
			ctx.Send(w, &messages.VolumesReady{UID: m.uid, Reason: "FailedMount", Message: m.err.Error()})
		}
		pv.waiters = nil
		next = setupRetry.Delay(pv.failures)
		if pv.ready {
			next = min(next, m.refreshIn) // keep what works; retry the refresh
		}
	} else {
		pv.failures, pv.lastErr = 0, ""
		pv.paths, pv.ready = m.paths, true
		for _, w := range pv.waiters {
			ctx.Send(w, &messages.VolumesReady{UID: m.uid, Paths: copyPaths(m.paths)})
		}
		pv.waiters = nil
	}
	if pv.again {
		pv.again = false
		a.start(pv)
		return
	}
	if next > 0 {
		pv.refresh.Arm(a.self, next)
	}
}

func (a *Actor) handleTearDown(m *messages.TearDownVolumes) {
	if pv, ok := a.pods[m.UID]; ok {
		pv.refresh.Stop()
		if pv.busy {
			pv.gone, pv.waiters = true, nil
			return
		}
	}
	a.tearDown(m.UID)
}

// tearDown forgets the pod and removes its volumes (unmounting their
// tmpfs) off the mailbox.
func (a *Actor) tearDown(uid types.UID) {
	delete(a.pods, uid)
	dir := filepath.Join(a.cfg.PodsDir, string(uid), "volumes")
	files := a.files
	actorkit.Go(a.self, 0, func(context.Context) *tornDown {
		return &tornDown{uid: uid, err: files.RemoveAll(dir)}
	})
}

// podState is what a pod's setups carry from one to the next: the
// projected tokens issued (by volume/path; a token is reused until its
// renewal time, new ones are added) and the emptyDirs already set up.
type podState struct {
	tokens   map[string]token
	emptyDir map[string]bool
	certs    map[string]certState // podCertificate projections (by certKey)
}

// setUpPod writes every volume of the pod and returns their host paths and
// when to refresh (0: never).
func setUpPod(ctx context.Context, files Files, api API, cfg Config, pod *v1.Pod, now time.Time, st podState) (map[string]string, time.Duration, error) {
	base := filepath.Join(cfg.PodsDir, string(pod.UID), "volumes")
	paths := map[string]string{}
	var refreshIn time.Duration
	sooner := func(d time.Duration) {
		if d > 0 && (refreshIn == 0 || d < refreshIn) {
			refreshIn = d
		}
	}
	fsGroup := podspec.FSGroup(pod)
	for i := range pod.Spec.Volumes {
		v := &pod.Spec.Volumes[i]
		var dir string
		var err error
		// Projected, configMap, secret and downwardAPI volumes are files
		// written at once into dir; resync: when to write them again;
		// memory: on a tmpfs, as upstream wraps a memory-backed emptyDir
		// around secret, projected and downwardAPI volumes (configMaps
		// stay on disk there: "charging the memory for the tmpfs to the
		// right cgroup" is left to do).
		var write, memory bool
		var contents map[string]podspec.VolumeFile
		var resync time.Duration
		switch {
		case v.EmptyDir != nil:
			dir = filepath.Join(base, "kubernetes.io~empty-dir", v.Name)
			err = emptyDir(files, cfg, pod, v, dir, fsGroup, st.emptyDir)
		case v.HostPath != nil:
			dir = v.HostPath.Path
			if v.HostPath.Type != nil {
				err = files.HostPath(dir, *v.HostPath.Type)
			}
		case v.Projected != nil:
			dir = filepath.Join(base, "kubernetes.io~projected", v.Name)
			contents, resync, err = projected(ctx, api, cfg, pod, v.Name, v.Projected, now, st)
			write, memory = true, true
		case v.ConfigMap != nil:
			dir = filepath.Join(base, "kubernetes.io~configmap", v.Name)
			contents, err = configMapFiles(ctx, api, pod.Namespace, &v.ConfigMap.LocalObjectReference, v.ConfigMap.Items, v.ConfigMap.Optional, v.ConfigMap.DefaultMode)
			write, resync = true, cfg.ResyncEach
		case v.Secret != nil:
			dir = filepath.Join(base, "kubernetes.io~secret", v.Name)
			contents, err = secretFiles(ctx, api, pod.Namespace, v.Secret.SecretName, v.Secret.Items, v.Secret.Optional, v.Secret.DefaultMode)
			write, memory, resync = true, true, cfg.ResyncEach
		case v.DownwardAPI != nil:
			dir = filepath.Join(base, "kubernetes.io~downward-api", v.Name)
			contents, err = downward(pod, v.DownwardAPI.Items, v.DownwardAPI.DefaultMode, cfg.NodeAllocatable)
			write, memory = true, true
		default:
			err = fmt.Errorf("volume %q: this volume type is not supported by actorlet yet (supported: emptyDir, hostPath, projected, configMap, secret, downwardAPI)", v.Name)
		}
		if write && err == nil {
			sooner(resync)
			var size int64
			if memory {
				// Upstream's wrapped emptyDir has no sizeLimit: the
				// pod's memory limit, else the node's allocatable.
				size = podspec.EmptyDirMemorySize(pod, nil, cfg.NodeAllocatable)
			}
			err = files.WriteAtomic(dir, contents, fsGroup, memory, size)
		}
		if err != nil {
			return nil, 0, fmt.Errorf("volume %q: %w", v.Name, err)
		}
		paths[v.Name] = dir
	}
	return paths, refreshIn, nil
}

// emptyDir sets up an emptyDir once (done records it): a later refresh of
// the pod's volumes leaves it and its contents alone, as upstream, which
// changes their ownership only at the first setup.
func emptyDir(files Files, cfg Config, pod *v1.Pod, v *v1.Volume, dir string, fsGroup *int64, done map[string]bool) error {
	if done[v.Name] {
		return nil
	}
	var memory bool
	var size int64
	switch v.EmptyDir.Medium {
	case v1.StorageMediumDefault:
	case v1.StorageMediumMemory:
		memory, size = true, podspec.EmptyDirMemorySize(pod, v.EmptyDir, cfg.NodeAllocatable)
	default:
		return fmt.Errorf("%w: emptyDir medium %q is not supported by actorlet (supported: \"\" and Memory)", errdefs.ErrUnimplemented, v.EmptyDir.Medium)
	}
	if err := files.EmptyDir(dir, memory, size, fsGroup); err != nil {
		return err
	}
	done[v.Name] = true
	return nil
}

var errNoAPI = fmt.Errorf("%w: needs the API server (cluster mode)", errdefs.ErrFailedPrecondition)

// projected gathers the sources of a projected volume; the duration is when
// its token must be refreshed (at 80 %% of its lifetime, as upstream).
func projected(ctx context.Context, api API, cfg Config, pod *v1.Pod, volume string, p *v1.ProjectedVolumeSource, now time.Time, st podState) (map[string]podspec.VolumeFile, time.Duration, error) {
	tokens := st.tokens
	out := map[string]podspec.VolumeFile{}
	var refreshIn time.Duration
	sooner := func(d time.Duration) {
		if d > 0 && (refreshIn == 0 || d < refreshIn) {
			refreshIn = d
		}
	}
	add := func(files map[string]podspec.VolumeFile) {
		for k, v := range files {
			out[k] = v
		}
	}
	// With an fsUser or fsGroup a token, a certificate or a trust bundle
	// is 0600, owned by the pod's user; the fsGroup ownership makes it
	// 0640 (upstream).
	tokenFile := func(b []byte) podspec.VolumeFile {
		f := podspec.VolumeFile{Data: b, Mode: podspec.FileMode(nil, p.DefaultMode), FsUser: podspec.FsUser(pod)}
		if f.FsUser != nil || podspec.FSGroup(pod) != nil {
			f.Mode = 0o600
		}
		return f
	}
	for i, src := range p.Sources {
		switch {
		case src.ServiceAccountToken != nil:
			if api == nil {
				return nil, 0, errNoAPI
			}
			key := volume + "/" + src.ServiceAccountToken.Path
			if t, ok := tokens[key]; ok && now.Before(t.renewAt) {
				out[src.ServiceAccountToken.Path] = tokenFile(t.value) // still fresh: no new request
				sooner(t.renewAt.Sub(now))
				continue
			}
			exp := int64(3607)
			if src.ServiceAccountToken.ExpirationSeconds != nil {
				exp = *src.ServiceAccountToken.ExpirationSeconds
			}
			req := &authenticationv1.TokenRequest{Spec: authenticationv1.TokenRequestSpec{
				ExpirationSeconds: &exp,
				BoundObjectRef:    &authenticationv1.BoundObjectReference{APIVersion: "v1", Kind: "Pod", Name: pod.Name, UID: pod.UID},
			}}
			if a := src.ServiceAccountToken.Audience; a != "" {
				req.Spec.Audiences = []string{a}
			}
			sa := pod.Spec.ServiceAccountName
			if sa == "" {
				sa = "default"
			}
			tr, err := api.CreateToken(ctx, pod.Namespace, sa, req)
			if err != nil {
				return nil, 0, err
			}
			out[src.ServiceAccountToken.Path] = tokenFile([]byte(tr.Status.Token))
			renewIn := tr.Status.ExpirationTimestamp.Sub(now) * 8 / 10
			tokens[key] = token{value: []byte(tr.Status.Token), renewAt: now.Add(renewIn)}
			sooner(renewIn)
		case src.ConfigMap != nil:
			files, err := configMapFiles(ctx, api, pod.Namespace, &src.ConfigMap.LocalObjectReference, src.ConfigMap.Items, src.ConfigMap.Optional, p.DefaultMode)
			if err != nil {
				return nil, 0, err
			}
			add(files)
			sooner(cfg.ResyncEach)
		case src.Secret != nil:
			files, err := secretFiles(ctx, api, pod.Namespace, src.Secret.Name, src.Secret.Items, src.Secret.Optional, p.DefaultMode)
			if err != nil {
				return nil, 0, err
			}
			add(files)
		case src.DownwardAPI != nil:
			files, err := downward(pod, src.DownwardAPI.Items, p.DefaultMode, cfg.NodeAllocatable)
			if err != nil {
				return nil, 0, err
			}
			add(files)
		case src.PodCertificate != nil:
			key := certKey(volume, i)
			cs := st.certs[key]
			k, chain, again, err := podCertificate(ctx, cfg.Certs, cfg.Recorder, pod, src.PodCertificate, &cs, now)
			st.certs[key] = cs
			if err != nil {
				return nil, 0, err
			}
			podCertificateFiles(src.PodCertificate, k, chain, tokenFile(nil), out)
			sooner(again)
		case src.ClusterTrustBundle != nil:
			b, err := trustBundle(ctx, cfg.Certs, src.ClusterTrustBundle)
			if err != nil {
				return nil, 0, fmt.Errorf("clusterTrustBundle: %w", err)
			}
			out[src.ClusterTrustBundle.Path] = tokenFile(b)
			// Changes arrive as CredentialsChanged; the resync is
			// upstream's periodic remount.
			sooner(cfg.ResyncEach)
		default:
			return nil, 0, fmt.Errorf("%w: projected source %d of volume %q has no source set", errdefs.ErrInvalidArgument, i, volume)
		}
	}
	return out, refreshIn, nil
}

func configMapFiles(ctx context.Context, api API, ns string, ref *v1.LocalObjectReference, items []v1.KeyToPath, optional *bool, defaultMode *int32) (map[string]podspec.VolumeFile, error) {
	if api == nil {
		return nil, errNoAPI
	}
	cm, err := api.ConfigMap(ctx, ns, ref.Name)
	if errdefs.IsNotFound(err) && optional != nil && *optional {
		return map[string]podspec.VolumeFile{}, nil
	}
	if err != nil {
		return nil, err
	}
	data := map[string][]byte{}
	for k, v := range cm.Data {
		data[k] = []byte(v)
	}
	for k, v := range cm.BinaryData {
		data[k] = v
	}
	return pick(data, items, optional, defaultMode, "configmap "+ref.Name)
}

func secretFiles(ctx context.Context, api API, ns, name string, items []v1.KeyToPath, optional *bool, defaultMode *int32) (map[string]podspec.VolumeFile, error) {
	if api == nil {
		return nil, errNoAPI
	}
	s, err := api.Secret(ctx, ns, name)
	if errdefs.IsNotFound(err) && optional != nil && *optional {
		return map[string]podspec.VolumeFile{}, nil
	}
	if err != nil {
		return nil, err
	}
	return pick(s.Data, items, optional, defaultMode, "secret "+name)
}

// pick makes the files of a ConfigMap's or Secret's data: every key, or
// the items asked for, each with its mode or the volume's defaultMode.
func pick(data map[string][]byte, items []v1.KeyToPath, optional *bool, defaultMode *int32, what string) (map[string]podspec.VolumeFile, error) {
	out := map[string]podspec.VolumeFile{}
	if len(items) == 0 {
		for k, v := range data {
			out[k] = podspec.VolumeFile{Data: v, Mode: podspec.FileMode(nil, defaultMode)}
		}
		return out, nil
	}
	for _, it := range items {
		v, ok := data[it.Key]
		if !ok {
			if optional != nil && *optional {
				continue
			}
			return nil, fmt.Errorf("%s has no key %q", what, it.Key)
		}
		out[it.Path] = podspec.VolumeFile{Data: v, Mode: podspec.FileMode(it.Mode, defaultMode)}
	}
	return out, nil
}

// downward makes the files of downward API items: pod fields (fieldRef)
// and container resources (resourceFieldRef; an unset limit is the node's
// allocatable, as upstream).
func downward(pod *v1.Pod, items []v1.DownwardAPIVolumeFile, defaultMode *int32, allocatable v1.ResourceList) (map[string]podspec.VolumeFile, error) {
	allocatable = podspec.DownwardAllocatable(pod, allocatable) // pod-level limits first
	out := map[string]podspec.VolumeFile{}
	for _, it := range items {
		var v string
		switch {
		case it.FieldRef != nil:
			switch it.FieldRef.FieldPath {
			case "metadata.name":
				v = pod.Name
			case "metadata.namespace":
				v = pod.Namespace
			case "metadata.uid":
				v = string(pod.UID)
			case "metadata.labels":
				v = podspec.FormatMap(pod.Labels)
			case "metadata.annotations":
				v = podspec.FormatMap(pod.Annotations)
			case "spec.nodeName":
				v = pod.Spec.NodeName
			case "spec.serviceAccountName":
				v = pod.Spec.ServiceAccountName
			default:
				return nil, fmt.Errorf("downward API item %q: field %q is not supported", it.Path, it.FieldRef.FieldPath)
			}
		case it.ResourceFieldRef != nil:
			c := podspec.FindContainer(pod, it.ResourceFieldRef.ContainerName)
			if c == nil {
				return nil, fmt.Errorf("downward API item %q: %w: the pod has no container %q", it.Path, errdefs.ErrInvalidArgument, it.ResourceFieldRef.ContainerName)
			}
			var err error
			if v, err = podspec.ResourceFieldRef(c, it.ResourceFieldRef, allocatable); err != nil {
				return nil, fmt.Errorf("downward API item %q: %w", it.Path, err)
			}
		default:
			return nil, fmt.Errorf("downward API item %q: %w: it needs a fieldRef or a resourceFieldRef", it.Path, errdefs.ErrInvalidArgument)
		}
		out[it.Path] = podspec.VolumeFile{Data: []byte(v), Mode: podspec.FileMode(it.Mode, defaultMode)}
	}
	return out, nil
}
