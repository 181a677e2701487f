package sim

import (
	"fmt"
	"maps"
	"testing"
	"unsafe"

	runtimeapi "k8s.io/cri-api/pkg/apis/runtime/v1"
)

func same(a, b string) bool { return unsafe.StringData(a) == unsafe.StringData(b) }

func TestInternLabels(t *testing.T) {
	in := newInterner()
	sbLabels := in.labels(map[string]string{"io.kubernetes.pod.uid": "u1", "app": "web"}, nil)
	name := string([]byte("c1"))
	tests := []struct {
		name      string
		m, peer   map[string]string
		local     []string
		key       string
		wantSame  string // the value must be this very string
		wantEqual map[string]string
	}{
		{"peer value", map[string]string{"io.kubernetes.pod.uid": string([]byte("u1"))}, sbLabels, nil, "io.kubernetes.pod.uid", sbLabels["io.kubernetes.pod.uid"], map[string]string{"io.kubernetes.pod.uid": "u1"}},
		{"local value", map[string]string{"io.kubernetes.container.name": string([]byte("c1"))}, sbLabels, []string{name}, "io.kubernetes.container.name", name, map[string]string{"io.kubernetes.container.name": "c1"}},
		{"peer key with another value", map[string]string{"app": string([]byte("db"))}, sbLabels, nil, "app", in.labels(map[string]string{"app": "db"}, nil)["app"], map[string]string{"app": "db"}},
		{"interned value", map[string]string{"k": string([]byte("File"))}, nil, nil, "k", in.labels(map[string]string{"x": "File"}, nil)["x"], map[string]string{"k": "File"}},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			got := in.labels(tt.m, tt.peer, tt.local...)
			if !maps.Equal(got, tt.wantEqual) {
				t.Fatalf("got %v, want %v", got, tt.wantEqual)
			}
			if !same(got[tt.key], tt.wantSame) {
				t.Errorf("value of %s is a copy, want the shared string", tt.key)
			}
			for k := range got {
				if !same(k, in.str(k)) {
					t.Errorf("key %s is not interned", k)
				}
			}
		})
	}
	if got := in.labels(nil, nil); got != nil {
		t.Errorf("labels(nil) = %v, want nil", got)
	}
	if got := in.labels(map[string]string{}, nil); got == nil {
		t.Error("labels of an empty map = nil, want the empty map")
	}
}

func TestInternBounds(t *testing.T) {
	in := newInterner()
	for i := range maxInterned + 10 {
		in.str(fmt.Sprint("s", i))
	}
	if len(in.strs) != maxInterned {
		t.Fatalf("%d strings interned, want the bound %d", len(in.strs), maxInterned)
	}
	long := string(make([]byte, maxInternedLen+1))
	if got := in.str(long); !same(got, long) || len(in.strs) != maxInterned {
		t.Error("a long string was interned")
	}
	// Full: a new string comes back as it is, a known one shared.
	fresh := string([]byte("fresh"))
	if got := in.str(fresh); !same(got, fresh) {
		t.Error("a full table returned a copy")
	}
	if a, b := in.str(string([]byte("s1"))), in.str(string([]byte("s1"))); !same(a, b) {
		t.Error("a known string is not shared when the table is full")
	}
}

func TestInternMessages(t *testing.T) {
	in := newInterner()
	spec := func(img string, ann map[string]string) *runtimeapi.ImageSpec {
		return &runtimeapi.ImageSpec{Image: img, UserSpecifiedImage: "busybox", Annotations: ann}
	}
	a, b := in.imageSpec(spec("busybox:1", nil)), in.imageSpec(spec("busybox:1", nil))
	if a != b || a.GetImage() != "busybox:1" || a.GetUserSpecifiedImage() != "busybox" {
		t.Errorf("equal specs not shared: %v %v", a, b)
	}
	if c := in.imageSpec(spec("busybox:2", nil)); c == a || c.GetImage() != "busybox:2" {
		t.Errorf("different spec shared: %v", c)
	}
	withAnn := spec("busybox:1", map[string]string{"a": "b"})
	if got := in.imageSpec(withAnn); got != withAnn {
		t.Error("a spec with annotations was replaced")
	}
	if in.imageSpec(nil) != nil {
		t.Error("nil spec")
	}
	ns := func(net runtimeapi.NamespaceMode, target string) *runtimeapi.NamespaceOption {
		return &runtimeapi.NamespaceOption{Network: net, Pid: runtimeapi.NamespaceMode_CONTAINER, TargetId: target}
	}
	x, y := in.namespaceOptions(ns(runtimeapi.NamespaceMode_NODE, "")), in.namespaceOptions(ns(runtimeapi.NamespaceMode_NODE, ""))
	if x != y || x.GetNetwork() != runtimeapi.NamespaceMode_NODE || x.GetPid() != runtimeapi.NamespaceMode_CONTAINER {
		t.Errorf("equal options not shared: %v %v", x, y)
	}
	if z := in.namespaceOptions(ns(runtimeapi.NamespaceMode_POD, "")); z == x {
		t.Error("different options shared")
	}
	withTarget := ns(runtimeapi.NamespaceMode_NODE, "ctr")
	if got := in.namespaceOptions(withTarget); got != withTarget {
		t.Error("options with a target were replaced")
	}
}

func TestInternSharedMap(t *testing.T) {
	in := newInterner()
	m := func(kv ...string) map[string]string {
		out := map[string]string{}
		for i := 0; i+1 < len(kv); i += 2 {
			out[kv[i]] = kv[i+1]
		}
		return out
	}
	a := in.sharedMap(m("hash", "1a", "restartCount", "0"))
	tests := []struct {
		name  string
		m     map[string]string
		share bool
	}{
		{"equal", m("restartCount", "0", "hash", "1a"), true},
		{"other value", m("hash", "1b", "restartCount", "0"), false},
		{"fewer keys", m("hash", "1a"), false},
		{"key and value run together", m("hash\x001a", "", "restartCount", "0"), false},
		{"NUL in a value", m("hash", "1a\x00restartCount", "0", ""), false},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			got := in.sharedMap(tt.m)
			if !maps.Equal(got, tt.m) {
				t.Fatalf("got %v, want %v", got, tt.m)
			}
			if shared := fmt.Sprintf("%p", got) == fmt.Sprintf("%p", a); shared != tt.share {
				t.Errorf("shared %t, want %t", shared, tt.share)
			}
		})
	}
	for i := range maxSharedMaps + 10 {
		in.sharedMap(m("k", fmt.Sprint(i)))
	}
	if len(in.maps) != maxSharedMaps {
		t.Errorf("%d maps kept, want the bound %d", len(in.maps), maxSharedMaps)
	}
}
