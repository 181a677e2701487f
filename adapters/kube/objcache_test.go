package kube

import (
	"context"
	"errors"
	"net/http"
	"net/http/httptest"
	"sync/atomic"
	"testing"
	"time"

	"k8s.io/client-go/kubernetes"
	"k8s.io/client-go/rest"

	"github.com/actorlet/actorlet/errdefs"
)

// TestObjectCacheDropsRefusedWatch: the API server (the Node authorizer)
// refuses the ConfigMap of a namespace no pod of the node uses any more:
// the read fails as forbidden at once and the cache drops the watch
// instead of listing it again and again. On the old code the read waited
// for its deadline and the reflector kept retrying.
func TestObjectCacheDropsRefusedWatch(t *testing.T) {
	var lists atomic.Int32
	srv := httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		lists.Add(1)
		w.Header().Set("Content-Type", "application/json")
		w.WriteHeader(http.StatusForbidden)
		_, _ = w.Write([]byte(`{"kind":"Status","apiVersion":"v1","status":"Failure","reason":"Forbidden","code":403,` +
			`"message":"configmaps \"kube-root-ca.crt\" is forbidden: no relationship found between node 'n' and this object"}`))
	}))
	t.Cleanup(srv.Close)
	cs, err := kubernetes.NewForConfig(&rest.Config{Host: srv.URL})
	if err != nil {
		t.Fatal(err)
	}
	o := NewForClientset(cs, "n").NewObjectCache(time.Hour)
	ctx, cancel := context.WithTimeout(context.Background(), 20*time.Second)
	defer cancel()
	start := time.Now()
	_, err = o.ConfigMap(ctx, "gone", "kube-root-ca.crt")
	if !errors.Is(err, errdefs.ErrForbidden) || time.Since(start) > 10*time.Second {
		t.Fatalf("err %v after %v, want forbidden at once", err, time.Since(start))
	}
	o.mu.Lock()
	n := len(o.watches)
	o.mu.Unlock()
	if n != 0 {
		t.Fatalf("%d watches kept, want the refused one dropped", n)
	}
	seen := lists.Load()
	deadline := time.Now().Add(3 * time.Second)
	for time.Now().Before(deadline) {
		if lists.Load() > seen+1 {
			t.Fatalf("the refused object is still listed: %d requests after the drop", lists.Load()-seen)
		}
		time.Sleep(100 * time.Millisecond)
	}
}
