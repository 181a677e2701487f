package main

import (
	"github.com/asynkron/protoactor-go/actor"
	cmap "github.com/orcaman/concurrent-map"
)

// registryBuckets is how many buckets the process registry keeps (each of
// 32 locked shards). protoactor makes 1,024 buckets: 32,768 maps and locks,
// 2.5 MiB before the first actor, in every process and for good. 64
// buckets are 2,048 shards: at 10,000 actors that is five PIDs a shard and
// a lookup still takes one of 2,048 read locks, so nothing serializes on
// them at any core count this agent runs on.
const registryBuckets = 64

// shrinkProcessRegistry moves sys's process registry into registryBuckets
// buckets. It must run right after the system is made, before any actor
// is spawned: the processes the system registered itself (dead letters,
// the event stream) are carried over.
func shrinkProcessRegistry(sys *actor.ActorSystem) {
	old := sys.ProcessRegistry.LocalPIDs
	sm := &actor.SliceMap{LocalPIDs: make([]cmap.ConcurrentMap, registryBuckets)}
	for i := range sm.LocalPIDs {
		sm.LocalPIDs[i] = cmap.New()
	}
	for _, bucket := range old.LocalPIDs {
		if bucket.IsEmpty() { // Items would start a goroutine per shard
			continue
		}
		for id, p := range bucket.Items() {
			sm.GetBucket(id).Set(id, p)
		}
	}
	sys.ProcessRegistry.LocalPIDs = sm
}
