package draplugin

import (
	"context"
	"fmt"
	"log/slog"
	"slices"
	"sync"
	"time"

	resourceapi "k8s.io/api/resource/v1"
	"k8s.io/apimachinery/pkg/api/equality"
	"k8s.io/apimachinery/pkg/api/resource"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/watch"
	"k8s.io/client-go/kubernetes"
	"k8s.io/utils/ptr"
)

// UnhealthyTaintKey is the device taint of an unhealthy GPU in the slice
// (effect NoSchedule: no new claim gets it, the pods holding it keep it).
const UnhealthyTaintKey = "gpu.nvidia.com/unhealthy"

// SliceDevice is a device to publish: its name, attributes and capacity,
// and its health.
type SliceDevice struct {
	Name       string
	Attributes map[resourceapi.QualifiedName]resourceapi.DeviceAttribute
	Capacity   map[resourceapi.QualifiedName]resourceapi.DeviceCapacity
	Healthy    bool
	Why        string // why unhealthy, for the taint's value ("" none)
}

// Publisher keeps the node's one ResourceSlice of the driver as it was
// last told: Set never blocks, a goroutine writes it through the API
// server, retrying with back-off; Close stops it (the slice is left to
// the node's owner reference: it goes with the Node).
type Publisher struct {
	client   kubernetes.Interface
	driver   string
	nodeName string
	log      *slog.Logger
	onError  func(error)

	mu      sync.Mutex
	want    []SliceDevice
	wantSet bool
	gen     int64
	kick    chan struct{}
	done    chan struct{}
	stopped chan struct{}
	synced  bool
}

// NewPublisher starts publishing (nothing until the first Set). onError,
// if set, counts each failed write (a metric).
func NewPublisher(client kubernetes.Interface, driver, nodeName string, log *slog.Logger, onError func(error)) *Publisher {
	if log == nil {
		log = slog.Default()
	}
	p := &Publisher{client: client, driver: driver, nodeName: nodeName, onError: onError,
		log:  log.With("component", "dra-slice", "driver", driver),
		kick: make(chan struct{}, 1), done: make(chan struct{}), stopped: make(chan struct{})}
	go p.run()
	go p.watch()
	return p
}

// SliceName is the node's slice of the driver.
func SliceName(nodeName, driver string) string { return nodeName + "-" + driver }

// Set replaces the devices to publish.
func (p *Publisher) Set(devs []SliceDevice) {
	p.mu.Lock()
	p.want, p.wantSet, p.synced = slices.Clone(devs), true, false
	p.gen++
	p.mu.Unlock()
	select {
	case p.kick <- struct{}{}:
	default:
	}
}

// Synced says whether the last Set is written.
func (p *Publisher) Synced() bool {
	p.mu.Lock()
	defer p.mu.Unlock()
	return p.synced
}

// Close stops the publisher.
func (p *Publisher) Close() {
	close(p.done)
	<-p.stopped
}

func (p *Publisher) run() {
	defer close(p.stopped)
	backoff, lastErr := time.Duration(0), ""
	resync := time.NewTicker(resyncPeriod)
	defer resync.Stop()
	for {
		var retry <-chan time.Time
		if backoff > 0 {
			retry = time.After(backoff)
		}
		select {
		case <-p.done:
			return
		case <-p.kick:
		case <-retry:
		case <-resync.C:
		}
		p.mu.Lock()
		devs, set, gen := p.want, p.wantSet, p.gen
		p.mu.Unlock()
		if !set {
			continue
		}
		ctx, cancel := context.WithTimeout(context.Background(), 30*time.Second)
		wrote, err := p.write(ctx, devs)
		cancel()
		if err != nil {
			if err.Error() != lastErr { // logged once per reason
				p.log.Error("ResourceSlice not written: retrying", "slice", SliceName(p.nodeName, p.driver), "err", err)
				lastErr = err.Error()
			}
			if p.onError != nil {
				p.onError(err)
			}
			backoff = min(max(2*backoff, 500*time.Millisecond), time.Minute)
			continue
		}
		backoff, lastErr = 0, ""
		p.mu.Lock()
		if p.gen == gen {
			p.synced = true
		}
		p.mu.Unlock()
		if wrote {
			p.log.Info("ResourceSlice written", "slice", SliceName(p.nodeName, p.driver), "devices", len(devs))
		}
	}
}

// resyncPeriod is how often the slice is written again though nothing
// changed (a safety net under the watch: someone edited or deleted it).
const resyncPeriod = time.Minute

