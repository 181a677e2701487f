package kube

import (
	"context"

	v1 "k8s.io/api/core/v1"
	"k8s.io/apimachinery/pkg/api/equality"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/fields"
	"k8s.io/apimachinery/pkg/runtime"
	"k8s.io/apimachinery/pkg/watch"
	"k8s.io/client-go/tools/cache"
)

// WatchNode runs an informer on the node's own Node object (field selector
// metadata.name, as upstream's node lister) until ctx is done. changed is
// called with the Node when it appears and whenever its labels, taints or
// allocatable change (its status heartbeats alone are not passed on);
// deleted when it is deleted. Both run on the informer's goroutine; the
// Node is the informer's copy, read only.
func (c *Client) WatchNode(ctx context.Context, changed func(*v1.Node), deleted func()) {
	sel := fields.OneTermEqualSelector(metav1.ObjectNameField, c.nodeName).String()
	nodes := c.cs.CoreV1().Nodes()
	lw := quickReconnect(cache.ToListWatcherWithWatchListSemantics(&cache.ListWatch{
		ListWithContextFunc: func(ctx context.Context, opts metav1.ListOptions) (runtime.Object, error) {
			opts.FieldSelector = sel
			return nodes.List(ctx, opts)
		},
		WatchFuncWithContext: func(ctx context.Context, opts metav1.ListOptions) (watch.Interface, error) {
			opts.FieldSelector = sel
			return nodes.Watch(ctx, opts)
		},
	}, c.cs))
	inf := cache.NewSharedIndexInformer(lw, &v1.Node{}, 0, cache.Indexers{})
	_ = inf.SetTransform(stripNode)
	_, _ = inf.AddEventHandler(cache.ResourceEventHandlerFuncs{
		AddFunc: func(obj any) {
			if n, ok := obj.(*v1.Node); ok {
				changed(n)
			}
		},
		UpdateFunc: func(old, obj any) {
			o, _ := old.(*v1.Node)
			n, ok := obj.(*v1.Node)
			if ok && (o == nil || nodeAdmissionChanged(o, n)) {
				changed(n)
			}
		},
		DeleteFunc: func(any) { deleted() },
	})
	go inf.Run(ctx.Done())
	<-ctx.Done()
}

// nodeAdmissionChanged: what admission reads of a Node (labels, taints,
// allocatable) differs between old and n.
func nodeAdmissionChanged(old, n *v1.Node) bool {
	return !equality.Semantic.DeepEqual(old.Labels, n.Labels) ||
		!equality.Semantic.DeepEqual(old.Spec.Taints, n.Spec.Taints) ||
		!equality.Semantic.DeepEqual(old.Status.Allocatable, n.Status.Allocatable)
}

// stripNode keeps of a Node what admission reads: its name, labels, taints
// and allocatable (the images, conditions and managed fields of a node's
// status are most of its size).
func stripNode(obj any) (any, error) {
	n, ok := obj.(*v1.Node)
	if !ok {
		return obj, nil
	}
	return &v1.Node{
		ObjectMeta: metav1.ObjectMeta{Name: n.Name, UID: n.UID, ResourceVersion: n.ResourceVersion, Labels: n.Labels},
		Spec:       v1.NodeSpec{Taints: n.Spec.Taints},
		Status:     v1.NodeStatus{Allocatable: n.Status.Allocatable},
	}, nil
}
