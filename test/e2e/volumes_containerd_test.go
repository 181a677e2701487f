package e2e

import (
	"context"
	"os"
	"path/filepath"
	"regexp"
	"strings"
	"testing"
	"time"

	v1 "k8s.io/api/core/v1"
	"k8s.io/apimachinery/pkg/api/resource"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"

	"github.com/actorlet/actorlet/internal/testenv"
)

// volumeReport is what the container of TestE2EClusterContainerdVolumesAsNonRoot
// prints: each line what a non-root user sees of one volume (stat -L
// follows the volume's symlinks to the file itself).
const volumeReport = `echo "user $(id -u)"
echo "cm $(cat /etc/cm/data-1) $(stat -L -c '%A %g' /etc/cm/data-1)"
echo "item $(cat /etc/cm/path/to/data-2) $(stat -L -c '%A %g' /etc/cm/path/to/data-2)"
echo "secret $(cat /etc/secret/data-1) $(stat -L -c '%A %g' /etc/secret/data-1)"
t=/var/run/secrets/kubernetes.io/serviceaccount/token
cat $t >/dev/null && echo "token $(stat -L -c '%A %u %g' $t)"
echo hello > /scratch/f && echo "scratch $(stat -c '%A %g' /scratch) $(stat -c '%g' /scratch/f)"
echo x > /mem/f && echo "mem $(grep ' /mem ' /proc/mounts | cut -d' ' -f3) $(df -k /mem | tail -1 | awk '{print $2}') $(stat -c '%A' /mem)"
echo "podinfo $(cat /podinfo/memory_limit) $(cat /podinfo/cpu_request) $(cat /podinfo/cpu_limit) $(stat -L -c '%A' /podinfo/cpu_limit)"
echo done
sleep 3600`

