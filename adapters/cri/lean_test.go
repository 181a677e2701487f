package cri

import (
	"context"
	"errors"
	"fmt"
	"math/rand/v2"
	"slices"
	"testing"

	"google.golang.org/grpc"
	"google.golang.org/grpc/codes"
	"google.golang.org/grpc/mem"
	"google.golang.org/grpc/status"
	"google.golang.org/protobuf/encoding/protowire"
	"google.golang.org/protobuf/proto"
	v1 "k8s.io/api/core/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/types"
	runtimeapi "k8s.io/cri-api/pkg/apis/runtime/v1"

	"github.com/actorlet/actorlet/errdefs"
	"github.com/actorlet/actorlet/podspec"
	"github.com/actorlet/actorlet/runtimes/sim"
)

// leanObject is what the lean listing gives of a sandbox (sandboxID
// empty) or a container (metadataUID empty).
type leanObject struct {
	id, sandboxID, podUID, metadataUID string
	state                              int32
}

func fullSandbox(s *runtimeapi.PodSandbox) leanObject {
	return leanObject{id: s.GetId(), podUID: s.GetLabels()[podspec.LabelPodUID], metadataUID: s.GetMetadata().GetUid(), state: int32(s.GetState())}
}

func fullContainer(c *runtimeapi.Container) leanObject {
	return leanObject{id: c.GetId(), sandboxID: c.GetPodSandboxId(), podUID: c.GetLabels()[podspec.LabelPodUID], state: int32(c.GetState())}
}

// listFull and listLean list through c with the full and the lean
// listing, as leanObjects in the order listed.
func listFull(ctx context.Context, c *Client) (sandboxes, containers []leanObject, err error) {
	sbs, err := c.ListPodSandbox(ctx, nil)
	if err != nil {
		return nil, nil, err
	}
	cs, err := c.ListContainers(ctx, nil)
	if err != nil {
		return nil, nil, err
	}
	for _, s := range sbs {
		sandboxes = append(sandboxes, fullSandbox(s))
	}
	for _, ct := range cs {
		containers = append(containers, fullContainer(ct))
	}
	return sandboxes, containers, nil
}

func listLean(ctx context.Context, c *Client) (sandboxes, containers []leanObject, err error) {
	err = c.ListPodSandboxLean(ctx, func(id, podUID, metadataUID string, state int32) {
		sandboxes = append(sandboxes, leanObject{id: id, podUID: podUID, metadataUID: metadataUID, state: state})
	})
	if err != nil {
		return nil, nil, err
	}
	err = c.ListContainersLean(ctx, func(id, sandboxID, podUID string, state int32) {
		containers = append(containers, leanObject{id: id, sandboxID: sandboxID, podUID: podUID, state: state})
	})
	if err != nil {
		return nil, nil, err
	}
	return sandboxes, containers, nil
}

// byID sorts objects by ID: two listings of the sim runtime list its
// containers in map order.
func byID(objs []leanObject) []leanObject {
	out := slices.Clone(objs)
	slices.SortFunc(out, func(a, b leanObject) int {
		if a.id < b.id {
			return -1
		}
		if a.id > b.id {
			return 1
		}
		return 0
	})
	return out
}

// benchPod is a pod as the agent runs it: labels, annotations and a
// container as actorlet gives them to the runtime.
func benchPod(i int) *v1.Pod {
	return &v1.Pod{
		ObjectMeta: metav1.ObjectMeta{
			Name: fmt.Sprintf("pod-%d", i), Namespace: "default", UID: types.UID(fmt.Sprintf("0f0e0d0c-0b0a-0908-0706-%012d", i)),
			Labels:      map[string]string{"app": "bench", "tier": "web", "pod-template-hash": "5d8f7c9b4"},
			Annotations: map[string]string{"kubernetes.io/config.source": "api", "kubernetes.io/config.seen": "2026-01-01T00:00:00Z"},
		},
		Spec: v1.PodSpec{Containers: []v1.Container{{Name: "app", Image: "busybox:1.36"}}},
	}
}

