package image

import (
	"context"
	"errors"
	"fmt"
	"io"
	"log/slog"
	"slices"
	"sort"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/asynkron/protoactor-go/actor"
	v1 "k8s.io/api/core/v1"
	"k8s.io/apimachinery/pkg/runtime"
	runtimeapi "k8s.io/cri-api/pkg/apis/runtime/v1"
	statsapi "k8s.io/kubelet/pkg/apis/stats/v1alpha1"
	testclock "k8s.io/utils/clock/testing"

	"github.com/actorlet/actorlet/internal/actortest"
	"github.com/actorlet/actorlet/messages"
)

// gcRuntime is a runtime with images of known sizes on a filesystem of a
// known capacity: what the image filesystem holds besides images is other.
type gcRuntime struct {
	mu         sync.Mutex
	images     map[string]*runtimeapi.Image // by ID
	containers []*runtimeapi.Container
	capacity   uint64
	other      uint64
	removed    []string // IDs, in order
	removeErr  map[string]error
	fsErr      error
	listGate   chan struct{} // ListImages waits for it when set
	listing    chan struct{} // told when ListImages waits
}

var (
	_ ImageService    = (*gcRuntime)(nil)
	_ ImageRemover    = (*gcRuntime)(nil)
	_ ContainerLister = (*gcRuntime)(nil)
	_ ImageFs         = (*gcRuntime)(nil)
	_ Metrics         = (*gcMetrics)(nil)
	_ Recorder        = (*gcEvents)(nil)
	_ ImageFsInfoer   = fsInfo{}
	_ FsInfoer        = fsStats{}
)

func newGCRuntime(capacity uint64) *gcRuntime {
	return &gcRuntime{images: map[string]*runtimeapi.Image{}, capacity: capacity, removeErr: map[string]error{}}
}

// add makes image name present (ID "sha256:"+name) with size bytes.
func (r *gcRuntime) add(name string, size uint64, pinned bool) {
	r.mu.Lock()
	defer r.mu.Unlock()
	id := "sha256:" + name
	r.images[id] = &runtimeapi.Image{Id: id, RepoTags: []string{name}, Size: size, Pinned: pinned}
}

// use makes a container (in state) use image name.
func (r *gcRuntime) use(name string, state runtimeapi.ContainerState) {
	r.mu.Lock()
	defer r.mu.Unlock()
	r.containers = append(r.containers, &runtimeapi.Container{
		Id: "c-" + name, Image: &runtimeapi.ImageSpec{Image: name}, ImageRef: "sha256:" + name, State: state,
	})
}

func (r *gcRuntime) dropContainers() {
	r.mu.Lock()
	defer r.mu.Unlock()
	r.containers = nil
}

func (r *gcRuntime) setOther(b uint64) {
	r.mu.Lock()
	defer r.mu.Unlock()
	r.other = b
}

// present is the tags of the images present, sorted.
func (r *gcRuntime) present() []string {
	r.mu.Lock()
	defer r.mu.Unlock()
	var out []string
	for _, img := range r.images {
		out = append(out, img.RepoTags...)
	}
	sort.Strings(out)
	return out
}

func (r *gcRuntime) removals() []string {
	r.mu.Lock()
	defer r.mu.Unlock()
	return append([]string(nil), r.removed...)
}

// usage is the filesystem's usage in percent.
func (r *gcRuntime) usage() int {
	c, av, _ := r.ImageFsCapacity(context.Background())
	return 100 - int(av*100/c)
}

func (r *gcRuntime) find(ref string) *runtimeapi.Image {
	if img, ok := r.images[ref]; ok {
		return img
	}
	for _, img := range r.images {
		if slices.Contains(img.RepoTags, ref) {
			return img
		}
	}
	return nil
}

func (r *gcRuntime) ImageStatus(_ context.Context, ref string) (*runtimeapi.Image, error) {
	r.mu.Lock()
	defer r.mu.Unlock()
	return r.find(ref), nil
}

