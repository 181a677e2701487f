package main

import (
	"context"
	"sync/atomic"

	v1 "k8s.io/api/core/v1"

	"github.com/actorlet/actorlet/messages"
)

// liveNode is the node's own Node object as the API server has it (cluster
// mode), read by an informer (kube.Client.WatchNode, upstream's node
// lister): the NodeActor admits pods against its labels, taints and
// allocatable, so that `kubectl label node` is honoured for the next pod.
type liveNode struct {
	latest atomic.Pointer[messages.NodeObject]
}

// get is the latest Node read (nil: none yet); node.Config.LiveNode.
func (l *liveNode) get() *messages.NodeObject { return l.latest.Load() }

// liveNodeFunc is node.Config.LiveNode: nil in standalone mode.
func (c *clusterParts) liveNodeFunc() func() *messages.NodeObject {
	if c == nil {
		return nil
	}
	return c.node.get
}

// startNodeWatch runs the informer on the node's Node until ctx is done
// and tells the NodeActor of every change of its labels, taints or
// allocatable (cluster mode; nothing in standalone mode).
func startNodeWatch(ctx context.Context, w *wiring, t *tree) {
	c := w.cluster
	if c == nil {
		return
	}
	sys, node := t.sys, t.pid("node")
	send := func(m *messages.NodeObject) {
		c.node.latest.Store(m)
		sys.Root.Send(node, m)
	}
	go c.client.WatchNode(ctx, func(n *v1.Node) {
		send(&messages.NodeObject{Labels: n.Labels, Taints: n.Spec.Taints, Allocatable: n.Status.Allocatable})
	}, func() {
		w.log.Warn("the Node object was deleted: pods are admitted against the configured labels until it is registered again")
		send(&messages.NodeObject{Deleted: true})
	})
}
