package devices

import (
	"bytes"
	"encoding/json"
	"errors"
	"reflect"
	"sync"
	"testing"

	"k8s.io/apimachinery/pkg/types"
	pluginapi "k8s.io/kubelet/pkg/apis/deviceplugin/v1beta1"
)

// fakeStore is an in-memory Store.
type fakeStore struct {
	mu      sync.Mutex
	data    []byte
	saves   int
	loadErr error
	saveErr error
}

var _ Store = (*fakeStore)(nil)

func (s *fakeStore) Load() ([]byte, error) {
	s.mu.Lock()
	defer s.mu.Unlock()
	return bytes.Clone(s.data), s.loadErr
}

func (s *fakeStore) Save(b []byte) error {
	s.mu.Lock()
	defer s.mu.Unlock()
	if s.saveErr != nil {
		return s.saveErr
	}
	s.saves++
	s.data = bytes.Clone(b)
	return nil
}

func (s *fakeStore) set(b []byte) {
	s.mu.Lock()
	defer s.mu.Unlock()
	s.data = bytes.Clone(b)
}

func (s *fakeStore) get() []byte {
	s.mu.Lock()
	defer s.mu.Unlock()
	return bytes.Clone(s.data)
}

func samplePods() map[types.UID]*podRecord {
	resp := &pluginapi.ContainerAllocateResponse{
		Envs:        map[string]string{"NVIDIA_VISIBLE_DEVICES": "GPU-a"},
		Devices:     []*pluginapi.DeviceSpec{{ContainerPath: "/dev/nvidia0", HostPath: "/dev/nvidia0", Permissions: "rw"}},
		Mounts:      []*pluginapi.Mount{{ContainerPath: "/usr/lib/x", HostPath: "/usr/lib/x", ReadOnly: true}},
		Annotations: map[string]string{"a": "b"},
		CdiDevices:  []*pluginapi.CDIDevice{{Name: "nvidia.com/gpu=0"}},
	}
	return map[types.UID]*podRecord{
		"uid-b": {UID: "uid-b", Namespace: "ns", Name: "b", sweep: -1, Containers: []*containerRecord{
			{Name: "main", Resources: []*resourceRecord{newResourceRecord("nvidia.com/gpu", []string{"GPU-a"}, resp)}}}},
		"uid-a": {UID: "uid-a", Namespace: "ns", Name: "a", sweep: -1, Containers: []*containerRecord{
			{Name: "c", Resources: []*resourceRecord{newResourceRecord("example.com/foo", []string{"f1", "f2"}, nil)}}}},
	}
}

func TestCheckpointRoundTrip(t *testing.T) {
	pods := samplePods()
	b, err := encodeCheckpoint(pods)
	if err != nil {
		t.Fatal(err)
	}
	got, err := decodeCheckpoint(b)
	if err != nil {
		t.Fatal(err)
	}
	if !reflect.DeepEqual(got, pods) {
		t.Fatalf("decoded %s, want what was encoded", b)
	}
	reply := got["uid-b"].reply()
	c := reply.Containers["main"]
	if c.Envs["NVIDIA_VISIBLE_DEVICES"] != "GPU-a" || len(c.Devices) != 1 || c.Devices[0].HostPath != "/dev/nvidia0" ||
		len(c.Mounts) != 1 || !c.Mounts[0].ReadOnly || c.Annotations["a"] != "b" ||
		len(c.CDIDevices) != 1 || c.CDIDevices[0] != "nvidia.com/gpu=0" || c.IDs["nvidia.com/gpu"][0] != "GPU-a" {
		t.Fatalf("reply from the checkpoint %+v lost part of the allocation", c)
	}
	// The same state gives the same bytes (pods sorted).
	again, _ := encodeCheckpoint(got)
	if !bytes.Equal(again, b) {
		t.Fatalf("encoding is not stable:\n%s\n%s", b, again)
	}
	// Pretty-printing does not break the checksum.
	var pretty bytes.Buffer
	if err := json.Indent(&pretty, b, "", "  "); err != nil {
		t.Fatal(err)
	}
	if _, err := decodeCheckpoint(pretty.Bytes()); err != nil {
		t.Fatalf("an indented checkpoint: %v", err)
	}
}