func (r *gcRuntime) PullImage(_ context.Context, ref string, _ *runtimeapi.PodSandboxConfig) (string, error) {
	r.mu.Lock()
	defer r.mu.Unlock()
	id := "sha256:" + ref
	if r.images[id] == nil {
		r.images[id] = &runtimeapi.Image{Id: id, RepoTags: []string{ref}, Size: 10}
	}
	return id, nil
}

func (r *gcRuntime) ListImages(ctx context.Context) ([]*runtimeapi.Image, error) {
	if r.listGate != nil {
		r.listing <- struct{}{}
		select {
		case <-r.listGate:
		case <-ctx.Done():
			return nil, ctx.Err()
		}
	}
	r.mu.Lock()
	defer r.mu.Unlock()
	var out []*runtimeapi.Image
	for _, img := range r.images {
		out = append(out, &runtimeapi.Image{Id: img.Id, RepoTags: append([]string(nil), img.RepoTags...), Size: img.Size, Pinned: img.Pinned})
	}
	return out, nil
}

func (r *gcRuntime) RemoveImage(_ context.Context, ref string) error {
	r.mu.Lock()
	defer r.mu.Unlock()
	if err := r.removeErr[ref]; err != nil {
		return err
	}
	if img := r.find(ref); img != nil {
		delete(r.images, img.Id)
		r.removed = append(r.removed, img.RepoTags[0])
	}
	return nil
}

func (r *gcRuntime) ListContainers(context.Context, *runtimeapi.ContainerFilter) ([]*runtimeapi.Container, error) {
	r.mu.Lock()
	defer r.mu.Unlock()
	var out []*runtimeapi.Container
	for _, c := range r.containers {
		out = append(out, &runtimeapi.Container{Id: c.Id, Image: &runtimeapi.ImageSpec{Image: c.Image.Image}, ImageRef: c.ImageRef, State: c.State})
	}
	return out, nil
}

func (r *gcRuntime) ImageFsCapacity(context.Context) (uint64, uint64, error) {
	r.mu.Lock()
	defer r.mu.Unlock()
	if r.fsErr != nil {
		return 0, 0, r.fsErr
	}
	used := r.other
	for _, img := range r.images {
		used += img.Size
	}
	return r.capacity, r.capacity - min(used, r.capacity), nil
}

type gcMetrics struct {
	mu sync.Mutex
	n  map[string]int
}

func (m *gcMetrics) IncImageGC(reason string, n int) {
	m.mu.Lock()
	defer m.mu.Unlock()
	m.n[reason] += n
}

func (m *gcMetrics) get() map[string]int {
	m.mu.Lock()
	defer m.mu.Unlock()
	out := map[string]int{}
	for k, v := range m.n {
		out[k] = v
	}
	return out
}

type gcEvents struct {
	mu  sync.Mutex
	got []string // "Warning Reason: message about Node/name"
}

func (e *gcEvents) Eventf(obj runtime.Object, eventtype, reason, format string, args ...any) {
	e.mu.Lock()
	defer e.mu.Unlock()
	ref := obj.(*v1.ObjectReference)
	e.got = append(e.got, fmt.Sprintf("%s %s: %s about %s/%s", eventtype, reason, fmt.Sprintf(format, args...), ref.Kind, ref.Name))
}

func (e *gcEvents) all() []string {
	e.mu.Lock()
	defer e.mu.Unlock()
	return append([]string(nil), e.got...)
}

// gcHarness runs an ImageActor with garbage collection.
type gcHarness struct {
	t       *testing.T
	sys     *actor.ActorSystem
	pid     *actor.PID
	rt      *gcRuntime
	clk     *testclock.FakeClock
	cfg     Config
	m       *gcMetrics
	ev      *gcEvents
	mu      sync.Mutex
	replies []any
	recP    *actor.PID
}

