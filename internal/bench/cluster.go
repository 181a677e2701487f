package bench

import (
	"context"
	"fmt"
	"os/exec"
	"strings"
)

// runClusterSim is N pods created through a real API server with nodeName
// set, until all are Ready as seen by a watch.
//
// It needs cluster mode (--kubeconfig). Adding it is small: a podTarget
// that creates and deletes pods with client-go (nodeName = the agent's
// --hostname-override), a watch that feeds observer.apply with the node's
// pods (goal GoalReady), the agent started with --kubeconfig (the local
// control plane of deploy/controlplane), and API request counts by verb and
// resource from the apiserver's apiserver_request_total before and after.
func runClusterSim(ctx context.Context, o Options, r *Result) error {
	r.Goal = GoalReady
	if !agentHasFlag(ctx, o.Binary, "--kubeconfig") {
		return fmt.Errorf("%w: cluster-sim needs cluster mode (--kubeconfig), which this actorlet (%s) does not have", ErrNotYet, o.Binary)
	}
	if o.Kubeconfig == "" {
		return fmt.Errorf("cluster-sim: --kubeconfig (of the control plane to create the pods in) is required")
	}
	return fmt.Errorf("%w: the cluster-sim driver (client-go pod target and watch)", ErrNotYet)
}

// agentHasFlag tells whether `binary --help` lists flag.
func agentHasFlag(ctx context.Context, binary, flag string) bool {
	if binary == "" {
		return false
	}
	out, _ := exec.CommandContext(ctx, binary, "--help").CombinedOutput()
	return strings.Contains(string(out), flag+" ") || strings.Contains(string(out), flag+"=")
}
