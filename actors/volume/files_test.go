package volume

import (
	"os"
	"path/filepath"
	"strings"
	"syscall"
	"testing"
	"time"

	v1 "k8s.io/api/core/v1"
	"k8s.io/apimachinery/pkg/api/resource"

	"github.com/actorlet/actorlet/internal/actortest"
	"github.com/actorlet/actorlet/messages"

	"github.com/actorlet/actorlet/internal/testenv"
)

func ptr[T any](v T) *T { return &v }

// seen is a volume file as a container's user sees it.
type seen struct {
	content string
	mode    string // of the file the name leads to
	uid     uint32
	gid     uint32
}

func look(t *testing.T, path string) seen {
	t.Helper()
	b, err := os.ReadFile(path)
	if err != nil {
		t.Fatal(err)
	}
	info, err := os.Stat(path)
	if err != nil {
		t.Fatal(err)
	}
	st := info.Sys().(*syscall.Stat_t)
	return seen{content: string(b), mode: info.Mode().String(), uid: st.Uid, gid: st.Gid}
}

var allocatable = v1.ResourceList{v1.ResourceCPU: resource.MustParse("4"), v1.ResourceMemory: resource.MustParse("8Gi")}

func resources(limits, requests v1.ResourceList) v1.ResourceRequirements {
	return v1.ResourceRequirements{Limits: limits, Requests: requests}
}

func rf(ctr, res, divisor string) *v1.ResourceFieldSelector {
	s := &v1.ResourceFieldSelector{ContainerName: ctr, Resource: res}
	if divisor != "" {
		s.Divisor = resource.MustParse(divisor)
	}
	return s
}

// resourceItems are downward API items for each resource of container c.
func resourceItems() []v1.DownwardAPIVolumeFile {
	return []v1.DownwardAPIVolumeFile{
		{Path: "cpu_limit", ResourceFieldRef: rf("c", "limits.cpu", "")},
		{Path: "memory_limit", ResourceFieldRef: rf("c", "limits.memory", "")},
		{Path: "cpu_request", ResourceFieldRef: rf("c", "requests.cpu", "1m")},
		{Path: "memory_request", ResourceFieldRef: rf("c", "requests.memory", "1Mi"), Mode: ptr(int32(0o600))},
		{Path: "default_cpu_limit", ResourceFieldRef: rf("other", "limits.cpu", "")},
		{Path: "default_memory_limit", ResourceFieldRef: rf("other", "limits.memory", "1Mi")},
		{Path: "podname", FieldRef: &v1.ObjectFieldSelector{FieldPath: "metadata.name"}},
	}
}