func newGCHarness(t *testing.T, rt *gcRuntime, cfg Config, withGC bool) *gcHarness {
	t.Helper()
	sys := actor.NewActorSystem()
	t.Cleanup(func() { sys.Shutdown() })
	h := &gcHarness{t: t, sys: sys, rt: rt, clk: testclock.NewFakeClock(time.Unix(100000, 0)), cfg: cfg.withDefaults(),
		m: &gcMetrics{n: map[string]int{}}, ev: &gcEvents{}}
	h.recP = sys.Root.Spawn(actor.PropsFromFunc(func(ctx actor.Context) {
		switch m := ctx.Message().(type) {
		case *messages.ImagesReclaimed, *messages.ImageResult:
			h.mu.Lock()
			h.replies = append(h.replies, m)
			h.mu.Unlock()
		}
	}))
	log := slog.New(slog.NewTextHandler(io.Discard, nil))
	var opts []Option
	if withGC {
		opts = append(opts, WithGC(GC{Images: rt, Containers: rt, Fs: rt, Metrics: h.m, Events: h.ev, NodeName: "node-1"}))
	}
	h.pid = sys.Root.Spawn(actor.PropsFromProducer(New(rt, h.clk, cfg, log, opts...),
		actor.WithReceiverMiddleware(actortest.Barrier())))
	t.Cleanup(func() { sys.Root.Stop(h.pid) })
	return h
}

// next waits for the next reply and returns it.
func (h *gcHarness) next() any {
	h.t.Helper()
	var got any
	actortest.Eventually(h.t, "a reply of the image actor", func() bool {
		h.mu.Lock()
		defer h.mu.Unlock()
		if len(h.replies) == 0 {
			return false
		}
		got, h.replies = h.replies[0], h.replies[1:]
		return true
	})
	return got
}

// reclaim asks for bytes and returns the answer, which comes after every
// collection asked for before.
func (h *gcHarness) reclaim(bytes int64) messages.ImagesReclaimed {
	h.t.Helper()
	h.sys.Root.Send(h.pid, &messages.ReclaimImages{Bytes: bytes, ReplyTo: h.recP})
	r, ok := h.next().(*messages.ImagesReclaimed)
	if !ok {
		h.t.Fatalf("reply %T, want ImagesReclaimed", r)
	}
	return *r
}

// settle waits until the collections asked for so far have run.
func (h *gcHarness) settle() {
	h.t.Helper()
	if r := h.reclaim(0); r.Removed != 0 || r.Err != "" {
		h.t.Fatalf("an empty reclaim: %+v", r)
	}
}

// periods steps the clock n collection periods, one collection each.
func (h *gcHarness) periods(n int) {
	h.t.Helper()
	for i := 0; i < n; i++ {
		h.clk.Step(h.cfg.GCPeriod)
		h.settle()
	}
}

// ensure asks for an image present and waits for the answer.
func (h *gcHarness) ensure(image string) {
	h.t.Helper()
	h.sys.Root.Send(h.pid, &messages.EnsureImage{RequestID: 1, Image: image, Policy: v1.PullIfNotPresent, ReplyTo: h.recP})
	if r, ok := h.next().(*messages.ImageResult); !ok || r.Reason != "" {
		h.t.Fatalf("ensure %s: %+v", image, r)
	}
}

func TestGCFreesLeastRecentlyUsedDownToTheLowThreshold(t *testing.T) {
	rt := newGCRuntime(1000)
	for _, n := range []string{"a", "b", "c"} {
		rt.add(n, 100, false)
	}
	rt.add("pinned", 100, true)
	rt.add("exited", 100, false)
	rt.use("exited", runtimeapi.ContainerState_CONTAINER_EXITED) // in use, though not running
	h := newGCHarness(t, rt, Config{MinimumGCAge: 2 * time.Minute}, true)
	h.settle() // the first collection: 50% full, nothing to do

	// c is asked for first, then a; b never: b is the least recently used.
	h.clk.Step(time.Minute)
	h.ensure("c")
	h.clk.Step(time.Minute)
	h.ensure("a")
	rt.setOther(450) // 950 of 1000: 95% >= 85%, free down to 80%: 150 bytes

	h.periods(1)
	if got, want := rt.removals(), []string{"b", "c"}; !slices.Equal(got, want) {
		t.Fatalf("removed %v, want %v (least recently used first, enough for 150 bytes)", got, want)
	}
	if got, want := rt.present(), []string{"a", "exited", "pinned"}; !slices.Equal(got, want) {
		t.Fatalf("present %v, want %v", got, want)
	}
	if u := rt.usage(); u > 80 {
		t.Fatalf("usage %d%% after the collection, want <= 80%%", u)
	}
	if got := h.m.get(); got[GCReasonSpace] != 2 || got[GCReasonAge] != 0 {
		t.Fatalf("metrics %v, want space 2", got)
	}
	if ev := h.ev.all(); len(ev) != 0 {
		t.Fatalf("events %v, want none", ev)
	}

	// Below the high threshold: nothing more.
	h.periods(1)
	if got := rt.removals(); len(got) != 2 {
		t.Fatalf("removed %v below the high threshold", got)
	}
}

