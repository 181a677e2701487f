package image

import (
	"context"
	"errors"
	"fmt"
	"sort"
	"time"

	"github.com/asynkron/protoactor-go/actor"
	v1 "k8s.io/api/core/v1"
	"k8s.io/apimachinery/pkg/runtime"
	"k8s.io/apimachinery/pkg/types"
	runtimeapi "k8s.io/cri-api/pkg/apis/runtime/v1"
	statsapi "k8s.io/kubelet/pkg/apis/stats/v1alpha1"

	"github.com/actorlet/actorlet/internal/actorkit"
	"github.com/actorlet/actorlet/messages"
)

// Image garbage collection, as the upstream kubelet's image GC manager
// (pkg/kubelet/images/image_gc_manager.go): the actor keeps a record of
// every image (first seen, last used, size, pinned); every GCPeriod it
// lists the runtime's images and containers off its mailbox, updates the
// records, and deletes, off its mailbox again, unused images unused for
// MaximumGCAge, then, when the image filesystem is HighThresholdPercent
// full or more, unused images least recently used first until it would be
// LowThresholdPercent full. ReclaimImages frees a number of bytes the same
// way now. One collection runs at a time; requests queue in order.

// ImageRemover lists and removes the runtime's images (the CRI image
// service).
type ImageRemover interface {
	ListImages(ctx context.Context) ([]*runtimeapi.Image, error)
	RemoveImage(ctx context.Context, ref string) error
}

// ContainerLister lists the runtime's containers. An image is in use while
// any container, running or not, uses it (upstream's "in use").
type ContainerLister interface {
	ListContainers(ctx context.Context, filter *runtimeapi.ContainerFilter) ([]*runtimeapi.Container, error)
}

// ImageFs reports the filesystem that holds the runtime's images: its
// capacity and the bytes still available on it, as statfs tells
// (upstream's image filesystem stats). CRI's ImageFsInfo gives the bytes
// the images use and the mountpoint but no capacity; FsFromInfo makes an
// ImageFs of it and of a filesystem measurer.
type ImageFs interface {
	ImageFsCapacity(ctx context.Context) (capacity, available uint64, err error)
}

// ImageFsInfoer is the CRI image service's ImageFsInfo.
type ImageFsInfoer interface {
	ImageFsInfo(ctx context.Context) (*runtimeapi.ImageFsInfoResponse, error)
}

// Metrics counts garbage-collected images
// (kubelet_image_garbage_collected_total); reason is GCReasonSpace or
// GCReasonAge.
type Metrics interface {
	IncImageGC(reason string, n int)
}

// Recorder records Kubernetes events (client-go's record.EventRecorder
// satisfies it).
type Recorder interface {
	Eventf(object runtime.Object, eventtype, reason, messageFmt string, args ...any)
}

// Reasons an image is garbage-collected, as upstream's metric labels.
const (
	GCReasonSpace = "space"
	GCReasonAge   = "age"
)

// Node events of the image garbage collector, as upstream.
const (
	EventFreeDiskSpaceFailed = "FreeDiskSpaceFailed"
	EventInvalidDiskCapacity = "InvalidDiskCapacity"
	EventImageGCFailed       = "ImageGCFailed"
)

// GC is what image garbage collection needs besides the image service.
type GC struct {
	// Images lists and removes images (required).
	Images ImageRemover
	// Containers tells the images in use (required).
	Containers ContainerLister
	// Fs reports the image filesystem; nil: no collection by usage (age and
	// ReclaimImages only).
	Fs ImageFs
	// Metrics and Events may be nil. NodeName names the Node the events are
	// about.
	Metrics  Metrics
	Events   Recorder
	NodeName string
}

// WithGC turns on image garbage collection with cfg's policy.
func WithGC(gc GC) Option {
	if gc.Images == nil || gc.Containers == nil {
		panic("image: garbage collection needs Images and Containers")
	}
	return func(a *Actor) { a.gcDeps = &gc }
}

// FsInfoer tells the capacity and availability of the filesystem at a
// mountpoint (adapters/host's Stats; the simulated runtime for its own).
type FsInfoer interface {
	FsInfo(ctx context.Context, mountpoint string) (*statsapi.FsStats, error)
}

// FsFromInfo is the ImageFs of the filesystem the runtime's ImageFsInfo
// names (its first image filesystem's mountpoint), measured by fs. Where fs
// gives no available bytes, they are its capacity less the bytes used
// (fs's figure, else the runtime's).
func FsFromInfo(info ImageFsInfoer, fs FsInfoer) ImageFs {
	return infoFs{info: info, fs: fs}
}

