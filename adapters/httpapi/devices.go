package httpapi

import (
	"encoding/json"
	"fmt"
	"net/http"
	"slices"
	"strconv"
	"strings"

	v1 "k8s.io/api/core/v1"
	"k8s.io/apimachinery/pkg/types"

	"github.com/actorlet/actorlet/messages"
)

// DevicesView is GET /devices: the node's extended resources as the
// DevicesActor knows them (the standalone node view of the GPUs; in
// cluster mode the Node object shows the same counts and labels).
type DevicesView struct {
	Capacity    map[v1.ResourceName]int64    `json:"capacity"`
	Allocatable map[v1.ResourceName]int64    `json:"allocatable"`
	Healthy     map[v1.ResourceName][]string `json:"healthy"`
	Labels      map[string]string            `json:"labels,omitempty"`
	Annotations map[string]string            `json:"annotations,omitempty"`
	Pods        []DevicesPod                 `json:"pods"`
}

// DevicesPod is one pod's devices by container and resource.
type DevicesPod struct {
	Namespace  string                                  `json:"namespace"`
	Name       string                                  `json:"name"`
	UID        types.UID                               `json:"uid"`
	Containers map[string]map[v1.ResourceName][]string `json:"containers"`
}

// handleGetDevices serves GET /devices.
func (s *Server) handleGetDevices(w http.ResponseWriter, r *http.Request) {
	const what = "devices actor"
	var view DevicesView
	c, ok := askFor[*messages.DeviceCapacity](s, w, r, s.cfg.Devices, what, "devices", &messages.GetDeviceCapacity{})
	if !ok {
		return
	}
	view.Capacity, view.Allocatable, view.Labels, view.Annotations = c.Capacity, c.Allocatable, c.Labels, c.Annotations
	res, aerr := s.ask(r, s.cfg.Devices, what, &messages.GetAllocatableDevices{})
	if aerr != nil {
		httpError(w, aerr.code, "devices: %s", aerr.msg)
		return
	}
	if a, ok := res.(*messages.AllocatableDevices); ok {
		view.Healthy = a.Devices
	}
	if res, aerr = s.ask(r, s.cfg.Devices, what, &messages.GetPodDevices{}); aerr != nil {
		httpError(w, aerr.code, "devices: %s", aerr.msg)
		return
	}
	view.Pods = []DevicesPod{}
	if l, ok := res.(*messages.PodDevicesList); ok {
		for _, p := range l.Pods {
			view.Pods = append(view.Pods, DevicesPod{Namespace: p.Namespace, Name: p.Name, UID: p.UID, Containers: p.Containers})
		}
	}
	slices.SortFunc(view.Pods, func(a, b DevicesPod) int {
		if a.Namespace != b.Namespace {
			return strings.Compare(a.Namespace, b.Namespace)
		}
		return strings.Compare(a.Name, b.Name)
	})
	w.Header().Set("Content-Type", "application/json")
	_ = json.NewEncoder(w).Encode(view)
}

// handleDeviceFault serves POST /devices/fault?device=<id>&xid=<n>: an Xid
// error injected into a simulated GPU (--gpus=mock:...), for chaos tests.
// A real device refuses it (400).
func (s *Server) handleDeviceFault(w http.ResponseWriter, r *http.Request) {
	id := r.URL.Query().Get("device")
	xid, err := strconv.ParseUint(r.URL.Query().Get("xid"), 10, 64)
	if id == "" || err != nil {
		httpError(w, http.StatusBadRequest, "device fault: want ?device=<device ID>&xid=<Xid number>")
		return
	}
	m, ok := askFor[*messages.DeviceFaultInjected](s, w, r, s.cfg.Devices, "devices actor", "device fault",
		&messages.InjectDeviceFault{DeviceID: id, Xid: xid})
	if !ok {
		return
	}
	if m.Err != "" {
		httpError(w, http.StatusBadRequest, "device fault: %s", m.Err)
		return
	}
	w.Header().Set("Content-Type", "text/plain; charset=utf-8")
	_, _ = fmt.Fprintf(w, "Xid %d injected on %s\n", xid, id)
}
