package sim

import (
	"encoding/binary"
	"maps"
	"slices"
	"strings"
	"sync"

	runtimeapi "k8s.io/cri-api/pkg/apis/runtime/v1"
)

// What the runtime keeps of a sandbox's or a container's config (its
// statuses and lists answer with it) repeats from pod to pod: the label and
// annotation keys, a pod's name, namespace and UID (in the sandbox's
// metadata and labels, and again in each container's labels), image names,
// annotation values such as "/dev/termination-log" and "File". Each
// decoded request has its own copy of every string; an interned copy is
// shared instead (about 1 KB a pod at 10,000 pods).

// Bounds of the intern table: it keeps what it has taken for the runtime's
// life, so it stops taking new strings when full (they are then kept as
// decoded), and long ones are not worth a lookup.
const (
	maxInterned     = 8192
	maxInternedLen  = 256
	maxImageSpecs   = 1024
	maxSharedMaps   = 1024
	maxSharedMapKey = 4096
)

type interner struct {
	mu     sync.Mutex
	strs   map[string]string
	specs  map[imageSpecKey]*runtimeapi.ImageSpec
	nsOpts map[nsOptsKey]*runtimeapi.NamespaceOption
	maps   map[string]map[string]string
}

type imageSpecKey struct{ image, user, handler string }

type nsOptsKey struct{ network, pid, ipc runtimeapi.NamespaceMode }

func newInterner() *interner {
	return &interner{
		strs:   map[string]string{},
		specs:  map[imageSpecKey]*runtimeapi.ImageSpec{},
		nsOpts: map[nsOptsKey]*runtimeapi.NamespaceOption{},
		maps:   map[string]map[string]string{},
	}
}

// str returns the shared copy of s; the caller holds in.mu.
func (in *interner) str(s string) string {
	if s == "" || len(s) > maxInternedLen {
		return s
	}
	if v, ok := in.strs[s]; ok {
		return v
	}
	if len(in.strs) < maxInterned {
		s = strings.Clone(s) // never a slice of something larger
		in.strs[s] = s
	}
	return s
}

// labels returns m with its keys and values shared: a value equal to the
// same key's value in peer (a container's labels against its sandbox's),
// or to one of local (the object's metadata), is that string; others are
// interned. m itself is not changed (an in-process caller may still hold
// it); an empty m is returned as it is.
func (in *interner) labels(m, peer map[string]string, local ...string) map[string]string {
	if len(m) == 0 {
		return m
	}
	out := make(map[string]string, len(m))
	in.mu.Lock()
	defer in.mu.Unlock()
	for k, v := range m {
		out[in.str(k)] = in.value(k, v, peer, local)
	}
	return out
}

func (in *interner) value(k, v string, peer map[string]string, local []string) string {
	if pv, ok := peer[k]; ok && pv == v {
		return pv
	}
	for _, l := range local {
		if l == v {
			return l
		}
	}
	return in.str(v)
}

// imageSpec returns one shared spec for the specs that differ in nothing
// but their pointer (no annotations, no unknown fields), else spec.
func (in *interner) imageSpec(spec *runtimeapi.ImageSpec) *runtimeapi.ImageSpec {
	if spec == nil || len(spec.GetAnnotations()) > 0 || len(spec.ProtoReflect().GetUnknown()) > 0 {
		return spec
	}
	key := imageSpecKey{spec.GetImage(), spec.GetUserSpecifiedImage(), spec.GetRuntimeHandler()}
	in.mu.Lock()
	defer in.mu.Unlock()
	return keepShared(in.specs, key, spec, func() *runtimeapi.ImageSpec {
		return &runtimeapi.ImageSpec{Image: in.str(key.image), UserSpecifiedImage: in.str(key.user), RuntimeHandler: in.str(key.handler)}
	})
}

// namespaceOptions returns one shared option for the options that differ
// in nothing but their pointer (modes only), else o.
func (in *interner) namespaceOptions(o *runtimeapi.NamespaceOption) *runtimeapi.NamespaceOption {
	if o.GetTargetId() != "" || o.GetUsernsOptions() != nil || len(o.ProtoReflect().GetUnknown()) > 0 {
		return o
	}
	key := nsOptsKey{o.GetNetwork(), o.GetPid(), o.GetIpc()}
	in.mu.Lock()
	defer in.mu.Unlock()
	return keepShared(in.nsOpts, key, o, func() *runtimeapi.NamespaceOption {
		return &runtimeapi.NamespaceOption{Network: key.network, Pid: key.pid, Ipc: key.ipc}
	})
}

// keepShared returns the value kept for key in kept, else one made by
// mk and kept (while kept holds fewer than maxImageSpecs), else v
// itself. The caller holds the interner's lock.
func keepShared[K comparable, V any](kept map[K]V, key K, v V, mk func() V) V {
	if s, ok := kept[key]; ok {
		return s
	}
	if len(kept) < maxImageSpecs {
		kept[key] = mk()
		return kept[key]
	}
	return v
}

// sharedMap returns one map for the equal maps m (their keys and values
// already interned): a container's annotations (hash, restart count,
// termination message path and policy, grace period) are the same for
// every replica of a pod template. The maps kept are never changed.
func (in *interner) sharedMap(m map[string]string) map[string]string {
	if len(m) == 0 {
		return m
	}
	keys := slices.Sorted(maps.Keys(m))
	var b []byte // each key and value length-prefixed: no two maps alike
	for _, k := range keys {
		v := m[k]
		b = binary.AppendUvarint(b, uint64(len(k)))
		b = append(b, k...)
		b = binary.AppendUvarint(b, uint64(len(v)))
		b = append(b, v...)
		if len(b) > maxSharedMapKey {
			return m
		}
	}
	key := string(b)
	in.mu.Lock()
	defer in.mu.Unlock()
	if s, ok := in.maps[key]; ok {
		return s
	}
	if len(in.maps) < maxSharedMaps {
		in.maps[key] = m
	}
	return m
}

// mount is a mount with nothing but its paths and flags, as the node
// agent's are (a fifth of the size of a decoded runtimeapi.Mount).
type mount struct {
	containerPath, hostPath  string
	readonly, selinuxRelabel bool
	propagation              runtimeapi.MountPropagation
}

// plainMounts returns ms as mounts, their container paths interned; ok is
// false when one has more than a mount keeps (ID mappings, an image, a
// recursive read-only, fields this runtime does not know).
func (in *interner) plainMounts(ms []*runtimeapi.Mount) (plain []mount, ok bool) {
	for _, m := range ms {
		if m == nil || len(m.GetUidMappings()) > 0 || len(m.GetGidMappings()) > 0 || m.GetRecursiveReadOnly() ||
			m.GetImage() != nil || m.GetImageSubPath() != "" || len(m.ProtoReflect().GetUnknown()) > 0 {
			return nil, false
		}
	}
	if len(ms) == 0 {
		return nil, true
	}
	plain = make([]mount, len(ms))
	in.mu.Lock()
	defer in.mu.Unlock()
	for i, m := range ms {
		plain[i] = mount{
			containerPath:  in.str(m.GetContainerPath()),
			hostPath:       m.GetHostPath(),
			readonly:       m.GetReadonly(),
			selinuxRelabel: m.GetSelinuxRelabel(),
			propagation:    m.GetPropagation(),
		}
	}
	return plain, true
}