func TestGCNeverDeletesImagesInUseOrPinned(t *testing.T) {
	rt := newGCRuntime(1000)
	rt.add("running", 300, false)
	rt.add("exited", 300, false)
	rt.add("pinned", 300, true)
	rt.add("free", 50, false)
	rt.use("running", runtimeapi.ContainerState_CONTAINER_RUNNING)
	rt.use("exited", runtimeapi.ContainerState_CONTAINER_EXITED)
	h := newGCHarness(t, rt, Config{}, true)
	h.settle()

	if got, want := rt.removals(), []string{"free"}; !slices.Equal(got, want) {
		t.Fatalf("removed %v, want %v", got, want)
	}
	want := []string{"Warning FreeDiskSpaceFailed: Failed to garbage collect required amount of images. " +
		"Attempted to free 150 bytes, but only found 50 bytes eligible to free. about Node/node-1"}
	if ev := h.ev.all(); !slices.Equal(ev, want) {
		t.Fatalf("events %q, want %q", ev, want)
	}
	// A second failure in a row is an ImageGCFailed too, as upstream.
	h.periods(1)
	if ev := h.ev.all(); len(ev) != 3 || !strings.HasPrefix(ev[2], "Warning ImageGCFailed: Failed to garbage collect") {
		t.Fatalf("events %q, want FreeDiskSpaceFailed then ImageGCFailed", ev)
	}
	if got, want := rt.present(), []string{"exited", "pinned", "running"}; !slices.Equal(got, want) {
		t.Fatalf("present %v, want %v", got, want)
	}
}

func TestGCMinimumAge(t *testing.T) {
	rt := newGCRuntime(1000)
	rt.add("old", 100, false)
	rt.setOther(800)
	h := newGCHarness(t, rt, Config{MinimumGCAge: 2 * time.Minute, GCPeriod: time.Minute}, true)
	h.settle() // present at the start: as old as upstream takes it, deleted
	if got := rt.removals(); !slices.Equal(got, []string{"old"}) {
		t.Fatalf("removed %v, want the image present at the start", got)
	}

	rt.add("young", 200, false) // 1000 of 1000 again
	for i, age := range []time.Duration{0, time.Minute} {
		h.periods(1)
		if got := rt.removals(); len(got) != 1 {
			t.Fatalf("period %d: an image first seen %v ago removed: %v", i, age, got)
		}
	}
	h.periods(1) // seen 2 minutes ago
	if got := rt.removals(); !slices.Equal(got, []string{"old", "young"}) {
		t.Fatalf("removed %v, want young once 2m old", got)
	}
}

