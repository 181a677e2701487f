package cri

import (
	"context"
	"errors"
	"fmt"
	"unicode/utf8"

	"google.golang.org/grpc"
	"google.golang.org/grpc/encoding"
	encproto "google.golang.org/grpc/encoding/proto"
	"google.golang.org/grpc/mem"
	"google.golang.org/protobuf/encoding/protowire"
	runtimeapi "k8s.io/cri-api/pkg/apis/runtime/v1"

	"github.com/actorlet/actorlet/podspec"
)

// The lean listing: ListPodSandbox and ListContainers of everything, for a
// caller that reads of each object only its ID, state and pod UID (the
// PLEG, every relist period). A full listing decodes every object's labels
// and annotations into maps, which at rest is most of the agent's relist
// CPU; the lean one reads the same response from the wire and keeps only
// those fields, skipping the others as a protobuf decoder skips unknown
// fields.
//
// Its answers agree with the full listing's wherever proto.Unmarshal
// accepts the response: the last occurrence of a field wins, a message
// field that occurs twice is merged, a field with an unexpected wire type
// is skipped, and so is a label whose key is not the pod UID's. Malformed
// framing (a truncated or overlong field, a bad tag, an unmatched group)
// is an error; the content of the fields it skips is not checked.

// ListPodSandboxLean lists every sandbox, as ListPodSandbox(ctx, nil), and
// calls fn with each one's ID, its pod UID label ("" when it has none),
// its metadata's UID and its state (a runtimeapi.PodSandboxState). fn is
// called while the response is decoded, before the call's outcome is
// known: when ListPodSandboxLean returns an error, what fn was given is not
// a listing and must be dropped.
func (c *Client) ListPodSandboxLean(ctx context.Context, fn func(id, podUID, metadataUID string, state int32)) error {
	ctx, done := c.call(ctx, opListPodSandbox, c.timeout)
	err := c.conn().Invoke(ctx, runtimeapi.RuntimeService_ListPodSandbox_FullMethodName,
		&runtimeapi.ListPodSandboxRequest{}, &leanSandboxes{fn: fn}, leanCall)
	if err = done(err); err != nil {
		return fmt.Errorf("list pod sandboxes: %w", err)
	}
	return nil
}

// ListContainersLean lists every container, as ListContainers(ctx, nil),
// and calls fn with each one's ID, its sandbox's ID, its pod UID label (""
// when it has none) and its state (a runtimeapi.ContainerState). fn is
// called as in ListPodSandboxLean: on an error, drop what it was given.
func (c *Client) ListContainersLean(ctx context.Context, fn func(id, sandboxID, podUID string, state int32)) error {
	ctx, done := c.call(ctx, opListContainers, c.timeout)
	err := c.conn().Invoke(ctx, runtimeapi.RuntimeService_ListContainers_FullMethodName,
		&runtimeapi.ListContainersRequest{}, &leanContainers{fn: fn}, leanCall)
	if err = done(err); err != nil {
		return fmt.Errorf("list containers: %w", err)
	}
	return nil
}

// leanSandboxes and leanContainers are the replies leanCodec decodes into:
// it calls fn per object instead of filling a message.
type leanSandboxes struct {
	fn func(id, podUID, metadataUID string, state int32)
}

type leanContainers struct {
	fn func(id, sandboxID, podUID string, state int32)
}

// leanCall makes a call marshal its request as usual and decode its reply
// with leanCodec. A CallOption holds no state: one serves every call.
var leanCall = grpc.ForceCodecV2(leanCodec{})

// protoCodec is gRPC's own codec, which leanCodec hands everything else.
var protoCodec = encoding.GetCodecV2(encproto.Name)

// leanCodec is gRPC's proto codec except for the lean replies. Its name is
// the proto codec's: the runtime is asked for application/grpc+proto, the
// encoding the other calls' application/grpc means (containerd 1.6 serves
// it: TestContainerd). An interceptor given a lean call's reply sees a
// leanSandboxes or leanContainers, not a proto message.
type leanCodec struct{}

func (leanCodec) Name() string { return encproto.Name }

func (leanCodec) Marshal(v any) (mem.BufferSlice, error) { return protoCodec.Marshal(v) }

