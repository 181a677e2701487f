package kube

import (
	"context"
	"errors"
	"sync"

	v1 "k8s.io/api/core/v1"
	"k8s.io/apimachinery/pkg/fields"
	"k8s.io/client-go/tools/cache"

	"github.com/actorlet/actorlet/errdefs"
)

// services is one informer on every Service of the cluster (the upstream
// kubelet's serviceLister): containers get the variables of the services
// of their namespace and of the master service.
type services struct {
	once   sync.Once
	store  cache.Store
	synced cache.InformerSynced
}

// start runs the informer until stop is closed (once; later calls do
// nothing).
func (s *services) start(c *Client, stop <-chan struct{}) {
	s.once.Do(func() {
		lw := quickReconnect(cache.NewListWatchFromClient(c.cs.CoreV1().RESTClient(), "services", v1.NamespaceAll, fields.Everything()))
		inf := cache.NewSharedIndexInformer(lw, &v1.Service{}, 0, cache.Indexers{})
		_ = inf.SetTransform(stripService)
		s.store, s.synced = inf.GetStore(), inf.HasSynced
		go inf.Run(stop)
	})
}

// Services lists every Service the informer holds, once it has read them
// at least once (until then, or until ctx is done, ErrUnavailable).
func (o *ObjectCache) Services(ctx context.Context) ([]*v1.Service, error) {
	o.svc.start(o.c, o.stop)
	if !cache.WaitForCacheSync(ctx.Done(), o.svc.synced) {
		return nil, errdefs.Wrap(errdefs.ErrUnavailable, errors.New("services not read yet: "+ctx.Err().Error()))
	}
	items := o.svc.store.List()
	out := make([]*v1.Service, 0, len(items))
	for _, it := range items {
		if s, ok := it.(*v1.Service); ok {
			out = append(out, s.DeepCopy())
		}
	}
	return out, nil
}
