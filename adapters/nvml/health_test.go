package nvml_test

import (
	"context"
	"errors"
	"fmt"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/actorlet/actorlet/adapters/nvml"
	"github.com/actorlet/actorlet/internal/actortest"
	pluginapi "k8s.io/kubelet/pkg/apis/deviceplugin/v1beta1"
	clocktesting "k8s.io/utils/clock/testing"
)

// recorder keeps what Watch told.
type recorder struct {
	mu    sync.Mutex
	lists [][]*pluginapi.Device
	whys  []string
}

func (r *recorder) update(devs []*pluginapi.Device, why string) {
	r.mu.Lock()
	defer r.mu.Unlock()
	r.lists = append(r.lists, devs)
	r.whys = append(r.whys, why)
}

func (r *recorder) n() int {
	r.mu.Lock()
	defer r.mu.Unlock()
	return len(r.lists)
}

// at is update i: each GPU's health by UUID, and why.
func (r *recorder) at(i int) (map[string]string, string) {
	r.mu.Lock()
	defer r.mu.Unlock()
	health := map[string]string{}
	for _, d := range r.lists[i] {
		health[d.ID] = d.Health
	}
	return health, r.whys[i]
}

func (r *recorder) String() string {
	r.mu.Lock()
	defer r.mu.Unlock()
	return fmt.Sprintf("%d updates, whys %q", len(r.lists), r.whys)
}

// watch runs Watch until stop (or the test's end) and checks it returns
// nil; it returns once the first list came.
func watch(t *testing.T, g *nvml.GPUs) (r *recorder, stop func()) {
	t.Helper()
	ctx, cancel := context.WithCancel(context.Background())
	r = &recorder{}
	done := make(chan error, 1)
	go func() { done <- g.Watch(ctx, r.update) }()
	var once sync.Once
	stop = func() {
		once.Do(func() {
			cancel()
			select {
			case err := <-done:
				if err != nil {
					t.Errorf("Watch returned %v, want nil when its ctx ends", err)
				}
			case <-time.After(10 * time.Second):
				t.Errorf("Watch did not return after its ctx ended")
			}
		})
	}
	t.Cleanup(stop)
	actortest.EventuallyDetail(t, "Watch's first list", func() bool { return r.n() >= 1 }, r.String)
	return r, stop
}

func unhealthy(health map[string]string) []string {
	var out []string
	for id, h := range health {
		if h != pluginapi.Healthy {
			out = append(out, id)
		}
	}
	return out
}

func TestXidMakesOneGPUUnhealthy(t *testing.T) {
	for _, spec := range []string{"mock:dgxh100", "mock:dgxa100"} {
		t.Run(spec, func(t *testing.T) {
			g := open(t, spec, nvml.Options{})
			all := ids(t, g)
			r, _ := watch(t, g)
			if health, why := r.at(0); len(unhealthy(health)) != 0 || len(health) != 8 || why != "" {
				t.Fatalf("first list: %v (why %q), want 8 healthy GPUs", health, why)
			}

			// An application Xid leaves its GPU healthy; a critical one
			// does not. Events come in order: the update after both says
			// whether the first changed anything.
			for _, inj := range []struct {
				gpu int
				xid uint64
			}{{0, 13}, {1, 79}} {
				if err := g.InjectXid(all[inj.gpu], inj.xid); err != nil {
					t.Fatalf("InjectXid: %v", err)
				}
			}
			actortest.EventuallyDetail(t, "an update after Xid 79", func() bool { return r.n() >= 2 }, r.String)
			health, why := r.at(1)
			if bad := unhealthy(health); len(bad) != 1 || bad[0] != all[1] {
				t.Errorf("unhealthy after Xid 13 on GPU 0 and Xid 79 on GPU 1: %v, want only %s", bad, all[1])
			}
			if want := all[1] + ": Xid 79 (GPU has fallen off the bus)"; why != want {
				t.Errorf("why %q, want %q", why, want)
			}

			// Another Xid on the unhealthy GPU changes nothing; one on
			// GPU 2 is the next update.
			if err := g.InjectXid(all[1], 48); err != nil {
				t.Fatal(err)
			}
			if err := g.InjectXid(all[2], 95); err != nil {
				t.Fatal(err)
			}
			actortest.EventuallyDetail(t, "an update after Xid 95", func() bool { return r.n() >= 3 }, r.String)
			health, why = r.at(2)
			if want := all[2] + ": Xid 95 (uncontained ECC error)"; why != want {
				t.Errorf("third update's why %q, want %q (%s)", why, want, r)
			}
			if health[all[1]] != pluginapi.Unhealthy || health[all[2]] != pluginapi.Unhealthy || len(unhealthy(health)) != 2 {
				t.Errorf("third update %v, want GPUs 1 and 2 unhealthy", health)
			}

			// The last Xid of each GPU is sampled, application ones too.
			s, err := g.Sample(context.Background())
			if err != nil {
				t.Fatal(err)
			}
			for i, want := range []float64{13, 48, 95, 0} {
				if got := s[all[i]]["DCGM_FI_DEV_XID_ERRORS"]; got != want {
					t.Errorf("GPU %d DCGM_FI_DEV_XID_ERRORS = %v, want %v", i, got, want)
				}
			}
		})
	}
}

