package dra

import (
	"testing"
)

// oldCheckpoint was written by the ClaimsActor before the envelope moved
// to internal/checkpoint: a restarted agent must still read it, and the
// same claims must be written to the same bytes.
const oldCheckpoint = `{"version":1,"checksum":"sha256:09c0d4d4c4147c6b820f91d66e5e43eb21d5a3518830dd7f890b6ea488c1874b","data":{"claims":[{"uid":"uid-c","namespace":"ns","name":"c","pods":{"pod-a":true},"prepared":true,"drivers":{"gpu.example.com":{"devices":[{"pool":"node-a","device":"gpu-0","requests":["gpu"],"cdiDeviceIDs":["example.com/gpu=gpu-0"]}]}}}]}}`

func TestCheckpointWrittenBefore(t *testing.T) {
	claims, err := decodeCheckpoint([]byte(oldCheckpoint))
	if err != nil {
		t.Fatal(err)
	}
	c := claims["ns/c"]
	if len(claims) != 1 || c == nil || c.UID != "uid-c" || !c.Prepared || !c.Pods["pod-a"] {
		t.Fatalf("decoded %+v", claims)
	}
	d := c.Drivers["gpu.example.com"]
	if d == nil || len(d.Devices) != 1 || d.Devices[0].Device != "gpu-0" || len(d.Devices[0].CDI) != 1 || d.Devices[0].CDI[0] != "example.com/gpu=gpu-0" {
		t.Fatalf("decoded driver state %+v", d)
	}
	b, err := encodeCheckpoint(claims)
	if err != nil {
		t.Fatal(err)
	}
	if string(b) != oldCheckpoint {
		t.Fatalf("encoded again:\n%s\nwant\n%s", b, oldCheckpoint)
	}
}