func TestVolumeFilesAsUsersSeeThem(t *testing.T) {
	containers := []v1.Container{
		{Name: "c", Resources: resources(
			v1.ResourceList{v1.ResourceCPU: resource.MustParse("1250m"), v1.ResourceMemory: resource.MustParse("128Mi")},
			v1.ResourceList{v1.ResourceCPU: resource.MustParse("250m"), v1.ResourceMemory: resource.MustParse("32Mi")})},
		{Name: "other"},
	}
	resourceWant := func(dir string, mode string) map[string]seen {
		return map[string]seen{
			dir + "/cpu_limit":            {content: "2", mode: mode},
			dir + "/memory_limit":         {content: "134217728", mode: mode},
			dir + "/cpu_request":          {content: "250", mode: mode},
			dir + "/memory_request":       {content: "32", mode: "-rw-------"},
			dir + "/default_cpu_limit":    {content: "4", mode: mode},
			dir + "/default_memory_limit": {content: "8192", mode: mode},
			dir + "/podname":              {content: "p", mode: mode},
		}
	}
	tests := []struct {
		name     string
		root     bool // chown needs root
		security *v1.PodSecurityContext
		volumes  []v1.Volume
		want     map[string]seen // by volume/path
	}{
		{name: "downwardAPI resourceFieldRef with defaultMode and item mode",
			volumes: []v1.Volume{{Name: "podinfo", VolumeSource: v1.VolumeSource{DownwardAPI: &v1.DownwardAPIVolumeSource{
				Items: resourceItems(), DefaultMode: ptr(int32(0o400))}}}},
			want: resourceWant("podinfo", "-r--------")},
		{name: "projected downwardAPI resourceFieldRef",
			volumes: []v1.Volume{{Name: "podinfo", VolumeSource: v1.VolumeSource{Projected: &v1.ProjectedVolumeSource{
				Sources: []v1.VolumeProjection{{DownwardAPI: &v1.DownwardAPIProjection{Items: resourceItems()}}}}}}},
			want: resourceWant("podinfo", "-rw-r--r--")},
		{name: "configMap as non-root with fsGroup: group-readable, the item mode kept",
			root: true, security: &v1.PodSecurityContext{RunAsUser: ptr(int64(1000)), FSGroup: ptr(int64(1234))},
			volumes: []v1.Volume{{Name: "cm", VolumeSource: v1.VolumeSource{ConfigMap: &v1.ConfigMapVolumeSource{
				LocalObjectReference: v1.LocalObjectReference{Name: "cfg"},
				Items:                []v1.KeyToPath{{Key: "data-1", Path: "data-1"}, {Key: "data-2", Path: "path/to/data-2", Mode: ptr(int32(0o400))}}}}}},
			want: map[string]seen{
				"cm/data-1":         {content: "value-1", mode: "-rw-r--r--", gid: 1234},
				"cm/path/to/data-2": {content: "value-2", mode: "-r--r-----", gid: 1234},
			}},
		{name: "secret with defaultMode and fsGroup",
			root: true, security: &v1.PodSecurityContext{RunAsUser: ptr(int64(1000)), FSGroup: ptr(int64(1001))},
			volumes: []v1.Volume{{Name: "sec", VolumeSource: v1.VolumeSource{Secret: &v1.SecretVolumeSource{
				SecretName: "s", DefaultMode: ptr(int32(0o400))}}}},
			want: map[string]seen{"sec/data-1": {content: "secret-1", mode: "-r--r-----", gid: 1001}}},
		{name: "projected token owned by the pod's user, readable by its group",
			root: true, security: &v1.PodSecurityContext{RunAsUser: ptr(int64(1234)), FSGroup: ptr(int64(2345))},
			volumes: []v1.Volume{kubeAPIAccess()},
			want: map[string]seen{
				"kube-api-access-x/token":     {content: "ns1/default/1", mode: "-rw-r-----", uid: 1234, gid: 2345},
				"kube-api-access-x/ca.crt":    {content: "CA", mode: "-rw-r--r--", gid: 2345},
				"kube-api-access-x/namespace": {content: "ns1", mode: "-rw-r--r--", gid: 2345},
			}},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			if tt.root {
				testenv.NeedRoot(t)
			}
			h := newHarnessWith(t, true, Config{NodeAllocatable: allocatable})
			h.api.cms["ns1/cfg"] = &v1.ConfigMap{Data: map[string]string{"data-1": "value-1", "data-2": "value-2"}}
			h.api.secret = map[string]*v1.Secret{"ns1/s": {Data: map[string][]byte{"data-1": []byte("secret-1")}}}
			pod := testPod(tt.volumes...)
			pod.Spec.Containers = containers
			pod.Spec.SecurityContext = tt.security
			r := h.ensure(t, pod)
			if r.Reason != "" {
				t.Fatalf("setup failed: %s", r.Message)
			}
			for name, want := range tt.want {
				vol, file, _ := cut(name)
				if got := look(t, filepath.Join(r.Paths[vol], file)); got != want {
					t.Errorf("%s: %+v, want %+v", name, got, want)
				}
			}
		})
	}
}

func cut(s string) (before, after string, ok bool) {
	for i := range len(s) {
		if s[i] == '/' {
			return s[:i], s[i+1:], true
		}
	}
	return s, "", false
}

// tmpfsSize is the size in bytes of the tmpfs mounted at dir, -1 when
// dir is no tmpfs root.
func tmpfsSize(t *testing.T, dir string) int64 {
	t.Helper()
	var st, parent syscall.Statfs_t
	if err := syscall.Statfs(dir, &st); err != nil {
		t.Fatal(err)
	}
	if err := syscall.Statfs(filepath.Dir(dir), &parent); err != nil {
		t.Fatal(err)
	}
	const tmpfsMagic = 0x01021994
	var ds, ps syscall.Stat_t
	_ = syscall.Stat(dir, &ds)
	_ = syscall.Stat(filepath.Dir(dir), &ps)
	if st.Type != tmpfsMagic || ds.Dev == ps.Dev {
		return -1
	}
	return int64(st.Blocks) * st.Bsize
}

