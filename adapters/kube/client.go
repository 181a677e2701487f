// Package kube is actorlet's client-go adapter: the node, its lease, the pods
// bound to it, pod status, mirror pods, events, service-account tokens and
// the ConfigMaps and Secrets its pods reference. Outbound calls classify their
// errors once into errdefs classes; it imports neither actors nor messages.
package kube

import (
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"net"
	"time"

	authenticationv1 "k8s.io/api/authentication/v1"
	coordinationv1 "k8s.io/api/coordination/v1"
	v1 "k8s.io/api/core/v1"
	apierrors "k8s.io/apimachinery/pkg/api/errors"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/types"
	"k8s.io/apimachinery/pkg/util/strategicpatch"
	"k8s.io/client-go/kubernetes"
	"k8s.io/client-go/rest"
	"k8s.io/client-go/tools/clientcmd"

	"github.com/actorlet/actorlet/errdefs"
)

// Client talks to the API server with the node's credentials.
type Client struct {
	cs       kubernetes.Interface
	events   kubernetes.Interface // own rate limit (--event-qps/--event-burst), as upstream
	cfg      *rest.Config
	nodeName string
}

// Options of the client (upstream kubelet flag names in comments).
type Options struct {
	Kubeconfig string  // --kubeconfig
	QPS        float32 // --kube-api-qps, 50
	Burst      int     // --kube-api-burst, 100
	UserAgent  string
	Timeout    time.Duration // per request, default 30 s
	EventQPS   float32       // --event-qps, 50 when zero; negative: no limit (upstream's --event-qps 0)
	EventBurst int           // --event-burst, 100
}

// New builds a client from a kubeconfig file. It does not contact the API
// server; Check does.
func New(nodeName string, o Options) (*Client, error) {
	if o.Kubeconfig == "" {
		return nil, errors.New("kubeconfig path is empty")
	}
	cfg, err := clientcmd.BuildConfigFromFlags("", o.Kubeconfig)
	if err != nil {
		return nil, fmt.Errorf("kubeconfig %s: %w", o.Kubeconfig, err)
	}
	applyOptions(cfg, &o)
	return newFromConfig(cfg, nodeName, o)
}

// NewForClientset wraps an existing clientset (tests).
func NewForClientset(cs kubernetes.Interface, nodeName string) *Client {
	return &Client{cs: cs, events: cs, nodeName: nodeName}
}

// Clientset exposes the clientset (wiring of informers and the recorder).
func (c *Client) Clientset() kubernetes.Interface { return c.cs }

// Check asks the API server for its version: a kubeconfig that does not
// work fails here with a clear error.
func (c *Client) Check(ctx context.Context) (string, error) {
	v, err := c.cs.Discovery().ServerVersion()
	if err != nil {
		return "", fmt.Errorf("API server: %w", classify(err))
	}
	_ = ctx
	return v.GitVersion, nil
}

// classify maps API errors to errdefs classes, keeping the message.
func classify(err error) error {
	if err == nil {
		return nil
	}
	var ne net.Error
	switch {
	case apierrors.IsNotFound(err):
		return errdefs.Wrap(errdefs.ErrNotFound, err)
	case apierrors.IsAlreadyExists(err):
		return errdefs.Wrap(errdefs.ErrAlreadyExists, err)
	case apierrors.IsConflict(err):
		return errdefs.Wrap(errdefs.ErrConflict, err)
	case apierrors.IsForbidden(err), apierrors.IsUnauthorized(err):
		return errdefs.Wrap(errdefs.ErrForbidden, err)
	case apierrors.IsInvalid(err), apierrors.IsBadRequest(err):
		return errdefs.Wrap(errdefs.ErrInvalidArgument, err)
	case apierrors.IsTimeout(err), apierrors.IsServerTimeout(err), errors.Is(err, context.DeadlineExceeded):
		return errdefs.Wrap(errdefs.ErrDeadlineExceeded, err)
	case apierrors.IsServiceUnavailable(err), apierrors.IsTooManyRequests(err), apierrors.IsInternalError(err),
		errors.As(err, &ne):
		return errdefs.Wrap(errdefs.ErrUnavailable, err)
	}
	return errdefs.Wrap(errdefs.ErrUnknown, err)
}

// ---- node

