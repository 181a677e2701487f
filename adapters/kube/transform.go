package kube

import (
	"maps"

	v1 "k8s.io/api/core/v1"
	apiequality "k8s.io/apimachinery/pkg/api/equality"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/client-go/tools/cache"
)

// The informers keep one decoded copy of every object they watch for as
// long as the watch runs, and every pod update is deep-copied to the
// actors from that copy: fields the node never reads cost memory once per
// object in the cache and once more per copy downstream. The transforms
// below drop them before an object is stored (client-go's
// SharedIndexInformer.SetTransform), as the upstream kube-controller-manager
// does for its pod informer.

// stripManagedFields drops metadata.managedFields: server-side apply's
// bookkeeping (1 to 3 KiB per pod, an entry per writer: the creator, the
// scheduler's binding, every status writer), which no node code reads.
func stripManagedFields(obj any) (any, error) {
	if a, ok := obj.(metav1.ObjectMetaAccessor); ok {
		if m := a.GetObjectMeta(); m != nil {
			m.SetManagedFields(nil)
		}
	}
	return obj, nil
}

// stripService keeps of a Service what the containers' environment
// variables are made of (podspec.ServiceEnv: name, namespace, cluster IP,
// ports) and what the informer needs to key and resume it. A cluster's
// Services are held whatever runs on the node, so they are the one cache
// whose size does not scale with the node's pods but with the cluster's
// size: their annotations (a kubectl last-applied-configuration is a copy of
// the object), labels, selectors and status are dropped.
func stripService(obj any) (any, error) {
	s, ok := obj.(*v1.Service)
	if !ok {
		return stripManagedFields(obj)
	}
	return &v1.Service{
		TypeMeta: s.TypeMeta,
		ObjectMeta: metav1.ObjectMeta{
			Name: s.Name, Namespace: s.Namespace, UID: s.UID, ResourceVersion: s.ResourceVersion,
		},
		Spec: v1.ServiceSpec{
			Type: s.Spec.Type, ClusterIP: s.Spec.ClusterIP, ClusterIPs: s.Spec.ClusterIPs, Ports: s.Spec.Ports,
		},
	}, nil
}

// sharePodParts returns a transform for the pod informer that stores a
// new version of a pod with the parts that did not change taken from the
// version it replaces in store: most updates of a pod are of its status
// (every status write of this node comes back as one), and each arrives
// decoded anew, spec and all. Sharing the unchanged spec and metadata maps
// keeps one copy of them per pod: the one the actors hold since the pod
// was first sent (a version kept for its status no longer costs a second
// spec). The spec is the same when the generation is (the API server sets
// and bumps it from 1.33 on; 0: older, compared field by field). Objects in
// an informer's store are read only, for client-go and for actorlet alike.
func sharePodParts(store cache.Store) func(obj any) (any, error) {
	return func(obj any) (any, error) {
		p, ok := obj.(*v1.Pod)
		if !ok {
			return obj, nil
		}
		item, exists, err := store.Get(p)
		if err != nil || !exists {
			return obj, nil
		}
		old, ok := item.(*v1.Pod)
		if !ok || old == p || old.UID != p.UID {
			return obj, nil
		}
		if p.Generation == old.Generation && (p.Generation > 0 || apiequality.Semantic.DeepEqual(p.Spec, old.Spec)) {
			p.Spec = old.Spec
		}
		if maps.Equal(p.Labels, old.Labels) {
			p.Labels = old.Labels
		}
		if maps.Equal(p.Annotations, old.Annotations) {
			p.Annotations = old.Annotations
		}
		if apiequality.Semantic.DeepEqual(p.OwnerReferences, old.OwnerReferences) {
			p.OwnerReferences = old.OwnerReferences
		}
		return p, nil
	}
}
