package kube

import (
	"context"
	"errors"
	"fmt"
	"sync"
	"time"

	v1 "k8s.io/api/core/v1"
	apierrors "k8s.io/apimachinery/pkg/api/errors"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/fields"
	"k8s.io/apimachinery/pkg/runtime"
	"k8s.io/apimachinery/pkg/types"
	"k8s.io/apimachinery/pkg/watch"
	"k8s.io/client-go/tools/cache"

	"github.com/actorlet/actorlet/errdefs"
)

// ObjectCache serves the ConfigMaps and Secrets the node's pods reference
// from single-object watches (as the upstream kubelet's Watch strategy): the
// first read of an object starts a watch on it alone (field selector on its
// name, which the Node authorizer allows for objects its pods reference),
// later reads come from memory, and a watch nobody read for Idle is stopped.
//
// The references are counted per pod (upstream's RegisterPod and
// UnregisterPod, refs.go): when the last pod that references an object is
// gone, its watch is stopped at once (after the reads in flight), not after
// Idle: the Node authorizer would refuse it from then on.
type ObjectCache struct {
	c    *Client
	idle time.Duration
	now  func() time.Time

	mu      sync.Mutex
	watches map[string]*objWatch          // kind/ns/name
	refs    map[string]map[types.UID]bool // kind/ns/name: the pods that reference it
	podRefs map[types.UID][]string        // pod: the keys it references

	svc  services      // every Service (services.go)
	stop chan struct{} // closed when Run ends: stops the services informer
}

type objWatch struct {
	store    cache.Store
	synced   cache.InformerSynced
	stop     chan struct{}
	lastUsed time.Time
	refused  error // set (under mu) when the API server refused the watch: it was dropped
	reads    int   // reads in flight
	orphan   bool  // its last reference went while reads were in flight: stopped after them
}

// NewObjectCache returns a cache over c; watches idle for idle (default
// 10 min) are stopped by Run.
func (c *Client) NewObjectCache(idle time.Duration) *ObjectCache {
	if idle <= 0 {
		idle = 10 * time.Minute
	}
	return &ObjectCache{c: c, idle: idle, now: time.Now, watches: map[string]*objWatch{},
		refs: map[string]map[types.UID]bool{}, podRefs: map[types.UID][]string{}, stop: make(chan struct{})}
}

// Run stops idle watches until ctx is done, then all of them.
func (o *ObjectCache) Run(ctx context.Context) {
	o.svc.start(o.c, o.stop) // services are read before the first pod starts
	defer close(o.stop)
	t := time.NewTicker(o.idle / 2)
	defer t.Stop()
	for {
		select {
		case <-ctx.Done():
			o.mu.Lock()
			for k, w := range o.watches {
				close(w.stop)
				delete(o.watches, k)
			}
			o.mu.Unlock()
			return
		case <-t.C:
			o.mu.Lock()
			for k, w := range o.watches {
				if o.now().Sub(w.lastUsed) > o.idle {
					close(w.stop)
					delete(o.watches, k)
				}
			}
			o.mu.Unlock()
		}
	}
}

// ConfigMap reads a ConfigMap through its watch.
func (o *ObjectCache) ConfigMap(ctx context.Context, namespace, name string) (*v1.ConfigMap, error) {
	obj, err := o.get(ctx, "configmaps", &v1.ConfigMap{}, namespace, name)
	if err != nil {
		return nil, fmt.Errorf("configmap %s/%s: %w", namespace, name, err)
	}
	return obj.(*v1.ConfigMap).DeepCopy(), nil
}

// Secret reads a Secret through its watch.
func (o *ObjectCache) Secret(ctx context.Context, namespace, name string) (*v1.Secret, error) {
	obj, err := o.get(ctx, "secrets", &v1.Secret{}, namespace, name)
	if err != nil {
		return nil, fmt.Errorf("secret %s/%s: %w", namespace, name, err)
	}
	return obj.(*v1.Secret).DeepCopy(), nil
}