// watch writes the slice again when someone else deletes it: the node's
// DRA manager deletes the node's slices at its start, before its drivers
// register, as upstream's kubelet, and a driver publishes again.
func (p *Publisher) watch() {
	name := SliceName(p.nodeName, p.driver)
	ctx, cancel := context.WithCancel(context.Background())
	go func() { <-p.done; cancel() }()
	for ctx.Err() == nil {
		// A node may only list and watch the slices of its own name
		// (the node authorizer).
		w, err := p.client.ResourceV1().ResourceSlices().Watch(ctx, metav1.ListOptions{FieldSelector: resourceapi.ResourceSliceSelectorNodeName + "=" + p.nodeName})
		if err == nil {
			for ev := range w.ResultChan() {
				if s, ok := ev.Object.(*resourceapi.ResourceSlice); ok && s.Name == name && ev.Type == watch.Deleted {
					p.log.Info("ResourceSlice deleted by someone else: writing it again", "slice", name)
					select {
					case p.kick <- struct{}{}:
					default:
					}
				}
			}
			w.Stop()
		}
		select {
		case <-ctx.Done():
		case <-time.After(time.Second):
		}
	}
}

// write creates or updates the slice (its pool's generation grows with
// every change; one slice per pool).
func (p *Publisher) write(ctx context.Context, devs []SliceDevice) (bool, error) {
	api := p.client.ResourceV1().ResourceSlices()
	name := SliceName(p.nodeName, p.driver)
	spec := resourceapi.ResourceSliceSpec{
		Driver:   p.driver,
		NodeName: ptr.To(p.nodeName),
		Pool:     resourceapi.ResourcePool{Name: p.nodeName, ResourceSliceCount: 1},
	}
	for _, d := range devs {
		dev := resourceapi.Device{Name: d.Name, Attributes: d.Attributes, Capacity: d.Capacity}
		if !d.Healthy {
			dev.Taints = []resourceapi.DeviceTaint{{Key: UnhealthyTaintKey, Value: taintValue(d.Why), Effect: resourceapi.DeviceTaintEffectNoSchedule}}
		}
		spec.Devices = append(spec.Devices, dev)
	}
	// Listed by node, not read by name: the node authorizer lets a node
	// get a slice only once it exists (a missing one is forbidden).
	list, err := api.List(ctx, metav1.ListOptions{FieldSelector: resourceapi.ResourceSliceSelectorNodeName + "=" + p.nodeName})
	if err != nil {
		return false, fmt.Errorf("list the node's ResourceSlices: %w", err)
	}
	var old *resourceapi.ResourceSlice
	for i := range list.Items {
		if list.Items[i].Name == name {
			old = &list.Items[i]
		}
	}
	if old == nil {
		node, err := p.client.CoreV1().Nodes().Get(ctx, p.nodeName, metav1.GetOptions{})
		if err != nil {
			return false, fmt.Errorf("get the node (the slice's owner): %w", err)
		}
		spec.Pool.Generation = 1
		s := &resourceapi.ResourceSlice{
			ObjectMeta: metav1.ObjectMeta{Name: name, OwnerReferences: []metav1.OwnerReference{{
				APIVersion: "v1", Kind: "Node", Name: node.Name, UID: node.UID, Controller: ptr.To(true),
			}}},
			Spec: spec,
		}
		_, err = api.Create(ctx, s, metav1.CreateOptions{})
		return err == nil, err
	}
	spec.Pool.Generation = old.Spec.Pool.Generation
	if equality.Semantic.DeepEqual(old.Spec, spec) {
		return false, nil // a resync with nothing changed
	}
	spec.Pool.Generation = old.Spec.Pool.Generation + 1
	upd := old.DeepCopy()
	upd.Spec = spec
	_, err = api.Update(ctx, upd, metav1.UpdateOptions{})
	return err == nil, err
}

// taintValue fits a reason in a taint value (a label value: at most 63
// characters of [A-Za-z0-9_.-], "" allowed).
func taintValue(why string) string {
	b := []byte{}
	for i := 0; i < len(why) && len(b) < 63; i++ {
		c := why[i]
		switch {
		case c >= 'a' && c <= 'z', c >= 'A' && c <= 'Z', c >= '0' && c <= '9', c == '_', c == '.', c == '-':
			b = append(b, c)
		case c == ' ' && len(b) > 0 && b[len(b)-1] != '_':
			b = append(b, '_')
		}
	}
	for len(b) > 0 && !isAlnum(b[len(b)-1]) {
		b = b[:len(b)-1]
	}
	for len(b) > 0 && !isAlnum(b[0]) {
		b = b[1:]
	}
	return string(b)
}

func isAlnum(c byte) bool {
	return c >= 'a' && c <= 'z' || c >= 'A' && c <= 'Z' || c >= '0' && c <= '9'
}

// Quantity of memory in bytes as a slice capacity.
func MemoryCapacity(bytes uint64) resourceapi.DeviceCapacity {
	return resourceapi.DeviceCapacity{Value: *resource.NewQuantity(int64(bytes), resource.BinarySI)}
}
