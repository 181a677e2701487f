package sim

// The node agent's PLEG relists the runtime every second: ListPodSandbox
// and ListContainers with no filter. Building and encoding those answers
// (every object's labels and annotations maps) cost the sim about as much
// CPU as the agent's decoding of them, and a third as much garbage, at any
// number of pods.
// At rest nothing changes between two relists, so the sim keeps each
// unfiltered answer encoded and sends the same bytes again until something
// that the list shows changes. Filtered lists, and the Go methods called
// in process, are built and encoded per call as before.

import (
	"context"
	"fmt"
	"sync/atomic"

	"google.golang.org/grpc"
	"google.golang.org/grpc/codes"
	"google.golang.org/grpc/encoding"
	grpcproto "google.golang.org/grpc/encoding/proto"
	"google.golang.org/grpc/mem"
	"google.golang.org/grpc/status"
	"google.golang.org/protobuf/proto"
	runtimeapi "k8s.io/cri-api/pkg/apis/runtime/v1"
)

// listCache is the encoded unfiltered answer of one list call.
//
// gen counts the changes to what the list shows; it is guarded by r.mu and
// bumped, under r.mu held exclusively, by invalidate: for sandboxes and
// containers in publish, which every change to one passes through (each is
// an event), for the images that container lists name in addImageLocked
// and RemoveImage. An encoding is served only while its gen is the current
// one.
//
// A list is encoded to be kept the second time it is asked for at one
// generation; the first answer after a change is a plain message that gRPC
// encodes as before (into a pooled buffer). So while pods start or go and
// every relist finds a change, the lists cost what they cost without the
// cache (an encoding kept at every list was 7.7 MB more garbage a relist
// at 10,000 containers), and at rest a list is built twice after a
// change, then sent as it is.
//
// Memory: one encoding per list (at 10,000 of the benchmarks' pods, 3.8 MB
// of sandboxes and 7.7 MB of containers: the size of the buffer each
// relist filled anyway), kept while it is current and dropped at the first
// change, so a runtime whose pods keep changing holds none for long. One
// at rest that is listed (the agent relists every second) keeps it, which
// is the point; one that is not listed twice between changes never makes
// one.
type listCache struct {
	gen   uint64
	asked atomic.Uint64 // gen+1 of the last answer built and not kept
	enc   atomic.Pointer[encodedList]
}

// encodedList is an answer encoded at generation gen. It is shared by every
// caller answered from it and never changes.
type encodedList struct {
	gen uint64
	buf mem.Buffer // a mem.SliceBuffer: freeing it is a no-op
}

// invalidate records a change to what the list shows; the caller holds
// r.mu exclusively.
func (lc *listCache) invalidate() {
	lc.gen++
	lc.enc.Store(nil)
}

// cachedList answers an unfiltered list from lc while it is current, and
// otherwise builds it (build runs under r.mu shared, as the list methods):
// the first time at this generation it answers the message, the second
// it encodes it outside the lock and keeps the encoding unless a newer
// one is kept already. Callers that miss at once each build: the lists
// are read-only and the next change makes any of them stale anyway.
func (r *Runtime) cachedList(lc *listCache, build func() proto.Message) (any, error) {
	r.mu.RLock()
	if e := lc.enc.Load(); e != nil && e.gen == lc.gen {
		if !r.checkLists {
			r.mu.RUnlock()
			return e, nil
		}
		fresh := build()
		r.mu.RUnlock()
		if err := checkEncoded(e, fresh); err != nil {
			return nil, err
		}
		return e, nil
	}
	gen := lc.gen
	resp := build()
	r.mu.RUnlock()
	if lc.asked.Swap(gen+1) != gen+1 {
		// An encoding older than gen, kept by a caller that missed
		// just before a change, is not kept longer.
		if old := lc.enc.Load(); old != nil && old.gen < gen {
			lc.enc.CompareAndSwap(old, nil)
		}
		return resp, nil
	}
	// What the answer holds (labels, annotations, metadata) is never
	// changed once kept, so it is encoded without the lock, as gRPC
	// encoded answers before.
	b, err := proto.Marshal(resp)
	if err != nil {
		return nil, status.Errorf(codes.Internal, "sim: encode list: %v", err)
	}
	e := &encodedList{gen: gen, buf: mem.SliceBuffer(b)}
	for {
		old := lc.enc.Load()
		if old != nil && old.gen >= gen || lc.enc.CompareAndSwap(old, e) {
			break
		}
	}
	return e, nil
}