type infoFs struct {
	info ImageFsInfoer
	fs   FsInfoer
}

func (f infoFs) ImageFsCapacity(ctx context.Context) (uint64, uint64, error) {
	resp, err := f.info.ImageFsInfo(ctx)
	if err != nil {
		return 0, 0, fmt.Errorf("image filesystem info: %w", err)
	}
	fss := resp.GetImageFilesystems()
	if len(fss) == 0 || fss[0].GetFsId().GetMountpoint() == "" {
		return 0, 0, errors.New("image filesystem info: the runtime names no image filesystem")
	}
	mp := fss[0].GetFsId().GetMountpoint()
	st, err := f.fs.FsInfo(ctx, mp)
	if err != nil {
		return 0, 0, fmt.Errorf("image filesystem %s: %w", mp, err)
	}
	if st == nil || st.CapacityBytes == nil {
		return 0, 0, fmt.Errorf("image filesystem %s: no capacity", mp)
	}
	capacity := *st.CapacityBytes
	if st.AvailableBytes != nil {
		return capacity, *st.AvailableBytes, nil
	}
	used := fss[0].GetUsedBytes().GetValue()
	if st.UsedBytes != nil {
		used = *st.UsedBytes
	}
	return capacity, capacity - min(used, capacity), nil
}

// imageRecord is what the collector knows of one image.
type imageRecord struct {
	id            string
	names         []string  // tags and digests
	firstDetected time.Time // zero: present when the actor started
	lastUsed      time.Time // by a container, or asked for; zero: never seen used
	size          uint64
	pinned        bool
	inUse         bool
}

// gcRequest is one collection asked for: the periodic one (reclaim nil) or
// a ReclaimImages.
type gcRequest struct {
	reclaim *messages.ReclaimImages
	replyTo *actor.PID
}

// gcState is one incarnation's collector.
type gcState struct {
	timer    actorkit.Timer
	began    time.Time               // the incarnation's start (for MaximumGCAge)
	records  map[string]*imageRecord // by image ID
	asked    map[string]time.Time    // names asked for and not yet matched to a record
	detected bool                    // a detection ran in this incarnation
	running  *gcRequest              // the collection in flight
	queue    []*gcRequest            // waiting, in order
	failed   bool                    // the last periodic collection failed
	byName   map[string]*imageRecord // records by ID, tag and digest
}

// gcScanned is the listing a collection starts from.
type gcScanned struct {
	actorkit.Tag
	images     []*runtimeapi.Image
	containers []*runtimeapi.Container
	err        error
}

// victim is an image a collection may delete.
type victim struct {
	id   string
	size uint64
}

// gcPlan is what a collection deletes, decided on the mailbox.
type gcPlan struct {
	age   []victim // deleted whatever the usage
	space []victim // deleted in this order while more is to be freed
	// reclaim is the bytes to free (ReclaimImages); < 0: by the
	// filesystem's usage (the periodic collection).
	reclaim int64
}

// removal is one image deleted.
type removal struct {
	id     string
	size   uint64
	reason string
}

// gcDone is the result of a collection's deletions.
type gcDone struct {
	actorkit.Tag
	removed []removal
	// toFree is what was to be freed for space (0: nothing), freed what
	// was freed for space.
	toFree, freed int64
	usage         int   // the filesystem's usage in percent (periodic)
	capacityErr   error // the filesystem reported a zero capacity
	err           error // failed calls
}

func (a *Actor) startGC() {
	if a.gcDeps == nil {
		a.gc = nil
		return
	}
	a.gc = &gcState{
		timer:   actorkit.NewTimer("image-gc"),
		began:   a.clk.Now(),
		records: map[string]*imageRecord{},
		asked:   map[string]time.Time{},
		byName:  map[string]*imageRecord{},
	}
	// The first collection runs at once, as upstream's (its detection
	// takes every image present as seen long ago).
	a.enqueueGC(&gcRequest{})
}

// stopGC answers every ReclaimImages waiting: a new incarnation cannot.
func (a *Actor) stopGC(ctx actor.Context, why string) {
	g := a.gc
	if g == nil {
		return
	}
	g.timer.Stop()
	reqs := g.queue
	if g.running != nil {
		reqs = append([]*gcRequest{g.running}, reqs...)
	}
	for _, r := range reqs {
		a.replyReclaim(ctx, r, &messages.ImagesReclaimed{Err: why})
	}
	a.gc = nil
}