// GetNode reads a Node.
func (c *Client) GetNode(ctx context.Context, name string) (*v1.Node, error) {
	n, err := c.cs.CoreV1().Nodes().Get(ctx, name, metav1.GetOptions{})
	if err != nil {
		return nil, fmt.Errorf("get node %s: %w", name, classify(err))
	}
	return n, nil
}

// CreateNode registers a Node.
func (c *Client) CreateNode(ctx context.Context, node *v1.Node) (*v1.Node, error) {
	n, err := c.cs.CoreV1().Nodes().Create(ctx, node, metav1.CreateOptions{})
	if err != nil {
		return nil, fmt.Errorf("create node %s: %w", node.Name, classify(err))
	}
	return n, nil
}

// PatchNodeStatus sends the difference between old and new status (a
// strategic merge patch, as upstream) to the status subresource.
func (c *Client) PatchNodeStatus(ctx context.Context, name string, oldStatus, newStatus *v1.NodeStatus) (*v1.Node, error) {
	patch, err := twoWay(&v1.Node{Status: *oldStatus}, &v1.Node{Status: *newStatus}, v1.Node{})
	if err != nil {
		return nil, fmt.Errorf("node status patch: %w", err)
	}
	n, err := c.cs.CoreV1().Nodes().Patch(ctx, name, types.StrategicMergePatchType, patch, metav1.PatchOptions{}, "status")
	if err != nil {
		return nil, fmt.Errorf("patch node status %s: %w", name, classify(err))
	}
	return n, nil
}

// PatchNodeMeta merges labels and annotations into the Node (for
// --node-labels on an existing Node, the GPUs' labels and annotations).
func (c *Client) PatchNodeMeta(ctx context.Context, name string, labels, annotations map[string]string) (*v1.Node, error) {
	meta := map[string]any{"labels": labels}
	if len(annotations) > 0 {
		meta["annotations"] = annotations
	}
	b, err := json.Marshal(map[string]any{"metadata": meta})
	if err != nil {
		return nil, err
	}
	n, err := c.cs.CoreV1().Nodes().Patch(ctx, name, types.StrategicMergePatchType, b, metav1.PatchOptions{})
	if err != nil {
		return nil, fmt.Errorf("patch node %s: %w", name, classify(err))
	}
	return n, nil
}

func twoWay(oldObj, newObj any, schema any) ([]byte, error) {
	ob, err := json.Marshal(oldObj)
	if err != nil {
		return nil, err
	}
	nb, err := json.Marshal(newObj)
	if err != nil {
		return nil, err
	}
	return strategicpatch.CreateTwoWayMergePatch(ob, nb, schema)
}

// ---- lease

// RenewLease creates or renews the node's Lease in kube-node-lease, owned
// by the Node so it goes away with it.
func (c *Client) RenewLease(ctx context.Context, node *v1.Node, durationSeconds int32, now time.Time) error {
	leases := c.cs.CoordinationV1().Leases(v1.NamespaceNodeLease)
	renew := metav1.NewMicroTime(now)
	l, err := leases.Get(ctx, node.Name, metav1.GetOptions{})
	if apierrors.IsNotFound(err) {
		l = &coordinationv1.Lease{
			ObjectMeta: metav1.ObjectMeta{Name: node.Name, Namespace: v1.NamespaceNodeLease},
			Spec: coordinationv1.LeaseSpec{
				HolderIdentity:       &node.Name,
				LeaseDurationSeconds: &durationSeconds,
				RenewTime:            &renew,
			},
		}
		if node.UID != "" {
			l.OwnerReferences = []metav1.OwnerReference{{APIVersion: "v1", Kind: "Node", Name: node.Name, UID: node.UID}}
		}
		if _, err := leases.Create(ctx, l, metav1.CreateOptions{}); err != nil {
			return fmt.Errorf("create lease %s: %w", node.Name, classify(err))
		}
		return nil
	}
	if err != nil {
		return fmt.Errorf("get lease %s: %w", node.Name, classify(err))
	}
	l.Spec.HolderIdentity = &node.Name
	l.Spec.LeaseDurationSeconds = &durationSeconds
	l.Spec.RenewTime = &renew
	if len(l.OwnerReferences) == 0 && node.UID != "" {
		l.OwnerReferences = []metav1.OwnerReference{{APIVersion: "v1", Kind: "Node", Name: node.Name, UID: node.UID}}
	}
	if _, err := leases.Update(ctx, l, metav1.UpdateOptions{}); err != nil {
		return fmt.Errorf("renew lease %s: %w", node.Name, classify(err))
	}
	return nil
}