// checkEncoded reports an encoding served from the cache that differs
// from the answer built from the state now: a change that did not
// invalidate the list. Only tests turn it on (Runtime.checkLists).
func checkEncoded(e *encodedList, fresh proto.Message) error {
	cached := fresh.ProtoReflect().New().Interface()
	if err := proto.Unmarshal(e.buf.ReadOnlyData(), cached); err != nil {
		return status.Errorf(codes.Internal, "sim: decode cached list: %v", err)
	}
	if !proto.Equal(cached, fresh) {
		return status.Errorf(codes.Internal, "sim: cached %T differs from the state: a change did not invalidate it", fresh)
	}
	return nil
}

// listPodSandboxRPC serves ListPodSandbox over gRPC: unfiltered from the
// cache, filtered as the Go method.
func (r *Runtime) listPodSandboxRPC(ctx context.Context, req *runtimeapi.ListPodSandboxRequest) (any, error) {
	if f := req.GetFilter(); f.GetId() != "" || f.GetState() != nil || len(f.GetLabelSelector()) > 0 {
		return r.ListPodSandbox(ctx, req)
	}
	return r.cachedList(&r.sandboxList, func() proto.Message { return r.listSandboxesLocked(nil) })
}

// listContainersRPC serves ListContainers over gRPC: unfiltered from the
// cache, filtered as the Go method.
func (r *Runtime) listContainersRPC(ctx context.Context, req *runtimeapi.ListContainersRequest) (any, error) {
	if f := req.GetFilter(); f.GetId() != "" || f.GetPodSandboxId() != "" || f.GetState() != nil || len(f.GetLabelSelector()) > 0 {
		return r.ListContainers(ctx, req)
	}
	return r.cachedList(&r.containerList, func() proto.Message { return r.listContainersLocked(nil) })
}

// runtimeService is the generated RuntimeService with the two list methods
// served by listPodSandboxRPC and listContainersRPC, whose answer may be an
// *encodedList for serverCodec to send as it is. Every other method, and
// the RuntimeServiceServer interface the runtime implements, is the
// generated one.
var runtimeService = func() *grpc.ServiceDesc {
	d := runtimeapi.RuntimeService_ServiceDesc
	d.Methods = append([]grpc.MethodDesc(nil), d.Methods...)
	found := 0
	for i := range d.Methods {
		switch d.Methods[i].MethodName {
		case "ListPodSandbox":
			d.Methods[i].Handler = unaryHandler(runtimeapi.RuntimeService_ListPodSandbox_FullMethodName, (*Runtime).listPodSandboxRPC)
			found++
		case "ListContainers":
			d.Methods[i].Handler = unaryHandler(runtimeapi.RuntimeService_ListContainers_FullMethodName, (*Runtime).listContainersRPC)
			found++
		}
	}
	if found != 2 {
		panic(fmt.Sprintf("sim: RuntimeService has %d of the list methods ListPodSandbox and ListContainers", found))
	}
	return &d
}()

// unaryHandler is a gRPC method handler like the generated ones (decode
// the request, run the interceptors, call the method), calling serve.
func unaryHandler[Req any, PReq interface {
	*Req
	proto.Message
}](fullMethod string, serve func(*Runtime, context.Context, PReq) (any, error)) grpc.MethodHandler {
	return func(srv any, ctx context.Context, dec func(any) error, interceptor grpc.UnaryServerInterceptor) (any, error) {
		in := PReq(new(Req))
		if err := dec(in); err != nil {
			return nil, err
		}
		r := srv.(*Runtime)
		if interceptor == nil {
			return serve(r, ctx, in)
		}
		info := &grpc.UnaryServerInfo{Server: srv, FullMethod: fullMethod}
		return interceptor(ctx, in, info, func(ctx context.Context, req any) (any, error) {
			return serve(r, ctx, req.(PReq))
		})
	}
}

// serverCodec is the standard protobuf codec, except that an *encodedList
// is sent as the bytes it holds.
type serverCodec struct{ encoding.CodecV2 }

func newServerCodec() serverCodec {
	return serverCodec{encoding.GetCodecV2(grpcproto.Name)}
}

func (c serverCodec) Marshal(v any) (mem.BufferSlice, error) {
	if e, ok := v.(*encodedList); ok {
		// A slice of its own per call: the transport only reads the
		// buffer and "frees" it, a no-op for a SliceBuffer.
		return mem.BufferSlice{e.buf}, nil
	}
	return c.CodecV2.Marshal(v)
}