func (a *Actor) handleReclaimImages(ctx actor.Context, m *messages.ReclaimImages) {
	req := &gcRequest{reclaim: m, replyTo: m.ReplyTo}
	if req.replyTo == nil {
		req.replyTo = ctx.Sender()
	}
	if a.gc == nil {
		a.replyReclaim(ctx, req, &messages.ImagesReclaimed{Err: "image garbage collection is not configured"})
		return
	}
	a.enqueueGC(req)
}

func (a *Actor) handleFired(m *actorkit.Fired) {
	if a.gc == nil || !a.gc.timer.Fired(a.self, m) {
		return
	}
	a.enqueueGC(&gcRequest{})
}

// enqueueGC queues a collection; a periodic one already waiting is not
// queued twice.
func (a *Actor) enqueueGC(r *gcRequest) {
	g := a.gc
	if r.reclaim == nil {
		for _, q := range g.queue {
			if q.reclaim == nil {
				return
			}
		}
	}
	g.queue = append(g.queue, r)
	a.nextGC()
}

// nextGC starts the next collection unless one runs: first the listing.
func (a *Actor) nextGC() {
	g := a.gc
	if g == nil || g.running != nil || len(g.queue) == 0 {
		return
	}
	g.running, g.queue = g.queue[0], g.queue[1:]
	deps, timeout := a.gcDeps, a.cfg.StatusTimeout
	actorkit.GoIn(a.self, a.callsCtx, 0, func(ctx context.Context) *gcScanned {
		imgs, err := call(ctx, timeout, deps.Images.ListImages)
		if err != nil {
			return &gcScanned{err: fmt.Errorf("list images: %w", err)}
		}
		ctrs, err := call(ctx, timeout, func(ctx context.Context) ([]*runtimeapi.Container, error) {
			return deps.Containers.ListContainers(ctx, nil)
		})
		if err != nil {
			return &gcScanned{err: fmt.Errorf("list containers: %w", err)}
		}
		return &gcScanned{images: imgs, containers: ctrs}
	})
}

// call runs f with a context bounded by timeout.
func call[T any](parent context.Context, timeout time.Duration, f func(context.Context) (T, error)) (T, error) {
	ctx, cancel := context.WithTimeout(parent, timeout)
	defer cancel()
	return f(ctx)
}

func (a *Actor) handleGCScanned(ctx actor.Context, m *gcScanned) {
	g := a.gc
	if g == nil || !a.self.Mine(m) || g.running == nil {
		return
	}
	if m.err != nil {
		a.finishGC(ctx, &gcDone{err: m.err})
		return
	}
	now := a.clk.Now()
	a.detect(now, m.images, m.containers)
	plan := a.plan(now, g.running.reclaim)
	deps, cfg := a.gcDeps, a.cfg
	actorkit.GoIn(a.self, a.callsCtx, 0, func(ctx context.Context) *gcDone {
		return collect(ctx, deps, cfg, plan)
	})
}

// detect updates the records from a listing (upstream's detectImages): a
// new image is first detected now (long ago in the incarnation's first
// detection); an image any container uses, or a name asked for since the
// last detection, was last used now (then).
func (a *Actor) detect(now time.Time, imgs []*runtimeapi.Image, ctrs []*runtimeapi.Container) {
	g := a.gc
	detectTime := now
	if !g.detected {
		detectTime = time.Time{}
	}
	g.detected = true
	used := map[string]bool{}
	for _, c := range ctrs {
		for _, ref := range []string{c.GetImageRef(), c.GetImageId(), c.GetImage().GetImage(), c.GetImage().GetUserSpecifiedImage()} {
			if ref != "" {
				used[ref] = true
			}
		}
	}
	records := make(map[string]*imageRecord, len(imgs))
	byName := make(map[string]*imageRecord, len(imgs))
	for _, img := range imgs {
		id := img.GetId()
		if id == "" {
			continue
		}
		r := g.records[id]
		if r == nil {
			r = &imageRecord{id: id, firstDetected: detectTime}
		}
		r.names = append(append([]string(nil), img.GetRepoTags()...), img.GetRepoDigests()...)
		r.size, r.pinned, r.inUse = img.GetSize(), img.GetPinned(), false
		for _, n := range append([]string{id}, r.names...) {
			byName[n] = r
			if used[n] {
				r.inUse = true
			}
			if t, ok := g.asked[n]; ok {
				if t.After(r.lastUsed) {
					r.lastUsed = t
				}
				delete(g.asked, n)
			}
		}
		if r.inUse {
			r.lastUsed = now
		}
		records[id] = r
	}
	g.records, g.byName = records, byName
	// A name asked for but not present (a pull in flight) waits for a
	// later detection, for a while.
	for n, t := range g.asked {
		if now.Sub(t) > 2*a.cfg.GCPeriod {
			delete(g.asked, n)
		}
	}
}