// populate runs n pods in the sim runtime r, each a sandbox and a
// container. vary (nil: every pod as the agent runs it) changes some:
// labels taken away or made different, sandboxes stopped, containers left
// created or stopped.
func populate(tb testing.TB, r *sim.Runtime, n int, vary *rand.Rand) {
	tb.Helper()
	ctx := context.Background()
	if _, err := r.PullImage(ctx, &runtimeapi.PullImageRequest{Image: &runtimeapi.ImageSpec{Image: "busybox:1.36"}}); err != nil {
		tb.Fatal(err)
	}
	pick := func(k int) int {
		if vary == nil {
			return 0
		}
		return vary.IntN(k)
	}
	for i := range n {
		pod := benchPod(i)
		sbCfg := podspec.SandboxConfig(pod, 0, "")
		sbCfg.LogDirectory = "" // the sim would make it; no listing shows it
		switch pick(6) {
		case 1: // a sandbox that names its pod only in its metadata
			delete(sbCfg.Labels, podspec.LabelPodUID)
		case 2: // neither: not a pod of the agent
			delete(sbCfg.Labels, podspec.LabelPodUID)
			sbCfg.Metadata.Uid = ""
		case 3: // the label and the metadata disagree
			sbCfg.Labels[podspec.LabelPodUID] = "other-" + string(pod.UID)
		}
		sb, err := r.RunPodSandbox(ctx, &runtimeapi.RunPodSandboxRequest{Config: sbCfg})
		if err != nil {
			tb.Fatal(err)
		}
		cCfg := podspec.ContainerConfig(pod, &pod.Spec.Containers[0], 0, "busybox:1.36", false)
		if pick(5) == 1 {
			delete(cCfg.Labels, podspec.LabelPodUID)
		}
		ct, err := r.CreateContainer(ctx, &runtimeapi.CreateContainerRequest{PodSandboxId: sb.PodSandboxId, Config: cCfg, SandboxConfig: sbCfg})
		if err != nil {
			tb.Fatal(err)
		}
		state := pick(4) // 0, 1: running; 2: created; 3: exited
		if state != 2 {
			if _, err := r.StartContainer(ctx, &runtimeapi.StartContainerRequest{ContainerId: ct.ContainerId}); err != nil {
				tb.Fatal(err)
			}
		}
		if state == 3 {
			if _, err := r.StopContainer(ctx, &runtimeapi.StopContainerRequest{ContainerId: ct.ContainerId}); err != nil {
				tb.Fatal(err)
			}
		}
		if pick(5) == 1 {
			if _, err := r.StopPodSandbox(ctx, &runtimeapi.StopPodSandboxRequest{PodSandboxId: sb.PodSandboxId}); err != nil {
				tb.Fatal(err)
			}
		}
	}
}

// The lean listing of a runtime gives, for every sandbox and container,
// what the full listing gives of the fields it reads.
func TestLeanListingMatchesFull(t *testing.T) {
	c, r, rec := serveSimRuntime(t)
	populate(t, r, 300, rand.New(rand.NewPCG(1, 2)))
	ctx := context.Background()

	fullS, fullC, err := listFull(ctx, c)
	if err != nil {
		t.Fatal(err)
	}
	leanS, leanC, err := listLean(ctx, c)
	if err != nil {
		t.Fatal(err)
	}
	if len(fullS) != 300 || len(fullC) != 300 {
		t.Fatalf("full listing: %d sandboxes and %d containers, want 300 each", len(fullS), len(fullC))
	}
	if !slices.Equal(leanS, fullS) {
		t.Errorf("sandboxes differ:\nlean %v\nfull %v", leanS, fullS)
	}
	if !slices.Equal(byID(leanC), byID(fullC)) {
		t.Errorf("containers differ:\nlean %v\nfull %v", byID(leanC), byID(fullC))
	}
	// The variations are there: the comparison covered them.
	var noLabel, noUID, disagree, stopped, created, exited, ctrNoLabel int
	for _, s := range fullS {
		switch {
		case s.podUID == "" && s.metadataUID == "":
			noUID++
		case s.podUID == "":
			noLabel++
		case s.podUID != s.metadataUID:
			disagree++
		}
		if s.state == int32(runtimeapi.PodSandboxState_SANDBOX_NOTREADY) {
			stopped++
		}
	}
	for _, ct := range fullC {
		switch runtimeapi.ContainerState(ct.state) {
		case runtimeapi.ContainerState_CONTAINER_CREATED:
			created++
		case runtimeapi.ContainerState_CONTAINER_EXITED:
			exited++
		}
		if ct.podUID == "" {
			ctrNoLabel++
		}
	}
	for name, n := range map[string]int{"without the label": noLabel, "without a uid": noUID, "label and metadata disagree": disagree,
		"stopped sandboxes": stopped, "created containers": created, "exited containers": exited, "containers without the label": ctrNoLabel} {
		if n == 0 {
			t.Errorf("no object %s: the test covers less than it says", name)
		}
	}
	if o := rec.last(); o.op != opListContainers || o.err != nil {
		t.Errorf("observer saw %+v, want %s without error", o, opListContainers)
	}
}

