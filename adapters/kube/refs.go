package kube

import (
	"context"
	"slices"

	v1 "k8s.io/api/core/v1"
	"k8s.io/apimachinery/pkg/types"
)

// WatchPods is Client.WatchPods with every pod's ConfigMap and Secret
// references registered in the cache before the pod is passed on, and
// unregistered after it is removed: the pods bound to the node in the API
// server are the ones the Node authorizer lets the node read objects for
// (upstream registers in its pod manager, which the API source fills).
func (o *ObjectCache) WatchPods(ctx context.Context, upsert, remove func(*v1.Pod), synced func()) {
	o.c.WatchPods(ctx, func(p *v1.Pod) {
		o.RegisterPod(p)
		upsert(p)
	}, func(p *v1.Pod) {
		remove(p)
		o.UnregisterPod(p.UID)
	}, synced)
}

// RegisterPod records the ConfigMaps and Secrets pod references (its
// volumes, env, envFrom and imagePullSecrets); a pod registered again
// replaces its references, and an object no pod references any more has
// its watch stopped.
func (o *ObjectCache) RegisterPod(pod *v1.Pod) {
	if pod == nil || pod.UID == "" {
		return
	}
	keys := podObjectKeys(pod)
	o.mu.Lock()
	defer o.mu.Unlock()
	old := o.podRefs[pod.UID]
	for _, k := range keys {
		set := o.refs[k]
		if set == nil {
			set = map[types.UID]bool{}
			o.refs[k] = set
		}
		set[pod.UID] = true
	}
	if len(keys) == 0 {
		delete(o.podRefs, pod.UID)
	} else {
		o.podRefs[pod.UID] = keys
	}
	for _, k := range old {
		if !slices.Contains(keys, k) {
			o.unrefLocked(k, pod.UID)
		}
	}
}

// UnregisterPod forgets the references of the pod: the watch of an object
// it was the last to reference is stopped now, or after the reads in
// flight.
func (o *ObjectCache) UnregisterPod(uid types.UID) {
	o.mu.Lock()
	defer o.mu.Unlock()
	for _, k := range o.podRefs[uid] {
		o.unrefLocked(k, uid)
	}
	delete(o.podRefs, uid)
}

func (o *ObjectCache) unrefLocked(key string, uid types.UID) {
	set := o.refs[key]
	delete(set, uid)
	if len(set) > 0 {
		return
	}
	delete(o.refs, key)
	w, ok := o.watches[key]
	if !ok {
		return
	}
	if w.reads > 0 {
		w.orphan = true // get stops it after the last read
		return
	}
	delete(o.watches, key)
	close(w.stop)
}

// podObjectKeys is the cache keys (resource/namespace/name) of the
// ConfigMaps and Secrets pod references, sorted, without duplicates.
func podObjectKeys(pod *v1.Pod) []string {
	var keys []string
	cm := func(name string) {
		if name != "" {
			keys = append(keys, "configmaps/"+pod.Namespace+"/"+name)
		}
	}
	secret := func(name string) {
		if name != "" {
			keys = append(keys, "secrets/"+pod.Namespace+"/"+name)
		}
	}
	for _, s := range pod.Spec.ImagePullSecrets {
		secret(s.Name)
	}
	for i := range pod.Spec.Volumes {
		v := &pod.Spec.Volumes[i]
		switch {
		case v.ConfigMap != nil:
			cm(v.ConfigMap.Name)
		case v.Secret != nil:
			secret(v.Secret.SecretName)
		case v.Projected != nil:
			for _, src := range v.Projected.Sources {
				if src.ConfigMap != nil {
					cm(src.ConfigMap.Name)
				}
				if src.Secret != nil {
					secret(src.Secret.Name)
				}
			}
		}
	}
	env := func(envFrom []v1.EnvFromSource, vars []v1.EnvVar) {
		for _, ef := range envFrom {
			if ef.ConfigMapRef != nil {
				cm(ef.ConfigMapRef.Name)
			}
			if ef.SecretRef != nil {
				secret(ef.SecretRef.Name)
			}
		}
		for _, e := range vars {
			if e.ValueFrom == nil {
				continue
			}
			if r := e.ValueFrom.ConfigMapKeyRef; r != nil {
				cm(r.Name)
			}
			if r := e.ValueFrom.SecretKeyRef; r != nil {
				secret(r.Name)
			}
		}
	}
	for i := range pod.Spec.InitContainers {
		env(pod.Spec.InitContainers[i].EnvFrom, pod.Spec.InitContainers[i].Env)
	}
	for i := range pod.Spec.Containers {
		env(pod.Spec.Containers[i].EnvFrom, pod.Spec.Containers[i].Env)
	}
	for i := range pod.Spec.EphemeralContainers {
		env(pod.Spec.EphemeralContainers[i].EnvFrom, pod.Spec.EphemeralContainers[i].Env)
	}
	slices.Sort(keys)
	return slices.Compact(keys)
}