// noteUsed records that an image (by name or ID) was asked for now.
func (a *Actor) noteUsed(name string) {
	g := a.gc
	if g == nil || name == "" {
		return
	}
	now := a.clk.Now()
	if r := g.byName[name]; r != nil {
		if now.After(r.lastUsed) {
			r.lastUsed = now
		}
		return
	}
	g.asked[name] = now
}

// busy reports whether a pull or status check of the image is in flight.
func (a *Actor) busy(r *imageRecord) bool {
	if _, ok := a.ops[r.id]; ok {
		return true
	}
	for _, n := range r.names {
		if _, ok := a.ops[n]; ok {
			return true
		}
	}
	return false
}

// plan decides what a collection may delete (upstream's
// imagesInEvictionOrder, freeOldImages, freeSpace): never an image in use,
// pinned, being pulled, or asked for at this very time; least recently
// used first (then first detected first); for space only images first
// detected MinimumGCAge ago or more; by age (periodic collections with
// MaximumGCAge set, once MaximumGCAge has passed since the start) images
// not used, nor seen, for longer than MaximumGCAge.
func (a *Actor) plan(now time.Time, reclaim *messages.ReclaimImages) gcPlan {
	g := a.gc
	var cands []*imageRecord
	for _, r := range g.records {
		if r.inUse || r.pinned || a.busy(r) || !r.lastUsed.Before(now) {
			continue
		}
		cands = append(cands, r)
	}
	sort.Slice(cands, func(i, j int) bool {
		ci, cj := cands[i], cands[j]
		if !ci.lastUsed.Equal(cj.lastUsed) {
			return ci.lastUsed.Before(cj.lastUsed)
		}
		if !ci.firstDetected.Equal(cj.firstDetected) {
			return ci.firstDetected.Before(cj.firstDetected)
		}
		return ci.id < cj.id
	})
	p := gcPlan{reclaim: -1}
	if reclaim != nil {
		p.reclaim = max(reclaim.Bytes, 0)
	}
	maxAge := a.cfg.MaximumGCAge
	byAge := reclaim == nil && maxAge > 0 && now.Sub(g.began) > maxAge
	for _, r := range cands {
		v := victim{id: r.id, size: r.size}
		unusedSince := r.lastUsed
		if unusedSince.IsZero() {
			unusedSince = r.firstDetected
		}
		switch {
		case byAge && now.Sub(unusedSince) > maxAge:
			p.age = append(p.age, v)
		case now.Sub(r.firstDetected) >= a.cfg.MinimumGCAge:
			p.space = append(p.space, v)
		}
	}
	return p
}

// collect deletes what plan allows, off the mailbox: the images too old,
// then, for space, the others in order until enough is freed. For the
// periodic collection enough is what brings the filesystem from the high
// threshold down to the low one, as upstream computes it.
func collect(ctx context.Context, deps *GC, cfg Config, p gcPlan) *gcDone {
	d := &gcDone{}
	var errs []error
	remove := func(v victim, reason string) bool {
		_, err := call(ctx, cfg.StatusTimeout, func(ctx context.Context) (struct{}, error) {
			return struct{}{}, deps.Images.RemoveImage(ctx, v.id)
		})
		if err != nil {
			errs = append(errs, fmt.Errorf("remove image %s: %w", v.id, err))
			return false
		}
		d.removed = append(d.removed, removal{id: v.id, size: v.size, reason: reason})
		return true
	}
	for _, v := range p.age {
		remove(v, GCReasonAge)
	}
	toFree := p.reclaim
	if toFree < 0 {
		toFree = 0
		if deps.Fs != nil {
			var err error
			toFree, err = spaceToFree(ctx, deps.Fs, cfg, d)
			if err != nil {
				errs = append(errs, err)
			}
		}
	}
	d.toFree = toFree
	for _, v := range p.space {
		if d.freed >= toFree {
			break
		}
		if remove(v, GCReasonSpace) {
			d.freed += int64(v.size)
		}
	}
	d.err = errors.Join(errs...)
	return d
}

