package cri

import (
	"context"
	"fmt"
	"testing"

	"google.golang.org/grpc"
	"google.golang.org/grpc/mem"
	"google.golang.org/protobuf/proto"
	runtimeapi "k8s.io/cri-api/pkg/apis/runtime/v1"
)

// BenchmarkRelist is the PLEG's listing of a node with n pods at rest, a
// sandbox and a container each as the agent runs them, over a real socket
// to the sim runtime: every sandbox, then every container. full is
// ListPodSandbox and ListContainers; lean their lean listing, each object
// kept as the PLEG keeps it; transport the same calls with the reply
// bytes thrown away undecoded: the runtime's and gRPC's share, in the
// other two as well (the runtime serves from this process, so its
// allocations count in B/op and allocs/op too).
func BenchmarkRelist(b *testing.B) {
	ctx := context.Background()
	for _, n := range []int{1000, 10000} {
		c, r, _ := serveSimRuntime(b)
		populate(b, r, n, nil)
		b.Run(fmt.Sprintf("pods=%d/full", n), func(b *testing.B) {
			b.ReportAllocs()
			for range b.N {
				sbs, err := c.ListPodSandbox(ctx, nil)
				if err != nil {
					b.Fatal(err)
				}
				cs, err := c.ListContainers(ctx, nil)
				if err != nil {
					b.Fatal(err)
				}
				if len(sbs) != n || len(cs) != n {
					b.Fatalf("listed %d sandboxes and %d containers, want %d", len(sbs), len(cs), n)
				}
			}
		})
		b.Run(fmt.Sprintf("pods=%d/lean", n), func(b *testing.B) {
			type object struct {
				id, sandboxID, uid string
				state              int32
			}
			b.ReportAllocs()
			for range b.N {
				var sbs, cs []object
				err := c.ListPodSandboxLean(ctx, func(id, podUID, metadataUID string, state int32) {
					if podUID == "" {
						podUID = metadataUID
					}
					sbs = append(sbs, object{id: id, uid: podUID, state: state})
				})
				if err != nil {
					b.Fatal(err)
				}
				err = c.ListContainersLean(ctx, func(id, sandboxID, podUID string, state int32) {
					cs = append(cs, object{id: id, sandboxID: sandboxID, uid: podUID, state: state})
				})
				if err != nil {
					b.Fatal(err)
				}
				if len(sbs) != n || len(cs) != n {
					b.Fatalf("listed %d sandboxes and %d containers, want %d", len(sbs), len(cs), n)
				}
			}
		})
		b.Run(fmt.Sprintf("pods=%d/transport", n), func(b *testing.B) {
			b.ReportAllocs()
			for range b.N {
				for _, method := range []string{runtimeapi.RuntimeService_ListPodSandbox_FullMethodName, runtimeapi.RuntimeService_ListContainers_FullMethodName} {
					var reply discarded
					if err := c.conn().Invoke(ctx, method, &runtimeapi.ListPodSandboxRequest{}, &reply, discard); err != nil {
						b.Fatal(err)
					}
					if reply.n == 0 {
						b.Fatal("an empty reply")
					}
				}
			}
		})
	}
}

// discarded is a reply discardCodec reads nothing of but its length.
type discarded struct{ n int }

var discard = grpc.ForceCodecV2(discardCodec{})

type discardCodec struct{ leanCodec }

func (discardCodec) Unmarshal(data mem.BufferSlice, v any) error {
	v.(*discarded).n = data.Len()
	return nil
}

// BenchmarkDecodeRelist is the client's share of BenchmarkRelist alone:
// decoding the two responses of n pods as the sim runtime sends them,
// with proto.Unmarshal (full) and with the lean decoder (lean).
func BenchmarkDecodeRelist(b *testing.B) {
	ctx := context.Background()
	for _, n := range []int{1000, 10000} {
		c, r, _ := serveSimRuntime(b)
		populate(b, r, n, nil)
		sbs, err := c.ListPodSandbox(ctx, nil)
		if err != nil {
			b.Fatal(err)
		}
		cs, err := c.ListContainers(ctx, nil)
		if err != nil {
			b.Fatal(err)
		}
		sbBytes := marshal(b, &runtimeapi.ListPodSandboxResponse{Items: sbs})
		cBytes := marshal(b, &runtimeapi.ListContainersResponse{Containers: cs})
		b.Run(fmt.Sprintf("pods=%d/full", n), func(b *testing.B) {
			b.SetBytes(int64(len(sbBytes) + len(cBytes)))
			b.ReportAllocs()
			for range b.N {
				var sr runtimeapi.ListPodSandboxResponse
				var cr runtimeapi.ListContainersResponse
				if err := proto.Unmarshal(sbBytes, &sr); err != nil {
					b.Fatal(err)
				}
				if err := proto.Unmarshal(cBytes, &cr); err != nil {
					b.Fatal(err)
				}
			}
		})
		b.Run(fmt.Sprintf("pods=%d/lean", n), func(b *testing.B) {
			b.SetBytes(int64(len(sbBytes) + len(cBytes)))
			b.ReportAllocs()
			for range b.N {
				k := 0
				if err := decodeSandboxes(sbBytes, func(string, string, string, int32) { k++ }); err != nil {
					b.Fatal(err)
				}
				if err := decodeContainers(cBytes, func(string, string, string, int32) { k++ }); err != nil {
					b.Fatal(err)
				}
				if k != 2*n {
					b.Fatalf("decoded %d objects, want %d", k, 2*n)
				}
			}
		})
	}
}