func (o *ObjectCache) get(ctx context.Context, resource string, example runtime.Object, namespace, name string) (runtime.Object, error) {
	key := resource + "/" + namespace + "/" + name
	o.mu.Lock()
	w, ok := o.watches[key]
	if !ok {
		lw := quickReconnect(o.listWatch(resource, namespace, name))
		inf := cache.NewSharedIndexInformer(lw, example, 0, cache.Indexers{})
		_ = inf.SetTransform(stripManagedFields)
		w = &objWatch{store: inf.GetStore(), synced: inf.HasSynced, stop: make(chan struct{})}
		o.watches[key] = w
		watch := w
		// The Node authorizer refuses the objects no pod of this node
		// references (any more: a pod deleted, its namespace gone): such a
		// watch is dropped at once instead of being retried for ever; a
		// pod that references the object again starts a new one.
		_ = inf.SetWatchErrorHandler(func(_ *cache.Reflector, err error) {
			if apierrors.IsForbidden(err) || apierrors.IsUnauthorized(err) {
				o.drop(key, watch, err)
			}
		})
		go inf.Run(w.stop)
	}
	w.lastUsed = o.now()
	w.reads++
	o.mu.Unlock()

	synced := cache.WaitForCacheSync(mergeDone(ctx.Done(), w.stop), w.synced)
	o.mu.Lock()
	refused := w.refused
	w.reads--
	if w.reads == 0 && w.orphan {
		w.orphan = false
		if len(o.refs[key]) == 0 && o.watches[key] == w {
			delete(o.watches, key)
			close(w.stop)
		}
	}
	o.mu.Unlock()
	if refused != nil {
		return nil, errdefs.Wrap(errdefs.ErrForbidden, fmt.Errorf("watch refused: %w", refused))
	}
	if !synced {
		return nil, errdefs.Wrap(errdefs.ErrUnavailable, errors.New("watch did not sync: "+errString(ctx.Err())))
	}
	item, exists, err := w.store.GetByKey(namespace + "/" + name)
	if err != nil {
		return nil, errdefs.Wrap(errdefs.ErrUnknown, err)
	}
	if !exists {
		return nil, errdefs.Wrap(errdefs.ErrNotFound, errors.New("not found"))
	}
	return item.(runtime.Object), nil
}

// listWatch lists and watches the one object resource/namespace/name
// (field selector on its name).
func (o *ObjectCache) listWatch(resource, namespace, name string) cache.ListerWatcher {
	sel := fields.OneTermEqualSelector("metadata.name", name).String()
	core := o.c.cs.CoreV1()
	lw := &cache.ListWatch{
		ListWithContextFunc: func(ctx context.Context, opts metav1.ListOptions) (runtime.Object, error) {
			opts.FieldSelector = sel
			if resource == "secrets" {
				return core.Secrets(namespace).List(ctx, opts)
			}
			return core.ConfigMaps(namespace).List(ctx, opts)
		},
		WatchFuncWithContext: func(ctx context.Context, opts metav1.ListOptions) (watch.Interface, error) {
			opts.FieldSelector = sel
			if resource == "secrets" {
				return core.Secrets(namespace).Watch(ctx, opts)
			}
			return core.ConfigMaps(namespace).Watch(ctx, opts)
		},
	}
	return cache.ToListWatcherWithWatchListSemantics(lw, o.c.cs)
}

// drop stops the watch w of key (if it is still the cache's) after the
// API server refused it.
func (o *ObjectCache) drop(key string, w *objWatch, err error) {
	o.mu.Lock()
	defer o.mu.Unlock()
	if o.watches[key] != w {
		return
	}
	w.refused = err
	delete(o.watches, key)
	close(w.stop)
}

// mergeDone is closed when a or b is.
func mergeDone(a, b <-chan struct{}) <-chan struct{} {
	out := make(chan struct{})
	go func() {
		defer close(out)
		select {
		case <-a:
		case <-b:
		}
	}()
	return out
}

func errString(err error) string {
	if err == nil {
		return "stopped"
	}
	return err.Error()
}