// spaceToFree is the bytes to free to bring the image filesystem from at
// or above the high threshold down to the low one; 0 below the high one.
func spaceToFree(ctx context.Context, fs ImageFs, cfg Config, d *gcDone) (int64, error) {
	type fsStats struct{ capacity, available uint64 }
	st, err := call(ctx, cfg.StatusTimeout, func(ctx context.Context) (fsStats, error) {
		c, av, err := fs.ImageFsCapacity(ctx)
		return fsStats{c, av}, err
	})
	if err != nil {
		return 0, fmt.Errorf("image filesystem stats: %w", err)
	}
	if st.capacity == 0 {
		d.capacityErr = errors.New("invalid capacity 0 on image filesystem")
		return 0, d.capacityErr
	}
	capacity, available := int64(min(st.capacity, 1<<62)), int64(min(st.available, st.capacity, 1<<62))
	d.usage = 100 - int(available*100/capacity)
	if d.usage < cfg.HighThresholdPercent {
		return 0, nil
	}
	return max(capacity*int64(100-cfg.LowThresholdPercent)/100-available, 0), nil
}

func (a *Actor) handleGCDone(ctx actor.Context, m *gcDone) {
	if a.gc == nil || !a.self.Mine(m) || a.gc.running == nil {
		return
	}
	a.finishGC(ctx, m)
}

// finishGC applies a collection's result: records, metrics, events, the
// reply; then the next collection.
func (a *Actor) finishGC(ctx actor.Context, m *gcDone) {
	g := a.gc
	req := g.running
	g.running = nil
	counts := map[string]int{}
	for _, r := range m.removed {
		counts[r.reason]++
		if rec := g.records[r.id]; rec != nil {
			delete(g.records, r.id)
			for _, n := range rec.names {
				delete(g.byName, n)
			}
			delete(g.byName, r.id)
		}
		a.log.Info("image garbage-collected", "image", r.id, "size", r.size, "reason", r.reason)
	}
	if a.gcDeps.Metrics != nil {
		for _, reason := range []string{GCReasonAge, GCReasonSpace} {
			if n := counts[reason]; n > 0 {
				a.gcDeps.Metrics.IncImageGC(reason, n)
			}
		}
	}
	if req.reclaim != nil {
		r := &messages.ImagesReclaimed{Freed: m.freed, Removed: len(m.removed)}
		if m.err != nil {
			r.Err = m.err.Error()
		}
		a.replyReclaim(ctx, req, r)
	} else {
		a.periodicDone(m)
		g.timer.Arm(a.self, a.cfg.GCPeriod)
	}
	a.nextGC()
}

// periodicDone logs and reports a periodic collection as the upstream
// kubelet does: FreeDiskSpaceFailed when too little could be freed,
// InvalidDiskCapacity for a zero capacity, and ImageGCFailed when a
// collection fails twice in a row or more.
func (a *Actor) periodicDone(m *gcDone) {
	err := m.err
	if m.capacityErr != nil {
		a.nodeEvent(EventInvalidDiskCapacity, m.capacityErr.Error())
	}
	if m.toFree > 0 {
		a.log.Info("image filesystem over the high threshold: images garbage-collected", "usage", m.usage,
			"highThreshold", a.cfg.HighThresholdPercent, "lowThreshold", a.cfg.LowThresholdPercent,
			"toFree", m.toFree, "freed", m.freed)
	}
	if m.toFree > 0 && m.freed < m.toFree && m.err == nil {
		msg := fmt.Sprintf("Failed to garbage collect required amount of images. Attempted to free %d bytes, but only found %d bytes eligible to free.", m.toFree, m.freed)
		a.nodeEvent(EventFreeDiskSpaceFailed, msg)
		err = errors.New(msg)
	}
	if err == nil {
		a.gc.failed = false
		return
	}
	if a.gc.failed {
		a.log.Error("image garbage collection failed multiple times in a row", "err", err)
		a.nodeEvent(EventImageGCFailed, err.Error())
	} else {
		a.log.Warn("image garbage collection failed", "err", err)
	}
	a.gc.failed = true
}

func (a *Actor) nodeEvent(reason, msg string) {
	ev, name := a.gcDeps.Events, a.gcDeps.NodeName
	if ev == nil || name == "" {
		return
	}
	ref := &v1.ObjectReference{Kind: "Node", Name: name, UID: types.UID(name)}
	ev.Eventf(ref, v1.EventTypeWarning, reason, "%s", msg)
}

func (a *Actor) replyReclaim(ctx actor.Context, r *gcRequest, m *messages.ImagesReclaimed) {
	if r.reclaim == nil {
		return
	}
	if r.replyTo == nil {
		a.log.Warn("ReclaimImages without ReplyTo or sender", "freed", m.Freed, "err", m.Err)
		return
	}
	ctx.Send(r.replyTo, m)
}