func TestXidForAllGPUs(t *testing.T) {
	g := open(t, "mock:dgxh100?count=3", nvml.Options{})
	r, _ := watch(t, g)
	if err := g.InjectXid(nvml.AllGPUs, 79); err != nil {
		t.Fatal(err)
	}
	actortest.EventuallyDetail(t, "an update", func() bool { return r.n() >= 2 }, r.String)
	health, why := r.at(1)
	if len(unhealthy(health)) != 3 {
		t.Errorf("after an event with no device: %v, want every GPU unhealthy", health)
	}
	if want := "all GPUs: Xid 79 (GPU has fallen off the bus)"; why != want {
		t.Errorf("why %q, want %q", why, want)
	}
}

// Two Watches at once (an actor restarting: the old incarnation's Watch
// still ending as the new one's starts) both get the GPU that one event
// made unhealthy, whichever of them handled it: the second finds it
// already unhealthy, and reports it all the same.
func TestWatchesSeeTheOthersChange(t *testing.T) {
	g := open(t, "mock:dgxh100?count=2", nvml.Options{})
	all := ids(t, g)
	r1, _ := watch(t, g)
	r2, _ := watch(t, g)
	if err := g.InjectXid(all[0], 79); err != nil {
		t.Fatal(err)
	}
	for i, r := range []*recorder{r1, r2} {
		actortest.EventuallyDetail(t, fmt.Sprintf("watch %d's update after the Xid", i+1), func() bool { return r.n() >= 2 }, r.String)
		health, why := r.at(1)
		if bad := unhealthy(health); len(bad) != 1 || bad[0] != all[0] {
			t.Errorf("watch %d: unhealthy %v, want %s", i+1, bad, all[0])
		}
		if want := all[0] + ": Xid 79 (GPU has fallen off the bus)"; why != want {
			t.Errorf("watch %d: why %q, want %q", i+1, why, want)
		}
	}
}

func TestUnhealthyStaysUnhealthy(t *testing.T) {
	g := open(t, "mock:dgxh100?count=2", nvml.Options{})
	all := ids(t, g)
	// Raised before any Watch: the next Watch gets it, as a driver event
	// queued for its set.
	if err := g.InjectXid(all[0], 94); err != nil {
		t.Fatal(err)
	}
	r, stop := watch(t, g)
	actortest.EventuallyDetail(t, "the queued Xid", func() bool { return r.n() >= 2 }, r.String)
	stop()

	// A new Watch (a restarted DevicesActor) starts from the same health.
	r, _ = watch(t, g)
	health, _ := r.at(0)
	if health[all[0]] != pluginapi.Unhealthy || health[all[1]] != pluginapi.Healthy {
		t.Errorf("second Watch's first list %v, want %s unhealthy only", health, all[0])
	}
}

func TestXidEvery(t *testing.T) {
	// picked opens a mock that raises an Xid every 30 s of a fake clock,
	// steps the clock once and returns the GPU index that turned unhealthy
	// and why.
	picked := func(t *testing.T, query string) (int, string) {
		fc := clocktesting.NewFakeClock(time.Unix(1_800_000_000, 0))
		g := open(t, "mock:dgxh100?xid-every=30s"+query, nvml.Options{Clock: fc})
		all := ids(t, g)
		r, _ := watch(t, g)
		actortest.Eventually(t, "the injector's ticker", fc.HasWaiters)
		if r.n() != 1 {
			t.Fatalf("an update before the clock moved: %s", r)
		}
		fc.Step(30 * time.Second)
		actortest.EventuallyDetail(t, "an update after 30 s", func() bool { return r.n() >= 2 }, r.String)
		health, why := r.at(1)
		bad := unhealthy(health)
		if len(bad) != 1 {
			t.Fatalf("after one period: unhealthy %v, want one GPU", bad)
		}
		for i, id := range all {
			if id == bad[0] {
				return i, why
			}
		}
		t.Fatalf("unhealthy GPU %s unknown", bad[0])
		return -1, ""
	}
	first, why := picked(t, "&seed=7")
	if !strings.HasSuffix(why, ": Xid 79 (GPU has fallen off the bus)") {
		t.Errorf("why %q, want the default Xid 79", why)
	}
	if again, _ := picked(t, "&seed=7"); again != first {
		t.Errorf("seed 7 picked GPU %d then GPU %d: not reproducible", first, again)
	}
	if _, why := picked(t, "&xid=48"); !strings.HasSuffix(why, ": Xid 48 (double-bit ECC error)") {
		t.Errorf("with xid=48: why %q", why)
	}
}

func TestWatchEndsOnClose(t *testing.T) {
	g, err := nvml.Open("mock:dgxa100?count=1", nvml.Options{EventWait: 20 * time.Millisecond})
	if err != nil {
		t.Fatal(err)
	}
	first := make(chan struct{}, 1)
	done := make(chan error, 1)
	go func() {
		done <- g.Watch(context.Background(), func([]*pluginapi.Device, string) {
			select {
			case first <- struct{}{}:
			default:
			}
		})
	}()
	<-first
	if err := g.Close(); err != nil {
		t.Fatal(err)
	}
	select {
	case err := <-done:
		if !errors.Is(err, nvml.ErrClosed) {
			t.Errorf("Watch after Close returned %v, want ErrClosed", err)
		}
	case <-time.After(10 * time.Second):
		t.Fatal("Watch did not return after Close")
	}
}

func TestInjectXidUnknownGPU(t *testing.T) {
	g := open(t, "mock:dgxh100?count=1", nvml.Options{})
	if err := g.InjectXid("GPU-nope", 79); !errors.Is(err, nvml.ErrUnknownDevice) {
		t.Errorf("InjectXid on an unknown GPU: %v, want ErrUnknownDevice", err)
	}
}