func (leanCodec) Unmarshal(data mem.BufferSlice, v any) error {
	switch r := v.(type) {
	case *leanSandboxes:
		buf := data.MaterializeToBuffer(mem.DefaultBufferPool())
		defer buf.Free()
		return decodeSandboxes(buf.ReadOnlyData(), r.fn)
	case *leanContainers:
		buf := data.MaterializeToBuffer(mem.DefaultBufferPool())
		defer buf.Free()
		return decodeContainers(buf.ReadOnlyData(), r.fn)
	}
	return protoCodec.Unmarshal(data, v)
}

// Field numbers in k8s.io/cri-api's api.proto.
const (
	fieldSandboxItems   = 1 // ListPodSandboxResponse.items
	fieldSandboxID      = 1 // PodSandbox.id
	fieldSandboxMeta    = 2 // PodSandbox.metadata
	fieldSandboxState   = 3 // PodSandbox.state
	fieldSandboxLabels  = 5 // PodSandbox.labels
	fieldMetaUID        = 2 // PodSandboxMetadata.uid
	fieldContainers     = 1 // ListContainersResponse.containers
	fieldContainerID    = 1 // Container.id
	fieldContainerSB    = 2 // Container.pod_sandbox_id
	fieldContainerState = 6 // Container.state
	fieldContainerLabel = 8 // Container.labels
	fieldMapKey         = 1 // a map entry's key
	fieldMapValue       = 2 // a map entry's value
)

var (
	errFieldNumber = errors.New("cri lean decode: invalid field number")
	errUTF8        = errors.New("cri lean decode: string field contains invalid UTF-8")
)

// field is one field of a message on the wire: val is a length-delimited
// field's content, varint a varint field's value.
type field struct {
	num    protowire.Number
	typ    protowire.Type
	val    []byte
	varint uint64
}

// is reports whether f is field num with wire type typ; a known field with
// another wire type is skipped, as proto.Unmarshal keeps it as unknown.
func (f *field) is(num protowire.Number, typ protowire.Type) bool {
	return f.num == num && f.typ == typ
}

// readField reads the field at the start of b and returns it and its
// length on the wire.
func readField(b []byte) (field, int, error) {
	// The usual field of a listing: a one-byte tag, and a one-byte length
	// or varint.
	if len(b) >= 2 && b[0] < 0x80 && b[0] >= 1<<3 && b[1] < 0x80 {
		num, typ := protowire.Number(b[0]>>3), protowire.Type(b[0]&7)
		switch {
		case typ == protowire.BytesType && int(b[1]) <= len(b)-2:
			return field{num: num, typ: typ, val: b[2 : 2+int(b[1])]}, 2 + int(b[1]), nil
		case typ == protowire.VarintType:
			return field{num: num, typ: typ, varint: uint64(b[1])}, 2, nil
		}
	}
	return readFieldSlow(b)
}

func readFieldSlow(b []byte) (field, int, error) {
	num, typ, n := protowire.ConsumeTag(b)
	if n < 0 {
		return field{}, 0, fmt.Errorf("cri lean decode: %w", protowire.ParseError(n))
	}
	if num > protowire.MaxValidNumber {
		return field{}, 0, errFieldNumber
	}
	f := field{num: num, typ: typ}
	var m int
	switch typ {
	case protowire.BytesType:
		f.val, m = protowire.ConsumeBytes(b[n:])
	case protowire.VarintType:
		f.varint, m = protowire.ConsumeVarint(b[n:])
	default:
		m = protowire.ConsumeFieldValue(num, typ, b[n:])
	}
	if m < 0 {
		return field{}, 0, fmt.Errorf("cri lean decode: field %d: %w", num, protowire.ParseError(m))
	}
	return f, n + m, nil
}

// decoder holds one response's scratch buffer, in which an object's ID
// and pod UID are joined so that they cost one allocation. A caller that
// keeps both (the PLEG's records) keeps no more than it would of two.
type decoder struct {
	scratch []byte
}

// join copies a and b out of the response into strings that share one
// allocation.
func (d *decoder) join(a, b []byte) (string, string, error) {
	if !utf8.Valid(a) || !utf8.Valid(b) {
		return "", "", errUTF8
	}
	d.scratch = append(append(d.scratch[:0], a...), b...)
	s := string(d.scratch)
	return s[:len(a)], s[len(a):], nil
}

// str copies b out of the response.
func str(b []byte) (string, error) {
	if !utf8.Valid(b) {
		return "", errUTF8
	}
	return string(b), nil
}