func TestEmptyDirs(t *testing.T) {
	testenv.NeedRoot(t)
	h := newHarnessWith(t, true, Config{NodeAllocatable: allocatable})
	pod := testPod(
		v1.Volume{Name: "disk", VolumeSource: v1.VolumeSource{EmptyDir: &v1.EmptyDirVolumeSource{}}},
		v1.Volume{Name: "mem", VolumeSource: v1.VolumeSource{EmptyDir: &v1.EmptyDirVolumeSource{Medium: v1.StorageMediumMemory}}},
		v1.Volume{Name: "mem-sized", VolumeSource: v1.VolumeSource{EmptyDir: &v1.EmptyDirVolumeSource{
			Medium: v1.StorageMediumMemory, SizeLimit: ptr(resource.MustParse("10Mi"))}}},
		kubeAPIAccess(), // refreshed every minute
	)
	pod.Spec.Containers = []v1.Container{{Name: "c", Resources: resources(v1.ResourceList{v1.ResourceMemory: resource.MustParse("64Mi")}, nil)}}
	pod.Spec.SecurityContext = &v1.PodSecurityContext{RunAsUser: ptr(int64(1234)), FSGroup: ptr(int64(1234))}
	r := h.ensure(t, pod)
	if r.Reason != "" {
		t.Fatalf("setup failed: %s", r.Message)
	}
	tests := []struct {
		name string
		vol  string
		mode string
		size int64 // of the tmpfs; -1: none
	}{
		{name: "on disk: everyone writes, files get the fsGroup", vol: "disk", mode: "dgrwxrwxrwx", size: -1},
		{name: "memory: a tmpfs of the pod's memory limit", vol: "mem", mode: "dgtrwxrwxrwx", size: 64 << 20},
		{name: "memory with a sizeLimit below it: that size", vol: "mem-sized", mode: "dgtrwxrwxrwx", size: 10 << 20},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			dir := r.Paths[tt.vol]
			info, err := os.Stat(dir)
			if err != nil {
				t.Fatal(err)
			}
			if got := info.Mode().String(); got != tt.mode {
				t.Errorf("mode %s, want %s", got, tt.mode)
			}
			if st := info.Sys().(*syscall.Stat_t); st.Gid != 1234 {
				t.Errorf("group %d, want 1234", st.Gid)
			}
			if got := tmpfsSize(t, dir); got != tt.size {
				t.Errorf("tmpfs size %d, want %d", got, tt.size)
			}
		})
	}
	// What the containers wrote is theirs: a refresh of the pod's volumes
	// changes no mode in its emptyDirs.
	private := filepath.Join(r.Paths["disk"], "private")
	if err := os.WriteFile(private, []byte("x"), 0o600); err != nil {
		t.Fatal(err)
	}
	// The refresh timer is armed after VolumesReady is sent: step only once
	// it is (the harness's clock has no other user).
	actortest.Eventually(t, "the refresh armed", h.clk.HasWaiters)
	h.clk.Step(61 * time.Second)
	actortest.Eventually(t, "the volumes refreshed", func() bool {
		h.api.mu.Lock()
		defer h.api.mu.Unlock()
		return h.api.cmGets >= 2 && h.clk.HasWaiters()
	})
	if got := look(t, private).mode; got != "-rw-------" {
		t.Errorf("a container's file became %s after a refresh", got)
	}
	// Teardown unmounts the tmpfs and removes everything.
	h.sys.Root.Send(h.pid, &messages.TearDownVolumes{UID: pod.UID})
	actortest.Eventually(t, "the volumes unmounted and removed", func() bool {
		_, err := os.Stat(filepath.Join(h.dir, string(pod.UID), "volumes"))
		return os.IsNotExist(err)
	})
	if ms, _ := os.ReadFile("/proc/self/mountinfo"); contains(string(ms), h.dir) {
		t.Errorf("still mounted under %s", h.dir)
	}
}

// mountsUnder lists the mounts under dir as /proc/self/mountinfo shows
// them: mount point -> filesystem type.
func mountsUnder(t *testing.T, dir string) map[string]string {
	t.Helper()
	b, err := os.ReadFile("/proc/self/mountinfo")
	if err != nil {
		t.Fatal(err)
	}
	out := map[string]string{}
	for _, line := range strings.Split(string(b), "\n") {
		// id parent major:minor root mountpoint options [optional...] - fstype source superoptions
		pre, post, ok := strings.Cut(line, " - ")
		f, g := strings.Fields(pre), strings.Fields(post)
		if !ok || len(f) < 5 || len(g) < 1 {
			continue
		}
		if f[4] == dir || strings.HasPrefix(f[4], dir+"/") {
			out[f[4]] = g[0]
		}
	}
	return out
}