func TestGCMaximumAge(t *testing.T) {
	rt := newGCRuntime(1000) // never full: only age deletes
	rt.add("unused", 10, false)
	rt.add("used", 10, false)
	rt.add("pinned", 10, true)
	rt.use("used", runtimeapi.ContainerState_CONTAINER_RUNNING)
	h := newGCHarness(t, rt, Config{MinimumGCAge: time.Minute, MaximumGCAge: 10 * time.Minute, GCPeriod: time.Minute}, true)
	h.settle()

	h.periods(5)
	rt.dropContainers() // last used at the collection of minute 5
	h.periods(5)        // minute 10: MaximumGCAge since the start, not more
	if got := rt.removals(); len(got) != 0 {
		t.Fatalf("removed %v before MaximumGCAge passed since the start", got)
	}
	h.periods(1) // minute 11
	if got := rt.removals(); !slices.Equal(got, []string{"unused"}) {
		t.Fatalf("removed %v, want the image never used", got)
	}
	h.periods(4) // minute 15: used 10 minutes ago, not more
	if got := rt.removals(); len(got) != 1 {
		t.Fatalf("removed %v, want used kept until unused for more than 10m", got)
	}
	h.periods(1)
	if got, want := rt.removals(), []string{"unused", "used"}; !slices.Equal(got, want) {
		t.Fatalf("removed %v, want %v", got, want)
	}
	if got := h.m.get(); got[GCReasonAge] != 2 || got[GCReasonSpace] != 0 {
		t.Fatalf("metrics %v, want age 2", got)
	}
	if got := rt.present(); !slices.Equal(got, []string{"pinned"}) {
		t.Fatalf("present %v, want the pinned image", got)
	}
}

func TestReclaimImages(t *testing.T) {
	tests := []struct {
		name        string
		bytes       int64
		wantRemoved []string
		want        messages.ImagesReclaimed
	}{
		{name: "least recently used until enough", bytes: 250, wantRemoved: []string{"never", "once"},
			want: messages.ImagesReclaimed{Freed: 300, Removed: 2}},
		{name: "exactly one", bytes: 100, wantRemoved: []string{"never"},
			want: messages.ImagesReclaimed{Freed: 100, Removed: 1}},
		{name: "more than there is", bytes: 1 << 40, wantRemoved: []string{"never", "once", "twice"},
			want: messages.ImagesReclaimed{Freed: 600, Removed: 3}},
		{name: "nothing", bytes: 0, want: messages.ImagesReclaimed{}},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			rt := newGCRuntime(1 << 30) // never full
			rt.add("twice", 300, false)
			rt.add("once", 200, false)
			rt.add("never", 100, false)
			rt.add("inuse", 100, false)
			rt.add("pinned", 100, true)
			rt.use("inuse", runtimeapi.ContainerState_CONTAINER_EXITED)
			h := newGCHarness(t, rt, Config{MinimumGCAge: 2 * time.Minute}, true)
			h.settle()
			h.clk.Step(time.Minute)
			h.ensure("once")
			h.clk.Step(time.Minute)
			h.ensure("twice")
			rt.add("young", 100, false)
			h.periods(1) // young first seen now
			h.clk.Step(time.Minute)

			got := h.reclaim(tt.bytes)
			if got != tt.want {
				t.Fatalf("reply %+v, want %+v", got, tt.want)
			}
			if r := rt.removals(); !slices.Equal(r, tt.wantRemoved) {
				t.Fatalf("removed %v, want %v", r, tt.wantRemoved)
			}
			if got := h.m.get(); got[GCReasonSpace] != len(tt.wantRemoved) {
				t.Fatalf("metrics %v, want space %d", got, len(tt.wantRemoved))
			}
		})
	}
}

func TestReclaimImagesErrors(t *testing.T) {
	t.Run("not configured", func(t *testing.T) {
		h := newGCHarness(t, newGCRuntime(100), Config{}, false)
		if r := h.reclaim(10); r.Err != "image garbage collection is not configured" {
			t.Fatalf("%+v", r)
		}
	})
	t.Run("a removal fails, the others go on", func(t *testing.T) {
		rt := newGCRuntime(1 << 30)
		rt.add("a", 100, false)
		rt.add("b", 100, false)
		rt.removeErr["sha256:a"] = errors.New("image is busy")
		h := newGCHarness(t, rt, Config{}, true)
		h.settle()
		r := h.reclaim(200)
		if r.Freed != 100 || r.Removed != 1 || !strings.Contains(r.Err, "remove image sha256:a: image is busy") {
			t.Fatalf("%+v", r)
		}
		if got := rt.present(); !slices.Equal(got, []string{"a"}) {
			t.Fatalf("present %v", got)
		}
	})
}

