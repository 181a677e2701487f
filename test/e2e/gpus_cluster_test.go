package e2e

import (
	"context"
	"fmt"
	"testing"
	"time"

	v1 "k8s.io/api/core/v1"
	"k8s.io/apimachinery/pkg/api/resource"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"

	"github.com/actorlet/actorlet/internal/testenv"
)

// In cluster mode the Node shows the GPUs: nvidia.com/gpu in capacity and
// allocatable, GPU feature discovery's labels and the per-GPU annotations;
// kube-scheduler places a GPU pod by them and the pod runs with its GPUs;
// a critical Xid lowers the allocatable the Node reports.
func TestE2EClusterGPUs(t *testing.T) {
	c := newCluster(t)
	a := c.startNode(t, "e2e-gpu", agentOpts{extra: []string{"--gpus", "mock:dgxa100?count=2", "--node-status-update-frequency", "1s"}})
	var node *v1.Node
	testenv.WaitFor(t, time.Minute, "the Node with its GPUs", func() (bool, error) {
		n, err := c.cs.CoreV1().Nodes().Get(context.Background(), "e2e-gpu", metav1.GetOptions{})
		if err != nil {
			return false, err
		}
		node = n
		q := n.Status.Allocatable["nvidia.com/gpu"]
		return q.Value() == 2 && n.Labels["nvidia.com/gpu.product"] != "", fmt.Errorf("allocatable %v labels %v", n.Status.Allocatable, n.Labels)
	})
	if q := node.Status.Capacity["nvidia.com/gpu"]; q.Value() != 2 {
		t.Errorf("capacity %v", node.Status.Capacity)
	}
	for k, want := range map[string]string{"nvidia.com/gpu.count": "2", "nvidia.com/gpu.family": "ampere", "nvidia.com/gpu.compute.major": "8", "nvidia.com/gpu.present": "true"} {
		if node.Labels[k] != want {
			t.Errorf("label %s=%q, want %q", k, node.Labels[k], want)
		}
	}
	if node.Annotations["actorlet.io/gpu-0"] == "" {
		t.Errorf("annotations %v: want actorlet.io/gpu-0", node.Annotations)
	}

	p := apiPod("cuda", "", simImage, "sleep", "infinity")
	p.Spec.NodeSelector = map[string]string{"nvidia.com/gpu.present": "true"}
	p.Spec.Containers[0].Resources.Limits = v1.ResourceList{"nvidia.com/gpu": resource.MustParse("2")}
	if _, err := c.cs.CoreV1().Pods("default").Create(context.Background(), p, metav1.CreateOptions{}); err != nil {
		t.Fatal(err)
	}
	c.waitPod(t, "default", "cuda", "scheduled to the GPU node and Running", time.Minute, isRunning)
	v, err := a.devices()
	if err != nil {
		t.Fatal(err)
	}
	held := v.gpusOf("cuda")
	if len(held) != 2 {
		t.Fatalf("cuda holds %v", held)
	}

	resp, err := a.mainClient().Post(a.mainURL("/devices/fault?device="+held[0]+"&xid=48"), "", nil)
	if err != nil {
		t.Fatal(err)
	}
	_ = resp.Body.Close()
	testenv.WaitFor(t, time.Minute, "the Node's allocatable down to 1", func() (bool, error) {
		n, err := c.cs.CoreV1().Nodes().Get(context.Background(), "e2e-gpu", metav1.GetOptions{})
		if err != nil {
			return false, err
		}
		q := n.Status.Allocatable["nvidia.com/gpu"]
		return q.Value() == 1, fmt.Errorf("allocatable %v", n.Status.Allocatable)
	})
	testenv.WaitFor(t, time.Minute, "a DeviceUnhealthy event on the pod", func() (bool, error) {
		evs, err := c.cs.CoreV1().Events("default").List(context.Background(), metav1.ListOptions{FieldSelector: "involvedObject.name=cuda"})
		if err != nil {
			return false, err
		}
		for _, e := range evs.Items {
			if e.Reason == "DeviceUnhealthy" && e.Type == v1.EventTypeWarning {
				return true, nil
			}
		}
		return false, fmt.Errorf("%d events, none DeviceUnhealthy", len(evs.Items))
	})
}
