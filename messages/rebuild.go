package messages

import "k8s.io/apimachinery/pkg/types"

// ResyncPods answers a StatusActor's Resync: the pods whose status the
// NodeActor has had sent again (every pod with a PodActor that is not
// being killed, and every pod refused at admission). A restarted
// StatusActor serves reads only once it holds all of them (or was told
// to forget them): never a silently partial list. Ask echoes the Resync's.
type ResyncPods struct {
	Ask  uint64
	UIDs []types.UID
}

// StatusUnavailable answers GetPods or GetPod while the StatusActor is
// rebuilding its view after a restart and the request waited its bound:
// Missing of Expected pods have not been reported again yet. The node API
// answers 503 with Reason and a Retry-After.
type StatusUnavailable struct {
	Reason            string
	Missing, Expected int
}