func TestStopAnswersReclaimImages(t *testing.T) {
	rt := newGCRuntime(1000)
	rt.listGate, rt.listing = make(chan struct{}), make(chan struct{}, 1)
	h := newGCHarness(t, rt, Config{}, true)
	<-rt.listing // the first collection lists
	h.sys.Root.Send(h.pid, &messages.ReclaimImages{Bytes: 10, ReplyTo: h.recP})
	actortest.Sync(t, h.sys, h.pid) // a stop overtakes what is queued
	if err := h.sys.Root.StopFuture(h.pid).Wait(); err != nil {
		t.Fatal(err)
	}
	if r, ok := h.next().(*messages.ImagesReclaimed); !ok || r.Err != "image actor stopped" {
		t.Fatalf("reply %+v, want the stop", r)
	}
}

func TestGCFilesystemErrors(t *testing.T) {
	tests := []struct {
		name       string
		capacity   uint64
		fsErr      error
		wantEvents []string
	}{
		{name: "zero capacity", capacity: 0, wantEvents: []string{
			"Warning InvalidDiskCapacity: invalid capacity 0 on image filesystem about Node/node-1",
			"Warning InvalidDiskCapacity: invalid capacity 0 on image filesystem about Node/node-1",
			"Warning ImageGCFailed: invalid capacity 0 on image filesystem about Node/node-1",
		}},
		{name: "stats fail", capacity: 100, fsErr: errors.New("statfs: no such file"), wantEvents: []string{
			"Warning ImageGCFailed: image filesystem stats: statfs: no such file about Node/node-1",
		}},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			rt := newGCRuntime(tt.capacity)
			rt.fsErr = tt.fsErr
			rt.add("a", 10, false)
			h := newGCHarness(t, rt, Config{}, true)
			h.settle()
			h.periods(1) // the second failure in a row
			if ev := h.ev.all(); !slices.Equal(ev, tt.wantEvents) {
				t.Fatalf("events %q, want %q", ev, tt.wantEvents)
			}
			if got := rt.removals(); len(got) != 0 {
				t.Fatalf("removed %v without filesystem stats", got)
			}
		})
	}
}

func TestConfigValidate(t *testing.T) {
	tests := []struct {
		name    string
		cfg     Config
		wantErr string
	}{
		{name: "zero takes the defaults", cfg: Config{}},
		{name: "defaults", cfg: DefaultConfig()},
		{name: "full range", cfg: Config{HighThresholdPercent: 100, LowThresholdPercent: 0}},
		{name: "high above 100", cfg: Config{HighThresholdPercent: 101, LowThresholdPercent: 80},
			wantErr: "image GC high threshold (--image-gc-high-threshold) 101 must be between 0 and 100, inclusive"},
		{name: "low negative", cfg: Config{HighThresholdPercent: 85, LowThresholdPercent: -1},
			wantErr: "image GC low threshold (--image-gc-low-threshold) -1 must be between 0 and 100, inclusive"},
		{name: "low equals high", cfg: Config{HighThresholdPercent: 80, LowThresholdPercent: 80},
			wantErr: "image GC low threshold (--image-gc-low-threshold) 80 must be less than the high threshold (--image-gc-high-threshold) 80"},
		{name: "low above high", cfg: Config{HighThresholdPercent: 70, LowThresholdPercent: 90},
			wantErr: "must be less than the high threshold"},
		{name: "negative minimum age", cfg: Config{MinimumGCAge: -time.Second},
			wantErr: "image minimum GC age (--image-minimum-gc-age) -1s must not be negative"},
		{name: "negative maximum age", cfg: Config{MaximumGCAge: -time.Second},
			wantErr: "image maximum GC age (--image-maximum-gc-age) -1s must not be negative"},
		{name: "maximum below minimum", cfg: Config{MinimumGCAge: 2 * time.Minute, MaximumGCAge: time.Minute},
			wantErr: "image maximum GC age (--image-maximum-gc-age) 1m0s must be greater than the minimum GC age (--image-minimum-gc-age) 2m0s"},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			err := tt.cfg.Validate()
			switch {
			case tt.wantErr == "" && err != nil:
				t.Fatalf("Validate: %v", err)
			case tt.wantErr != "" && (err == nil || !strings.Contains(err.Error(), tt.wantErr)):
				t.Fatalf("Validate: %v, want %q", err, tt.wantErr)
			}
			if tt.wantErr != "" {
				defer func() {
					if recover() == nil {
						t.Fatal("New took a bad policy")
					}
				}()
				New(newGCRuntime(1), testclock.NewFakeClock(time.Now()), tt.cfg, nil)
			}
		})
	}
}