// --- the wire, byte by byte ---

// rawMessage is a message as bytes: what rawCodec reads and writes.
type rawMessage struct{ b []byte }

// rawCodec is a server codec that sends rawMessages as they are.
type rawCodec struct{}

func (rawCodec) Name() string { return "proto" }

func (rawCodec) Marshal(v any) (mem.BufferSlice, error) {
	return mem.BufferSlice{mem.SliceBuffer(v.(*rawMessage).b)}, nil
}

func (rawCodec) Unmarshal(data mem.BufferSlice, v any) error {
	v.(*rawMessage).b = data.Materialize()
	return nil
}

// serveRaw serves a runtime that answers Version and, with the given
// bytes, ListPodSandbox and ListContainers.
func serveRaw(t *testing.T, sandboxes, containers []byte) (*Client, *recorder) {
	t.Helper()
	version, err := proto.Marshal(&runtimeapi.VersionResponse{RuntimeName: "raw", RuntimeApiVersion: "v1"})
	if err != nil {
		t.Fatal(err)
	}
	handler := func(_ any, stream grpc.ServerStream) error {
		var req rawMessage
		if err := stream.RecvMsg(&req); err != nil {
			return err
		}
		method, _ := grpc.MethodFromServerStream(stream)
		answers := map[string][]byte{
			runtimeapi.RuntimeService_Version_FullMethodName:        version,
			runtimeapi.RuntimeService_ListPodSandbox_FullMethodName: sandboxes,
			runtimeapi.RuntimeService_ListContainers_FullMethodName: containers,
		}
		b, ok := answers[method]
		if !ok {
			return status.Error(codes.Unimplemented, method)
		}
		return stream.SendMsg(&rawMessage{b})
	}
	return serve(t, unixURL, func(*grpc.Server) {}, grpc.ForceServerCodecV2(rawCodec{}), grpc.UnknownServiceHandler(handler))
}

// wire builds protobuf bytes field by field.
type wire []byte

func (w wire) bytes(num protowire.Number, b []byte) wire {
	return protowire.AppendBytes(protowire.AppendTag(w, num, protowire.BytesType), b)
}

func (w wire) str(num protowire.Number, s string) wire { return w.bytes(num, []byte(s)) }

func (w wire) msg(num protowire.Number, m wire) wire { return w.bytes(num, m) }

func (w wire) varint(num protowire.Number, v uint64) wire {
	return protowire.AppendVarint(protowire.AppendTag(w, num, protowire.VarintType), v)
}

func (w wire) fixed32(num protowire.Number, v uint32) wire {
	return protowire.AppendFixed32(protowire.AppendTag(w, num, protowire.Fixed32Type), v)
}

func (w wire) fixed64(num protowire.Number, v uint64) wire {
	return protowire.AppendFixed64(protowire.AppendTag(w, num, protowire.Fixed64Type), v)
}

func (w wire) group(num protowire.Number, inner wire) wire {
	w = append(protowire.AppendTag(w, num, protowire.StartGroupType), inner...)
	return protowire.AppendTag(w, num, protowire.EndGroupType)
}

func (w wire) raw(b ...byte) wire { return append(w, b...) }

// label is one labels map entry.
func label(k, v string) wire { return wire(nil).str(1, k).str(2, v) }

func marshal(t testing.TB, m proto.Message) wire {
	t.Helper()
	b, err := proto.Marshal(m)
	if err != nil {
		t.Fatal(err)
	}
	return b
}

