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
