package actorkit

import "github.com/asynkron/protoactor-go/actor"

// ForgetStoppedChildren drops what the actor's set of children still holds
// of its stopped children. Call it on every *actor.Terminated of a child.
//
// protoactor keeps the children in a slice (ctx.Children() is that slice)
// and removes one by moving the last into its place and shortening the
// slice, without clearing the slot it gave up. That slot keeps the stopped
// child's PID, and a PID caches a pointer to its process: mailbox,
// context, and the actor with everything it held. So an actor that had N
// children keeps the last N it stopped alive for as long as it lives: a
// NodeActor whose 1,000 pods were deleted kept their 1,000 PodActors (pod
// copies, statuses, CRI answers). Clearing the slots past the length lets
// the collector take them; the slice keeps its capacity (protoactor's,
// reused by the next spawn).
func ForgetStoppedChildren(ctx actor.Context) {
	c := ctx.Children()
	clear(c[len(c):cap(c)])
}