// Responses crafted on the wire, the odd cases a protobuf encoder may
// produce: the lean listing reads what proto.Unmarshal reads.
func TestLeanListingWire(t *testing.T) {
	const uidLabel = podspec.LabelPodUID
	sb := func(fields wire) wire { return wire(nil).msg(1, fields) } // one item of ListPodSandboxResponse
	ct := func(fields wire) wire { return wire(nil).msg(1, fields) } // one of ListContainersResponse
	tests := []struct {
		name                  string
		sandboxes, containers wire
	}{
		{name: "empty responses"},
		{
			name: "as proto.Marshal writes them",
			sandboxes: marshal(t, &runtimeapi.ListPodSandboxResponse{Items: []*runtimeapi.PodSandbox{
				{Id: "s1", Metadata: &runtimeapi.PodSandboxMetadata{Name: "p", Uid: "u1", Namespace: "ns", Attempt: 2}, State: runtimeapi.PodSandboxState_SANDBOX_READY,
					CreatedAt: 42, Labels: map[string]string{uidLabel: "u1", "app": "x"}, Annotations: map[string]string{uidLabel: "not this", "a": "b"}, RuntimeHandler: "runc"},
				{Id: "s2", Metadata: &runtimeapi.PodSandboxMetadata{Uid: "u2"}, State: runtimeapi.PodSandboxState_SANDBOX_NOTREADY},
				{Id: "s3", Labels: map[string]string{"app": "y"}},
			}}),
			containers: marshal(t, &runtimeapi.ListContainersResponse{Containers: []*runtimeapi.Container{
				{Id: "c1", PodSandboxId: "s1", Metadata: &runtimeapi.ContainerMetadata{Name: "app", Attempt: 1}, Image: &runtimeapi.ImageSpec{Image: "busybox"},
					ImageRef: "sha256:1", State: runtimeapi.ContainerState_CONTAINER_RUNNING, CreatedAt: 7,
					Labels: map[string]string{uidLabel: "u1", podspec.LabelContainerName: "app"}, Annotations: map[string]string{"h": "1"}, ImageId: "sha256:1"},
				{Id: "c2", PodSandboxId: "s3", State: runtimeapi.ContainerState_CONTAINER_EXITED},
			}}),
		},
		{
			name: "unknown fields of every wire type, everywhere",
			sandboxes: wire(nil).varint(99, 1).fixed32(98, 2).fixed64(97, 3).str(96, "x").group(95, wire(nil).varint(1, 1).group(2, wire(nil).str(3, "y"))).
				msg(1, wire(nil).str(1, "s1").varint(99, 5).msg(2, wire(nil).str(1, "name").fixed64(50, 1).str(2, "u1").group(60, nil)).
					msg(5, wire(nil).varint(7, 1).str(1, uidLabel).fixed32(9, 1).str(2, "u1").str(3, "z")).
					group(500, wire(nil).str(1, "not the id")).varint(3, 1)).
				str(1000, "trailing"),
			containers: wire(nil).group(10, nil).
				msg(1, wire(nil).str(1, "c1").fixed32(3, 9).str(2, "s1").msg(8, label(uidLabel, "u1")).str(15, "extra").varint(6, 2)),
		},
		{
			name:       "a field repeated: the last wins",
			sandboxes:  sb(wire(nil).str(1, "first").varint(3, 1).str(1, "s1").varint(3, 0)),
			containers: ct(wire(nil).str(1, "first").str(2, "sb-first").varint(6, 1).str(1, "c1").str(2, "s1").varint(6, 3)),
		},
		{
			name: "metadata twice is merged: a later one without a uid keeps the earlier",
			sandboxes: sb(wire(nil).str(1, "s1").msg(2, wire(nil).str(2, "u1")).msg(2, wire(nil).str(1, "name"))).
				raw(sb(wire(nil).str(1, "s2").msg(2, wire(nil).str(2, "u1")).msg(2, wire(nil).str(2, "u2")))...),
		},
		{
			name: "the label twice: the last entry wins, even when empty",
			sandboxes: sb(wire(nil).str(1, "s1").msg(5, label(uidLabel, "u1")).msg(5, label("app", "x")).msg(5, label(uidLabel, "u2"))).
				raw(sb(wire(nil).str(1, "s2").msg(2, wire(nil).str(2, "m2")).msg(5, label(uidLabel, "u1")).msg(5, label(uidLabel, "")))...),
			containers: ct(wire(nil).str(1, "c1").msg(8, label(uidLabel, "u1")).msg(8, label(uidLabel, "u3"))),
		},
		{
			name: "map entries out of order, repeated, with a key or value missing",
			sandboxes: sb(wire(nil).str(1, "s1").msg(5, wire(nil).str(2, "u1").str(1, uidLabel))).
				raw(sb(wire(nil).str(1, "s2").msg(5, wire(nil).str(1, "app").str(2, "v").str(1, uidLabel).str(2, "u2")))...).
				raw(sb(wire(nil).str(1, "s3").msg(5, wire(nil).str(1, uidLabel)))...).
				raw(sb(wire(nil).str(1, "s4").msg(5, wire(nil).str(2, "no key")))...).
				raw(sb(wire(nil).str(1, "s5").msg(5, wire(nil).str(1, uidLabel).str(2, "u5").str(1, "app")))...),
		},
		{
			name: "a known field with another wire type is skipped",
			sandboxes: sb(wire(nil).str(1, "s1").varint(1, 7).str(3, "not a state").varint(2, 1).varint(5, 1).msg(5, wire(nil).varint(1, 1).str(1, uidLabel).varint(2, 4).str(2, "u1"))).
				raw(wire(nil).varint(1, 3)...),
			containers: ct(wire(nil).str(1, "c1").fixed64(2, 1).str(6, "x").fixed32(8, 1).varint(6, 1)).raw(wire(nil).fixed32(1, 3)...),
		},
		{
			name:       "states out of the enum's range",
			sandboxes:  sb(wire(nil).str(1, "s1").varint(3, 77)).raw(sb(wire(nil).str(1, "s2").varint(3, 1<<40|5))...).raw(sb(wire(nil).str(1, "s3").varint(3, ^uint64(0)))...),
			containers: ct(wire(nil).str(1, "c1").varint(6, 1<<32+2)).raw(ct(wire(nil).str(1, "c2").varint(6, uint64(1<<63)))...),
		},
		{
			name:       "objects with no field at all",
			sandboxes:  sb(nil).raw(sb(nil)...),
			containers: ct(nil),
		},
		{
			name:       "UTF-8 beyond ASCII",
			sandboxes:  sb(wire(nil).str(1, "sandbox-é").msg(2, wire(nil).str(2, "uid-✓")).msg(5, label(uidLabel, "uid-日本"))),
			containers: ct(wire(nil).str(1, "c-ü").str(2, "sandbox-é").msg(8, label(uidLabel, "uid-日本"))),
		},
	}
	ctx := context.Background()
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			c, _ := serveRaw(t, tt.sandboxes, tt.containers)
			fullS, fullC, err := listFull(ctx, c)
			if err != nil {
				t.Fatalf("full listing: %v", err)
			}
			leanS, leanC, err := listLean(ctx, c)
			if err != nil {
				t.Fatalf("lean listing: %v", err)
			}
			if !slices.Equal(leanS, fullS) {
				t.Errorf("sandboxes:\nlean %+v\nfull %+v", leanS, fullS)
			}
			if !slices.Equal(leanC, fullC) {
				t.Errorf("containers:\nlean %+v\nfull %+v", leanC, fullC)
			}
		})
	}
}