// Running as root, secret, projected and downwardAPI volumes are each a
// tmpfs of their own, as upstream's (a memory-backed emptyDir wrapped
// around them: a service-account token never reaches the disk), sized as
// upstream's (the pod's memory limit, else the node's allocatable); a
// configMap volume stays on disk, as upstream's. A refresh writes into
// the same tmpfs; the teardown unmounts them all and removes the volumes.
func TestMemoryBackedVolumesAreTmpfsMounts(t *testing.T) {
	testenv.NeedRoot(t)
	h := newHarnessWith(t, true, Config{NodeAllocatable: allocatable})
	h.api.secret = map[string]*v1.Secret{"ns1/creds": {Data: map[string][]byte{"password": []byte("s3cret")}}}
	pod := testPod(
		v1.Volume{Name: "creds", VolumeSource: v1.VolumeSource{Secret: &v1.SecretVolumeSource{SecretName: "creds"}}},
		kubeAPIAccess(),
		v1.Volume{Name: "podinfo", VolumeSource: v1.VolumeSource{DownwardAPI: &v1.DownwardAPIVolumeSource{
			Items: []v1.DownwardAPIVolumeFile{{Path: "name", FieldRef: &v1.ObjectFieldSelector{FieldPath: "metadata.name"}}}}}},
		v1.Volume{Name: "cfg", VolumeSource: v1.VolumeSource{ConfigMap: &v1.ConfigMapVolumeSource{
			LocalObjectReference: v1.LocalObjectReference{Name: "kube-root-ca.crt"}}}},
	)
	pod.Spec.Containers = []v1.Container{{Name: "c", Resources: resources(v1.ResourceList{v1.ResourceMemory: resource.MustParse("64Mi")}, nil)}}
	r := h.ensure(t, pod)
	if r.Reason != "" {
		t.Fatalf("setup failed: %s", r.Message)
	}
	want := map[string]string{r.Paths["creds"]: "tmpfs", r.Paths["kube-api-access-x"]: "tmpfs", r.Paths["podinfo"]: "tmpfs"}
	got := mountsUnder(t, h.dir)
	if len(got) != len(want) {
		t.Errorf("mounts under the pods directory: %v, want %v", got, want)
	}
	for dir, fsType := range want {
		if got[dir] != fsType {
			t.Errorf("%s: mounted %q, want %q", dir, got[dir], fsType)
		}
		if size := tmpfsSize(t, dir); size != 64<<20 {
			t.Errorf("%s: tmpfs of %d bytes, want the pod's memory limit", dir, size)
		}
		if info, err := os.Stat(dir); err != nil || info.Mode().String() != "drwxr-xr-x" {
			t.Errorf("%s: %v (%v), want drwxr-xr-x as on disk", dir, info, err)
		}
	}
	for path, content := range map[string]string{
		filepath.Join(r.Paths["creds"], "password"): "s3cret", filepath.Join(r.Paths["kube-api-access-x"], "token"): "ns1/default/1",
		filepath.Join(r.Paths["podinfo"], "name"): "p", filepath.Join(r.Paths["cfg"], "ca.crt"): "CA",
	} {
		if got := look(t, path).content; got != content {
			t.Errorf("%s = %q, want %q", path, got, content)
		}
	}
	// A refresh (the secret changed) writes into the same tmpfs: nothing
	// is mounted again.
	h.api.mu.Lock()
	h.api.secret["ns1/creds"] = &v1.Secret{Data: map[string][]byte{"password": []byte("n3w")}}
	h.api.mu.Unlock()
	actortest.Eventually(t, "the refresh armed", h.clk.HasWaiters)
	h.clk.Step(61 * time.Second)
	password := filepath.Join(r.Paths["creds"], "password")
	actortest.Eventually(t, "the secret rewritten", func() bool {
		b, _ := os.ReadFile(password)
		return string(b) == "n3w"
	})
	if got := mountsUnder(t, h.dir); len(got) != len(want) {
		t.Errorf("mounts after a refresh: %v, want %v", got, want)
	}
	h.sys.Root.Send(h.pid, &messages.TearDownVolumes{UID: pod.UID})
	actortest.Eventually(t, "the volumes unmounted and removed", func() bool {
		_, err := os.Stat(filepath.Join(h.dir, string(pod.UID), "volumes"))
		return os.IsNotExist(err)
	})
	if got := mountsUnder(t, h.dir); len(got) != 0 {
		t.Errorf("still mounted after the teardown: %v", got)
	}
}
