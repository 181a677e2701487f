package kube

import (
	"context"
	"time"

	v1 "k8s.io/api/core/v1"
	apierrors "k8s.io/apimachinery/pkg/api/errors"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/fields"
	"k8s.io/apimachinery/pkg/runtime"
	utilnet "k8s.io/apimachinery/pkg/util/net"
	"k8s.io/apimachinery/pkg/watch"
	"k8s.io/client-go/tools/cache"
	"k8s.io/client-go/util/watchlist"

	"github.com/actorlet/actorlet/internal/actorkit"
)

// WatchPods runs an informer over the pods bound to the node (field
// selector spec.nodeName) until ctx is done. upsert and remove are called
// for every change, synced once the first list is in.
func (c *Client) WatchPods(ctx context.Context, upsert, remove func(*v1.Pod), synced func()) {
	sel := fields.OneTermEqualSelector("spec.nodeName", c.nodeName).String()
	pods := c.cs.CoreV1().Pods(v1.NamespaceAll)
	lw := quickReconnect(cache.ToListWatcherWithWatchListSemantics(&cache.ListWatch{
		ListWithContextFunc: func(ctx context.Context, opts metav1.ListOptions) (runtime.Object, error) {
			opts.FieldSelector = sel
			return pods.List(ctx, opts)
		},
		WatchFuncWithContext: func(ctx context.Context, opts metav1.ListOptions) (watch.Interface, error) {
			opts.FieldSelector = sel
			return pods.Watch(ctx, opts)
		},
	}, c.cs))
	inf := cache.NewSharedIndexInformer(lw, &v1.Pod{}, 0, cache.Indexers{})
	share := sharePodParts(inf.GetStore())
	_ = inf.SetTransform(func(obj any) (any, error) {
		obj, _ = stripManagedFields(obj)
		return share(obj)
	})
	_, _ = inf.AddEventHandler(cache.ResourceEventHandlerFuncs{
		AddFunc: func(obj any) {
			if p, ok := obj.(*v1.Pod); ok {
				upsert(p)
			}
		},
		UpdateFunc: func(_, obj any) {
			if p, ok := obj.(*v1.Pod); ok {
				upsert(p)
			}
		},
		DeleteFunc: func(obj any) {
			if d, ok := obj.(cache.DeletedFinalStateUnknown); ok {
				obj = d.Obj
			}
			if p, ok := obj.(*v1.Pod); ok {
				remove(p)
			}
		},
	})
	go inf.Run(ctx.Done())
	go func() {
		if cache.WaitForCacheSync(ctx.Done(), inf.HasSynced) {
			synced()
		}
	}()
	<-ctx.Done()
}

// reconnectBackoff paces the watches' calls while the API server does not
// answer.
var reconnectBackoff = actorkit.Backoff{Base: 200 * time.Millisecond, Cap: 2 * time.Second}

// quickReconnect makes a watch reconnect within reconnectBackoff.Cap of the API
// server's return. client-go's reflector backs off up to 30 s (jittered to
// 60 s) when a list or watch is refused, so after an outage of a minute the
// node would go on for up to another minute without seeing its pods'
// changes (a pod the node lifecycle controller marked not ready stays so).
// Here a call refused because the API server is down (connection refused or
// reset, EOF, 503 while it shuts down or starts) is tried again in place,
// 200 ms doubling to 2 s, until it answers or ctx ends; any other error goes
// to the reflector as before.
func quickReconnect(lw cache.ListerWatcher) cache.ListerWatcher {
	return &reconnecting{inner: cache.ToListerWatcherWithContext(lw), backoff: reconnectBackoff}
}

type reconnecting struct {
	inner   cache.ListerWatcherWithContext
	backoff actorkit.Backoff
}

var (
	_ cache.ListerWatcher            = (*reconnecting)(nil)
	_ cache.ListerWatcherWithContext = (*reconnecting)(nil)
)

// apiDown: err says the API server did not answer (rather than refused the
// request).
func apiDown(err error) bool {
	return utilnet.IsConnectionRefused(err) || utilnet.IsConnectionReset(err) || utilnet.IsProbableEOF(err) ||
		apierrors.IsServiceUnavailable(err)
}

func retryWhileDown[T any](ctx context.Context, b actorkit.Backoff, call func() (T, error)) (T, error) {
	for n := 1; ; n++ {
		v, err := call()
		if err == nil || !apiDown(err) {
			return v, err
		}
		t := time.NewTimer(b.Delay(n))
		select {
		case <-ctx.Done():
			t.Stop()
			return v, err
		case <-t.C:
		}
	}
}

func (r *reconnecting) ListWithContext(ctx context.Context, options metav1.ListOptions) (runtime.Object, error) {
	return retryWhileDown(ctx, r.backoff, func() (runtime.Object, error) { return r.inner.ListWithContext(ctx, options) })
}

func (r *reconnecting) WatchWithContext(ctx context.Context, options metav1.ListOptions) (watch.Interface, error) {
	return retryWhileDown(ctx, r.backoff, func() (watch.Interface, error) { return r.inner.WatchWithContext(ctx, options) })
}

// IsWatchListSemanticsUnSupported passes on what the inner lister-watcher
// says (client-go's fake clientset cannot stream a watch list).
func (r *reconnecting) IsWatchListSemanticsUnSupported() bool {
	return watchlist.DoesClientNotSupportWatchListSemantics(r.inner)
}

// List and Watch serve callers without a context (the reflector uses the
// WithContext methods).
func (r *reconnecting) List(options metav1.ListOptions) (runtime.Object, error) {
	return r.inner.ListWithContext(context.Background(), options)
}

func (r *reconnecting) Watch(options metav1.ListOptions) (watch.Interface, error) {
	return r.inner.WatchWithContext(context.Background(), options)
}