// TestE2EClusterContainerdVolumesAsNonRoot is a user's pod running as user
// 1234 with fsGroup 1234 on a real containerd: it reads its ConfigMap and
// Secret files (made group-readable, with their defaultMode and item mode),
// its service-account token (owned by its user), writes into a disk-backed
// emptyDir (0777, setgid: its files get the fsGroup) and into a
// memory-backed one (a tmpfs of its sizeLimit), and reads container
// resources from a downwardAPI volume (the unset cpu limit: the node's
// allocatable). Once the pod is deleted, nothing of its volumes stays
// mounted or on disk.
func TestE2EClusterContainerdVolumesAsNonRoot(t *testing.T) {
	const node, name = "e2e-volumes", "volumes-nonroot"
	c := newCluster(t)
	env := testenv.ContainerdInfo(t)
	ip := nonLoopbackIPv4(t)
	a := c.startNode(t, node, agentOpts{endpoint: env.Endpoint, extra: []string{"--node-ip", ip, "--address", ip}})
	a.host = ip
	c.waitNodeReady(t, node, v1.ConditionTrue, time.Minute)
	ctx := context.Background()
	core := c.cs.CoreV1()
	cm := &v1.ConfigMap{ObjectMeta: metav1.ObjectMeta{Name: "e2e-volumes-cm", Namespace: "default"},
		Data: map[string]string{"data-1": "value-1", "data-2": "value-2"}}
	secret := &v1.Secret{ObjectMeta: metav1.ObjectMeta{Name: "e2e-volumes-secret", Namespace: "default"},
		Data: map[string][]byte{"data-1": []byte("secret-1")}}
	_ = core.ConfigMaps("default").Delete(ctx, cm.Name, metav1.DeleteOptions{})
	_ = core.Secrets("default").Delete(ctx, secret.Name, metav1.DeleteOptions{})
	if _, err := core.ConfigMaps("default").Create(ctx, cm, metav1.CreateOptions{}); err != nil {
		t.Fatal(err)
	}
	if _, err := core.Secrets("default").Create(ctx, secret, metav1.CreateOptions{}); err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() {
		_ = core.ConfigMaps("default").Delete(context.Background(), cm.Name, metav1.DeleteOptions{})
		_ = core.Secrets("default").Delete(context.Background(), secret.Name, metav1.DeleteOptions{})
	})

	user, mode0400 := int64(1234), int32(0o400)
	tenMi := resource.MustParse("10Mi")
	field := func(path, res, divisor string) v1.DownwardAPIVolumeFile {
		return v1.DownwardAPIVolumeFile{Path: path, ResourceFieldRef: &v1.ResourceFieldSelector{
			ContainerName: "main", Resource: res, Divisor: resource.MustParse(divisor)}}
	}
	pod := apiPod(name, node, env.BusyboxImage, "sh", "-c", volumeReport)
	pod.Spec.SecurityContext = &v1.PodSecurityContext{RunAsUser: &user, FSGroup: &user}
	pod.Spec.Containers[0].Resources = v1.ResourceRequirements{
		Requests: v1.ResourceList{v1.ResourceCPU: resource.MustParse("250m")},
		Limits:   v1.ResourceList{v1.ResourceMemory: resource.MustParse("64Mi")},
	}
	pod.Spec.Volumes = []v1.Volume{
		{Name: "cm", VolumeSource: v1.VolumeSource{ConfigMap: &v1.ConfigMapVolumeSource{
			LocalObjectReference: v1.LocalObjectReference{Name: cm.Name}, DefaultMode: &mode0400,
			Items: []v1.KeyToPath{{Key: "data-1", Path: "data-1"}, {Key: "data-2", Path: "path/to/data-2", Mode: new(int32(0o600))}}}}},
		{Name: "secret", VolumeSource: v1.VolumeSource{Secret: &v1.SecretVolumeSource{SecretName: secret.Name, DefaultMode: &mode0400}}},
		{Name: "scratch", VolumeSource: v1.VolumeSource{EmptyDir: &v1.EmptyDirVolumeSource{}}},
		{Name: "mem", VolumeSource: v1.VolumeSource{EmptyDir: &v1.EmptyDirVolumeSource{Medium: v1.StorageMediumMemory, SizeLimit: &tenMi}}},
		{Name: "podinfo", VolumeSource: v1.VolumeSource{DownwardAPI: &v1.DownwardAPIVolumeSource{Items: []v1.DownwardAPIVolumeFile{
			field("memory_limit", "limits.memory", "1Mi"), field("cpu_request", "requests.cpu", "1m"), field("cpu_limit", "limits.cpu", "1")}}}},
	}
	mount := func(name, path string) v1.VolumeMount { return v1.VolumeMount{Name: name, MountPath: path} }
	pod.Spec.Containers[0].VolumeMounts = []v1.VolumeMount{
		mount("cm", "/etc/cm"), mount("secret", "/etc/secret"), mount("scratch", "/scratch"),
		mount("mem", "/mem"), mount("podinfo", "/podinfo"),
	}
	pods := core.Pods("default")
	_ = pods.Delete(ctx, name, metav1.DeleteOptions{GracePeriodSeconds: new(int64(0))})
	created, err := pods.Create(ctx, pod, metav1.CreateOptions{})
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() {
		_ = pods.Delete(context.Background(), name, metav1.DeleteOptions{GracePeriodSeconds: new(int64(0))})
	})
	c.waitPod(t, "default", name, "Running", 2*time.Minute, isRunning)

	var logs string
	testenv.WaitFor(t, time.Minute, "the container's report", func() (bool, error) {
		out, err := pods.GetLogs(name, &v1.PodLogOptions{}).DoRaw(ctx)
		logs = string(out)
		return err == nil && strings.Contains(logs, "done"), err
	})
	for _, want := range []string{
		"user 1234",
		"cm value-1 -r--r----- 1234",   // defaultMode 0400, group-readable through fsGroup
		"item value-2 -rw-r----- 1234", // the item's mode 0600
		"secret secret-1 -r--r----- 1234",
		"token -rw-r----- 1234 1234",   // the token is the pod user's
		"scratch drwxrwsrwx 1234 1234", // 0777 and setgid: new files get the fsGroup
		"mem tmpfs 10240 drwxrwsrwt",   // a tmpfs of the sizeLimit
		"podinfo 64 250 ",              // limits.memory in Mi, requests.cpu in m
	} {
		if !strings.Contains(logs, want) {
			t.Errorf("the container reports:\n%s\nwant a line %q", logs, want)
		}
	}
	// The unset cpu limit is the node's allocatable cpu (a positive count).
	if !regexp.MustCompile(`podinfo 64 250 [1-9][0-9]* -rw-r--r--`).MatchString(logs) {
		t.Errorf("the container reports:\n%s\nwant the node's cpus as the cpu limit", logs)
	}

	// Deleted: the tmpfs is unmounted and the pod's volumes removed.
	if err := pods.Delete(ctx, name, metav1.DeleteOptions{GracePeriodSeconds: new(int64(0))}); err != nil {
		t.Fatal(err)
	}
	volumes := filepath.Join(a.rootDir, "pods", string(created.UID), "volumes")
	testenv.WaitFor(t, 2*time.Minute, "the pod's volumes unmounted and removed", func() (bool, error) {
		mi, err := os.ReadFile("/proc/self/mountinfo")
		if err != nil {
			return false, err
		}
		if strings.Contains(string(mi), string(created.UID)) {
			return false, nil
		}
		_, err = os.Stat(volumes)
		return os.IsNotExist(err), nil
	})
}