// A malformed response fails the lean listing as it fails the full one:
// an error of class ErrUnknown, observed, and no panic.
func TestLeanListingMalformed(t *testing.T) {
	const both, sandboxes, containers = 0, 1, 2
	good := wire(nil).msg(1, wire(nil).str(1, "s1").msg(5, label(podspec.LabelPodUID, "u1")))
	tests := []struct {
		name string
		b    wire
		of   int // both: malformed for either listing; else for the one named
	}{
		{name: "truncated", b: good[:len(good)-1]},
		{name: "a length past the end", b: wire(nil).raw(0x0a, 0x7f, 'x')},
		{name: "a truncated varint", b: wire(nil).raw(0x18, 0x80)},
		{name: "a varint of eleven bytes", b: wire(nil).raw(0x18, 0xff, 0xff, 0xff, 0xff, 0xff, 0xff, 0xff, 0xff, 0xff, 0xff, 0x01)},
		{name: "field number 0", b: wire(nil).raw(0x02, 0x00)},
		{name: "a field number past the largest", b: protowire.AppendVarint(protowire.AppendTag(nil, protowire.MaxValidNumber+1, protowire.VarintType), 1)},
		{name: "wire type 6", b: wire(nil).raw(0x0e, 0x00)},
		{name: "an end group with no start", b: protowire.AppendTag(nil, 4, protowire.EndGroupType)},
		{name: "a group never ended", b: wire(nil).raw(protowire.AppendTag(nil, 4, protowire.StartGroupType)...).varint(1, 1)},
		{name: "a group ended by another number", b: wire(nil).raw(protowire.AppendTag(nil, 4, protowire.StartGroupType)...).raw(protowire.AppendTag(nil, 5, protowire.EndGroupType)...)},
		{name: "malformed inside an object", b: wire(nil).msg(1, wire(nil).raw(0x0a, 0x05, 'x'))},
		{name: "an ID that is not UTF-8", b: wire(nil).msg(1, wire(nil).bytes(1, []byte{0xff, 0xfe}))},
		{name: "malformed inside the metadata", b: wire(nil).msg(1, wire(nil).msg(2, wire(nil).raw(0x12, 0x09))), of: sandboxes},
		{name: "malformed inside a sandbox's label", b: wire(nil).msg(1, wire(nil).msg(5, wire(nil).raw(0x0a))), of: sandboxes},
		{name: "a sandbox's pod UID label that is not UTF-8", b: wire(nil).msg(1, wire(nil).msg(5, wire(nil).str(1, podspec.LabelPodUID).bytes(2, []byte{0xc3}))), of: sandboxes},
		{name: "a sandbox's metadata uid that is not UTF-8", b: wire(nil).msg(1, wire(nil).msg(2, wire(nil).bytes(2, []byte{0xc3}))), of: sandboxes},
		{name: "malformed inside a container's label", b: wire(nil).msg(1, wire(nil).msg(8, wire(nil).raw(0x12, 0x03, 'a'))), of: containers},
		{name: "a container's sandbox ID that is not UTF-8", b: wire(nil).msg(1, wire(nil).bytes(2, []byte{0xc3})), of: containers},
		{name: "a container's pod UID label that is not UTF-8", b: wire(nil).msg(1, wire(nil).msg(8, wire(nil).str(1, podspec.LabelPodUID).bytes(2, []byte{0xc3}))), of: containers},
	}
	ctx := context.Background()
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			c, rec := serveRaw(t, tt.b, tt.b)
			if tt.of != containers {
				if _, err := c.ListPodSandbox(ctx, nil); err == nil {
					t.Fatal("the full listing accepts it: not malformed")
				}
				err := c.ListPodSandboxLean(ctx, func(string, string, string, int32) {})
				if !errors.Is(err, errdefs.ErrUnknown) {
					t.Errorf("ListPodSandboxLean = %v, want an ErrUnknown", err)
				}
				if o := rec.last(); o.op != opListPodSandbox || o.err == nil {
					t.Errorf("observer saw %+v, want %s with its error", o, opListPodSandbox)
				}
			}
			if tt.of != sandboxes {
				if _, err := c.ListContainers(ctx, nil); err == nil {
					t.Fatal("the full container listing accepts it: not malformed")
				}
				err := c.ListContainersLean(ctx, func(string, string, string, int32) {})
				if !errors.Is(err, errdefs.ErrUnknown) {
					t.Errorf("ListContainersLean = %v, want an ErrUnknown", err)
				}
				if o := rec.last(); o.op != opListContainers || o.err == nil {
					t.Errorf("observer saw %+v, want %s with its error", o, opListContainers)
				}
			}
		})
	}
}

