package sim

import (
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
	maxInterned    = 8192
	maxInternedLen = 256
	maxImageSpecs  = 1024
)

type interner struct {
	mu     sync.Mutex
	strs   map[string]string
	specs  map[imageSpecKey]*runtimeapi.ImageSpec
	nsOpts map[nsOptsKey]*runtimeapi.NamespaceOption
}

type imageSpecKey struct{ image, user, handler string }

type nsOptsKey struct{ network, pid, ipc runtimeapi.NamespaceMode }

func newInterner() *interner {
	return &interner{
		strs:   map[string]string{},
		specs:  map[imageSpecKey]*runtimeapi.ImageSpec{},
		nsOpts: map[nsOptsKey]*runtimeapi.NamespaceOption{},
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
	if s, ok := in.specs[key]; ok {
		return s
	}
	if len(in.specs) < maxImageSpecs {
		in.specs[key] = &runtimeapi.ImageSpec{Image: in.str(key.image), UserSpecifiedImage: in.str(key.user), RuntimeHandler: in.str(key.handler)}
		return in.specs[key]
	}
	return spec
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
	if s, ok := in.nsOpts[key]; ok {
		return s
	}
	if len(in.nsOpts) < maxImageSpecs {
		in.nsOpts[key] = &runtimeapi.NamespaceOption{Network: key.network, Pid: key.pid, Ipc: key.ipc}
		return in.nsOpts[key]
	}
	return o
}