func TestCheckpointCorrupt(t *testing.T) {
	good, err := encodeCheckpoint(samplePods())
	if err != nil {
		t.Fatal(err)
	}
	edit := func(f func(m map[string]any)) []byte {
		var m map[string]any
		if err := json.Unmarshal(good, &m); err != nil {
			t.Fatal(err)
		}
		f(m)
		b, _ := json.Marshal(m)
		return b
	}
	for _, tc := range []struct {
		name string
		b    []byte
	}{
		{name: "not JSON", b: []byte("{\"version\":1,\"chec")},
		{name: "another version", b: edit(func(m map[string]any) { m["version"] = 2 })},
		{name: "a changed device ID", b: bytes.Replace(good, []byte(`"f2"`), []byte(`"f3"`), 1)},
		{name: "a wrong checksum", b: edit(func(m map[string]any) { m["checksum"] = "sha256:00" })},
		{name: "no data", b: []byte(`{"version":1,"checksum":"x"}`)},
	} {
		t.Run(tc.name, func(t *testing.T) {
			if _, err := decodeCheckpoint(tc.b); !errors.Is(err, errCorrupt) {
				t.Fatalf("decode = %v, want a corrupt checkpoint", err)
			}
		})
	}
	t.Run("a record without its devices", func(t *testing.T) {
		pods := samplePods()
		pods["uid-a"].Containers[0].Resources[0].IDs = nil
		b, _ := encodeCheckpoint(pods)
		if _, err := decodeCheckpoint(b); !errors.Is(err, errCorrupt) {
			t.Fatalf("decode = %v, want a corrupt checkpoint", err)
		}
	})
	t.Run("none at all is empty", func(t *testing.T) {
		got, err := decodeCheckpoint(nil)
		if err != nil || len(got) != 0 {
			t.Fatalf("decode(nil) = %v, %v", got, err)
		}
	})
}

func TestSaverNeverWritesAnOlderState(t *testing.T) {
	st := &fakeStore{}
	s := &saver{store: st}
	first, second := s.next(), s.next()
	if err := s.save(second, []byte("new")); err != nil {
		t.Fatal(err)
	}
	if err := s.save(first, []byte("old")); err != nil { // a slow save of an earlier state
		t.Fatal(err)
	}
	if got := string(st.get()); got != "new" {
		t.Fatalf("stored %q, want the newer state", got)
	}
	st.saveErr = errors.New("disk full")
	if err := s.save(s.next(), []byte("newest")); err == nil {
		t.Fatal("a failed save reported no error")
	}
}

// oldCheckpoint was written by the DevicesActor (samplePods) before the
// envelope moved to internal/checkpoint: a restarted agent must still
// read it, and the same pods must be written to the same bytes.
const oldCheckpoint = `{"version":1,"checksum":"sha256:31d997d33e3ea6126510127e65553e2cbc48274ffcf01ab2f82a596190c6b32f","data":{"pods":[{"uid":"uid-a","namespace":"ns","name":"a","containers":[{"name":"c","resources":[{"resource":"example.com/foo","deviceIDs":["f1","f2"]}]}]},{"uid":"uid-b","namespace":"ns","name":"b","containers":[{"name":"main","resources":[{"resource":"nvidia.com/gpu","deviceIDs":["GPU-a"],"envs":{"NVIDIA_VISIBLE_DEVICES":"GPU-a"},"devices":[{"containerPath":"/dev/nvidia0","hostPath":"/dev/nvidia0","permissions":"rw"}],"mounts":[{"containerPath":"/usr/lib/x","hostPath":"/usr/lib/x","readOnly":true}],"annotations":{"a":"b"},"cdiDevices":["nvidia.com/gpu=0"]}]}]}]}}`

func TestCheckpointWrittenBefore(t *testing.T) {
	pods, err := decodeCheckpoint([]byte(oldCheckpoint))
	if err != nil {
		t.Fatal(err)
	}
	if len(pods) != 2 || pods["uid-b"] == nil || pods["uid-b"].reply().Containers["main"].Envs["NVIDIA_VISIBLE_DEVICES"] != "GPU-a" {
		t.Fatalf("decoded %+v", pods)
	}
	b, err := encodeCheckpoint(samplePods())
	if err != nil {
		t.Fatal(err)
	}
	if string(b) != oldCheckpoint {
		t.Fatalf("encoded:\n%s\nwant\n%s", b, oldCheckpoint)
	}
}

// oldClaimsCheckpoint was written by the GPU DRA driver before the
// envelope moved to internal/checkpoint.
const oldClaimsCheckpoint = `{"version":1,"checksum":"sha256:a2881bcd0e60604f7b39bb86ffb26be8a1aa2da332fa969b9f09361d0a6089bb","data":{"claims":[{"uid":"uid-c","namespace":"ns","name":"gpu","devices":[{"requests":["gpu"],"pool":"node-a","device":"gpu-0","id":"GPU-a","cdiDevices":["nvidia.com/gpu=GPU-a"]}]}]}}`

func TestClaimsCheckpointWrittenBefore(t *testing.T) {
	claims := map[types.UID]*claimRecord{}
	if err := decodeClaims([]byte(oldClaimsCheckpoint), claims); err != nil {
		t.Fatal(err)
	}
	c := claims["uid-c"]
	if len(claims) != 1 || c == nil || c.Name != "gpu" || len(c.Devices) != 1 || c.Devices[0].ID != "GPU-a" || len(c.Devices[0].CDIDevices) != 1 {
		t.Fatalf("decoded %+v", claims)
	}
	b, err := encodeClaims(claims)
	if err != nil {
		t.Fatal(err)
	}
	if string(b) != oldClaimsCheckpoint {
		t.Fatalf("encoded again:\n%s\nwant\n%s", b, oldClaimsCheckpoint)
	}
}
