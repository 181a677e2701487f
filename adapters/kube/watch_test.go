package kube

import (
	"context"
	"errors"
	"io"
	"net"
	"os"
	"sync"
	"syscall"
	"testing"
	"time"

	v1 "k8s.io/api/core/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/runtime"
	"k8s.io/apimachinery/pkg/watch"
	"k8s.io/client-go/tools/cache"

	"github.com/actorlet/actorlet/internal/actorkit"
)

// flakyLW fails its first `fail` calls with err, then answers.
type flakyLW struct {
	mu    sync.Mutex
	err   error
	fail  int
	calls int
}

func (f *flakyLW) next() error {
	f.mu.Lock()
	defer f.mu.Unlock()
	f.calls++
	if f.calls <= f.fail {
		return f.err
	}
	return nil
}

func (f *flakyLW) ListWithContext(context.Context, metav1.ListOptions) (runtime.Object, error) {
	if err := f.next(); err != nil {
		return nil, err
	}
	return &v1.PodList{}, nil
}

func (f *flakyLW) WatchWithContext(context.Context, metav1.ListOptions) (watch.Interface, error) {
	if err := f.next(); err != nil {
		return nil, err
	}
	return watch.NewFake(), nil
}

var _ cache.ListerWatcherWithContext = (*flakyLW)(nil)

func refused() error {
	return &net.OpError{Op: "dial", Net: "tcp", Err: os.NewSyscallError("connect", syscall.ECONNREFUSED)}
}

// TestReconnectingRetriesWhileTheAPIServerIsDown: a list or watch refused
// because the API server is down is tried again in place (so the reflector's
// long back-off never starts); other errors go through at once; the retries
// end with the context.
func TestReconnectingRetriesWhileTheAPIServerIsDown(t *testing.T) {
	tests := []struct {
		name      string
		err       error
		fail      int
		wantErr   bool
		wantCalls int
	}{
		{name: "connection refused five times", err: refused(), fail: 5, wantCalls: 6},
		{name: "EOF while the API server stops", err: io.ErrUnexpectedEOF, fail: 2, wantCalls: 3},
		{name: "forbidden goes through", err: errors.New("forbidden"), fail: 1, wantErr: true, wantCalls: 1},
	}
	for _, tt := range tests {
		for _, op := range []string{"list", "watch"} {
			t.Run(tt.name+"/"+op, func(t *testing.T) {
				f := &flakyLW{err: tt.err, fail: tt.fail}
				r := &reconnecting{inner: f, backoff: actorkit.Backoff{Base: time.Millisecond, Cap: 4 * time.Millisecond}}
				var err error
				if op == "list" {
					_, err = r.ListWithContext(context.Background(), metav1.ListOptions{})
				} else {
					var w watch.Interface
					if w, err = r.WatchWithContext(context.Background(), metav1.ListOptions{}); err == nil {
						w.Stop()
					}
				}
				if (err != nil) != tt.wantErr || f.calls != tt.wantCalls {
					t.Fatalf("err %v after %d calls, want error %v after %d", err, f.calls, tt.wantErr, tt.wantCalls)
				}
			})
		}
	}
	t.Run("the context ends the retries", func(t *testing.T) {
		f := &flakyLW{err: refused(), fail: 1 << 30}
		r := &reconnecting{inner: f, backoff: actorkit.Backoff{Base: time.Millisecond, Cap: time.Millisecond}}
		ctx, cancel := context.WithCancel(context.Background())
		done := make(chan error, 1)
		go func() {
			_, err := r.WatchWithContext(ctx, metav1.ListOptions{})
			done <- err
		}()
		cancel()
		if err := <-done; err == nil {
			t.Fatal("a watch whose context ended returned no error")
		}
	})
}