// ---- pods

// PatchPodStatus writes a pod's status: a strategic merge patch from old to
// new status with the pod's UID as precondition (as upstream's status
// manager does), to the status subresource. It returns the pod the API
// server answered with its metadata (without managedFields) and status but
// no spec: the status writer keeps the answer of every pod's last write,
// and the spec and managedFields in it (two thirds of a decoded pod) would
// stay alive with it.
func (c *Client) PatchPodStatus(ctx context.Context, namespace, name string, uid types.UID, oldStatus, newStatus *v1.PodStatus) (*v1.Pod, error) {
	patch, err := podStatusPatch(uid, oldStatus, newStatus)
	if err != nil {
		return nil, fmt.Errorf("pod status patch: %w", err)
	}
	p, err := c.cs.CoreV1().Pods(namespace).Patch(ctx, name, types.StrategicMergePatchType, patch, metav1.PatchOptions{}, "status")
	if err != nil {
		return nil, fmt.Errorf("patch status of pod %s/%s: %w", namespace, name, classify(err))
	}
	// Cleared in place: a new Pod to copy into would cost as much as the
	// spec it saves (the struct alone is over a KiB).
	p.Spec, p.ManagedFields = v1.PodSpec{}, nil
	return p, nil
}

// DeletePod deletes a pod for good (grace 0) if it still has uid: the
// final step of a graceful deletion, once nothing of it runs.
func (c *Client) DeletePod(ctx context.Context, namespace, name string, uid types.UID) error {
	zero := int64(0)
	err := c.cs.CoreV1().Pods(namespace).Delete(ctx, name, metav1.DeleteOptions{
		GracePeriodSeconds: &zero,
		Preconditions:      &metav1.Preconditions{UID: &uid},
	})
	if err != nil {
		return fmt.Errorf("delete pod %s/%s: %w", namespace, name, classify(err))
	}
	return nil
}

// CreatePod creates a pod (mirror pods).
func (c *Client) CreatePod(ctx context.Context, pod *v1.Pod) (*v1.Pod, error) {
	p, err := c.cs.CoreV1().Pods(pod.Namespace).Create(ctx, pod, metav1.CreateOptions{})
	if err != nil {
		return nil, fmt.Errorf("create pod %s/%s: %w", pod.Namespace, pod.Name, classify(err))
	}
	return p, nil
}

// GetPod reads a pod.
func (c *Client) GetPod(ctx context.Context, namespace, name string) (*v1.Pod, error) {
	return get(ctx, c.cs.CoreV1().Pods(namespace).Get, "get pod", namespace, name)
}

// ---- tokens, config maps, secrets

// CreateToken requests a service-account token bound to a pod (TokenRequest
// API; the Node authorizer allows it for pods bound to this node).
func (c *Client) CreateToken(ctx context.Context, namespace, serviceAccount string, req *authenticationv1.TokenRequest) (*authenticationv1.TokenRequest, error) {
	tr, err := c.cs.CoreV1().ServiceAccounts(namespace).CreateToken(ctx, serviceAccount, req, metav1.CreateOptions{})
	if err != nil {
		return nil, fmt.Errorf("token for %s/%s: %w", namespace, serviceAccount, classify(err))
	}
	return tr, nil
}

// ConfigMap reads a ConfigMap.
func (c *Client) ConfigMap(ctx context.Context, namespace, name string) (*v1.ConfigMap, error) {
	return get(ctx, c.cs.CoreV1().ConfigMaps(namespace).Get, "configmap", namespace, name)
}

// Secret reads a Secret.
func (c *Client) Secret(ctx context.Context, namespace, name string) (*v1.Secret, error) {
	return get(ctx, c.cs.CoreV1().Secrets(namespace).Get, "secret", namespace, name)
}

// get reads object namespace/name with getter; an error is classified and
// says what was read.
func get[T any](ctx context.Context, getter func(context.Context, string, metav1.GetOptions) (T, error), what, namespace, name string) (T, error) {
	obj, err := getter(ctx, name, metav1.GetOptions{})
	if err != nil {
		var none T
		return none, fmt.Errorf("%s %s/%s: %w", what, namespace, name, classify(err))
	}
	return obj, nil
}