// eachItem calls item with every length-delimited field num of the
// message b (a list response's repeated objects), and skips the rest.
func eachItem(b []byte, num protowire.Number, item func([]byte) error) error {
	for len(b) > 0 {
		f, n, err := readField(b)
		if err != nil {
			return err
		}
		b = b[n:]
		if f.is(num, protowire.BytesType) {
			if err := item(f.val); err != nil {
				return err
			}
		}
	}
	return nil
}

func decodeSandboxes(b []byte, fn func(id, podUID, metadataUID string, state int32)) error {
	var d decoder
	return eachItem(b, fieldSandboxItems, func(v []byte) error { return d.sandbox(v, fn) })
}

func (d *decoder) sandbox(b []byte, fn func(id, podUID, metadataUID string, state int32)) error {
	var id, label, meta []byte
	var state int32
	for len(b) > 0 {
		f, n, err := readField(b)
		if err != nil {
			return err
		}
		b = b[n:]
		switch {
		case f.is(fieldSandboxID, protowire.BytesType):
			id = f.val
		case f.is(fieldSandboxMeta, protowire.BytesType):
			// A message field seen twice is merged: a later one
			// without a uid keeps the earlier uid.
			uid, ok, err := metadataUID(f.val)
			if err != nil {
				return err
			}
			if ok {
				meta = uid
			}
		case f.is(fieldSandboxState, protowire.VarintType):
			state = int32(f.varint) // as proto decodes an enum
		case f.is(fieldSandboxLabels, protowire.BytesType):
			v, ok, err := podUIDLabel(f.val)
			if err != nil {
				return err
			}
			if ok {
				label = v
			}
		}
	}
	// The ID is joined with the UID a caller keeps: the label's, else
	// the metadata's. Usually both name the same UID: one string.
	if len(label) == 0 {
		sid, muid, err := d.join(id, meta)
		if err != nil {
			return err
		}
		fn(sid, "", muid, state)
		return nil
	}
	sid, uid, err := d.join(id, label)
	if err != nil {
		return err
	}
	muid := uid
	if string(meta) != string(label) {
		if muid, err = str(meta); err != nil {
			return err
		}
	}
	fn(sid, uid, muid, state)
	return nil
}

func decodeContainers(b []byte, fn func(id, sandboxID, podUID string, state int32)) error {
	var d decoder
	return eachItem(b, fieldContainers, func(v []byte) error { return d.container(v, fn) })
}

func (d *decoder) container(b []byte, fn func(id, sandboxID, podUID string, state int32)) error {
	var id, sb, label []byte
	var state int32
	for len(b) > 0 {
		f, n, err := readField(b)
		if err != nil {
			return err
		}
		b = b[n:]
		switch {
		case f.is(fieldContainerID, protowire.BytesType):
			id = f.val
		case f.is(fieldContainerSB, protowire.BytesType):
			sb = f.val
		case f.is(fieldContainerState, protowire.VarintType):
			state = int32(f.varint)
		case f.is(fieldContainerLabel, protowire.BytesType):
			v, ok, err := podUIDLabel(f.val)
			if err != nil {
				return err
			}
			if ok {
				label = v
			}
		}
	}
	// The sandbox ID apart: a caller keeps it less often than the rest.
	cid, uid, err := d.join(id, label)
	if err != nil {
		return err
	}
	sid, err := str(sb)
	if err != nil {
		return err
	}
	fn(cid, sid, uid, state)
	return nil
}

// metadataUID reads PodSandboxMetadata.uid; ok is false when the message
// has none.
func metadataUID(b []byte) (uid []byte, ok bool, err error) {
	for len(b) > 0 {
		f, n, err := readField(b)
		if err != nil {
			return nil, false, err
		}
		b = b[n:]
		if f.is(fieldMetaUID, protowire.BytesType) {
			uid, ok = f.val, true
		}
	}
	return uid, ok, nil
}

// podUIDLabel reads one entry of a labels map: ok is true, with the value,
// when its key is the pod UID label's (a missing key or value is "").
func podUIDLabel(b []byte) (value []byte, ok bool, err error) {
	var key []byte
	for len(b) > 0 {
		f, n, err := readField(b)
		if err != nil {
			return nil, false, err
		}
		b = b[n:]
		switch {
		case f.is(fieldMapKey, protowire.BytesType):
			key = f.val
		case f.is(fieldMapValue, protowire.BytesType):
			value = f.val
		}
	}
	if string(key) != podspec.LabelPodUID {
		return nil, false, nil
	}
	return value, true, nil
}