// fsInfo is an ImageFsInfoer naming one image filesystem (none when
// mountpoint is empty) using used bytes.
type fsInfo struct {
	mountpoint string
	used       uint64
}

func (f fsInfo) ImageFsInfo(context.Context) (*runtimeapi.ImageFsInfoResponse, error) {
	r := &runtimeapi.ImageFsInfoResponse{}
	if f.mountpoint != "" {
		r.ImageFilesystems = []*runtimeapi.FilesystemUsage{{
			FsId: &runtimeapi.FilesystemIdentifier{Mountpoint: f.mountpoint}, UsedBytes: &runtimeapi.UInt64Value{Value: f.used}}}
	}
	return r, nil
}

// fsStats is an FsInfoer knowing one mountpoint.
type fsStats struct {
	mountpoint string
	st         *statsapi.FsStats
}

func (f fsStats) FsInfo(_ context.Context, mp string) (*statsapi.FsStats, error) {
	if mp != f.mountpoint {
		return nil, fmt.Errorf("no filesystem at %s", mp)
	}
	return f.st, nil
}

func TestFsFromInfo(t *testing.T) {
	u := func(v uint64) *uint64 { return &v }
	const mp = "/var/lib/containerd/io.containerd.snapshotter.v1.overlayfs"
	tests := []struct {
		name          string
		info          fsInfo
		st            *statsapi.FsStats
		wantCapacity  uint64
		wantAvailable uint64
		wantErr       string
	}{
		{name: "statfs figures", info: fsInfo{mp, 300}, st: &statsapi.FsStats{CapacityBytes: u(1000), AvailableBytes: u(400)},
			wantCapacity: 1000, wantAvailable: 400},
		{name: "no available: capacity less used", info: fsInfo{mp, 300}, st: &statsapi.FsStats{CapacityBytes: u(1000), UsedBytes: u(700)},
			wantCapacity: 1000, wantAvailable: 300},
		{name: "no available nor used: the runtime's used", info: fsInfo{mp, 300}, st: &statsapi.FsStats{CapacityBytes: u(1000)},
			wantCapacity: 1000, wantAvailable: 700},
		{name: "used over capacity", info: fsInfo{mp, 3000}, st: &statsapi.FsStats{CapacityBytes: u(1000)},
			wantCapacity: 1000, wantAvailable: 0},
		{name: "no image filesystem", info: fsInfo{}, wantErr: "the runtime names no image filesystem"},
		{name: "no capacity", info: fsInfo{mp, 1}, st: &statsapi.FsStats{}, wantErr: "image filesystem " + mp + ": no capacity"},
		{name: "unknown mountpoint", info: fsInfo{"/elsewhere", 1}, wantErr: "image filesystem /elsewhere: no filesystem at /elsewhere"},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			c, av, err := FsFromInfo(tt.info, fsStats{mountpoint: mp, st: tt.st}).ImageFsCapacity(context.Background())
			if tt.wantErr != "" {
				if err == nil || !strings.Contains(err.Error(), tt.wantErr) {
					t.Fatalf("err %v, want %q", err, tt.wantErr)
				}
				return
			}
			if err != nil || c != tt.wantCapacity || av != tt.wantAvailable {
				t.Fatalf("got %d %d %v, want %d %d", c, av, err, tt.wantCapacity, tt.wantAvailable)
			}
		})
	}
}