// The lean listing keeps the client's per-call behaviour: the per-call
// deadline and the error classes.
func TestLeanListingErrors(t *testing.T) {
	c, fs, rec := startFake(t, unixURL)
	ctx := context.Background()
	fs.rt.InjectError("ListPodSandbox", status.Error(codes.Unavailable, "runtime down"))
	if err := c.ListPodSandboxLean(ctx, func(string, string, string, int32) {}); !errors.Is(err, errdefs.ErrUnavailable) || status.Code(err) != codes.Unavailable {
		t.Errorf("ListPodSandboxLean = %v, want ErrUnavailable", err)
	}
	if o := rec.last(); o.op != opListPodSandbox || !errors.Is(o.err, errdefs.ErrUnavailable) {
		t.Errorf("observer saw %+v", o)
	}
	dctx, cancel := context.WithCancel(ctx)
	cancel()
	if err := c.ListContainersLean(dctx, func(string, string, string, int32) {}); !errors.Is(err, context.Canceled) {
		t.Errorf("ListContainersLean with a canceled ctx = %v, want context.Canceled", err)
	}
	if o := rec.last(); o.op != opListContainers {
		t.Errorf("observer saw %+v, want %s", o, opListContainers)
	}
}

// FuzzLeanDecode: the decoder never panics, and wherever proto.Unmarshal
// accepts the bytes it accepts them too and reads the same.
func FuzzLeanDecode(f *testing.F) {
	f.Add([]byte(marshal(f, &runtimeapi.ListPodSandboxResponse{Items: []*runtimeapi.PodSandbox{
		{Id: "s1", Metadata: &runtimeapi.PodSandboxMetadata{Name: "p", Uid: "u1"}, State: 1, Labels: map[string]string{podspec.LabelPodUID: "u1", "a": "b"}, Annotations: map[string]string{"x": "y"}},
		{Id: "s2", Metadata: &runtimeapi.PodSandboxMetadata{Uid: "u2"}},
	}})))
	f.Add([]byte(marshal(f, &runtimeapi.ListContainersResponse{Containers: []*runtimeapi.Container{
		{Id: "c1", PodSandboxId: "s1", State: 2, Labels: map[string]string{podspec.LabelPodUID: "u1"}, Image: &runtimeapi.ImageSpec{Image: "i"}},
		{Id: "c2", Labels: map[string]string{"a": "b"}},
	}})))
	f.Add([]byte(wire(nil).msg(1, wire(nil).str(1, "s").msg(2, wire(nil).str(2, "m")).msg(2, wire(nil).str(1, "n")).msg(5, label(podspec.LabelPodUID, "u")).varint(3, 1).group(9, wire(nil).varint(1, 1)))))
	f.Add([]byte(wire(nil).msg(1, wire(nil).str(1, "c").str(2, "s").varint(6, 1).msg(8, wire(nil).str(2, "u").str(1, podspec.LabelPodUID)))))
	f.Fuzz(func(t *testing.T, b []byte) {
		var sandboxes, containers []leanObject
		sErr := decodeSandboxes(b, func(id, podUID, metadataUID string, state int32) {
			sandboxes = append(sandboxes, leanObject{id: id, podUID: podUID, metadataUID: metadataUID, state: state})
		})
		cErr := decodeContainers(b, func(id, sandboxID, podUID string, state int32) {
			containers = append(containers, leanObject{id: id, sandboxID: sandboxID, podUID: podUID, state: state})
		})
		var sr runtimeapi.ListPodSandboxResponse
		if proto.Unmarshal(b, &sr) == nil {
			if sErr != nil {
				t.Fatalf("proto.Unmarshal accepts it, decodeSandboxes: %v", sErr)
			}
			var want []leanObject
			for _, s := range sr.Items {
				want = append(want, fullSandbox(s))
			}
			if !slices.Equal(sandboxes, want) {
				t.Fatalf("sandboxes:\nlean %+v\nfull %+v", sandboxes, want)
			}
		}
		var cr runtimeapi.ListContainersResponse
		if proto.Unmarshal(b, &cr) == nil {
			if cErr != nil {
				t.Fatalf("proto.Unmarshal accepts it, decodeContainers: %v", cErr)
			}
			var want []leanObject
			for _, c := range cr.Containers {
				want = append(want, fullContainer(c))
			}
			if !slices.Equal(containers, want) {
				t.Fatalf("containers:\nlean %+v\nfull %+v", containers, want)
			}
		}
	})
}
