// Package messages holds the plain value types that actors exchange, one file
// per protocol. No logic, no adapters. Kubernetes objects inside a message are
// deep-copied by the sender; the receiver owns them. The exception is the
// desired pod on its way from a source through the NodeActor to a PodActor
// and on to the StatusActor, the VolumeActor and the DevicesActor
// (PodUpdate, SyncPod, PodStatusUpdate, EnsureVolumes, AllocateDevices):
// it is shared read only. No actor changes such a pod once it has sent or received it;
// one that needs a changed pod changes a copy (a shallow copy of the Pod
// struct with a new Status is enough: the metadata and spec it shares are
// never written). Every pod start then costs no deep copy of the pod per
// hop, and a receiver tells the same pod again by its pointer. PodList
// (the StatusActor's answer to a read of the node's pods) carries those
// same pods, read only.
package messages
