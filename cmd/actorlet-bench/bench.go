package main

import (
	"context"
	"errors"
	"fmt"
	"log/slog"
	"os"
	"path/filepath"
	"strings"

	"github.com/spf13/pflag"

	"github.com/actorlet/actorlet/internal/bench"
)

// runBench drives a real actorlet process from the outside and measures it
// (internal/bench): it prints a summary on stderr and the result as JSON
// to --out (stdout by default). Exit 0 when every pod reached its goal and
// no invariant broke, 1 otherwise (the JSON is still written), 2 on bad
// flags, 3 for a scenario this actorlet cannot run yet.
func runBench(ctx context.Context, args []string) int {
	var o bench.Options
	var out string
	var quiet bool
	fs := pflag.NewFlagSet("actorlet-bench", pflag.ContinueOnError)
	fs.StringVar(&o.Scenario, "scenario", "", "scenario: "+strings.Join(bench.Scenarios, ", "))
	fs.IntVar(&o.Pods, "pods", 0, "pods to start (churn, chaos, soak: parallel callers, each keeping one pod alive); default 1000, 50 on containerd, 100 for churn, chaos and probes, 50 for soak")
	fs.DurationVar(&o.Duration, "duration", 0, "load duration for churn, chaos, probes and soak (default 30s; soak 1h)")
	fs.StringVar(&out, "out", "-", "write the JSON result to this file (- for stdout)")
	fs.IntVar(&o.Concurrency, "concurrency", 0, "parallel callers creating pods (default 50)")
	fs.StringVar(&o.Source, "source", "", "how pods reach the agent: push (POST /pods, default) or file (a manifest directory)")
	fs.StringVar(&o.Binary, "actorlet", "", "actorlet binary to start (default: the actorlet next to this actorlet-bench, else actorlet on PATH)")
	fs.StringVar(&o.Endpoint, "endpoint", "", "measure an actorlet already running at this URL (its --port, https://HOST:10250; anonymous requests must be allowed) instead of starting one")
	fs.IntVar(&o.AgentPID, "agent-pid", 0, "with --endpoint: the agent's PID, for RSS and CPU")
	fs.StringVar(&o.RuntimeEndpoint, "runtime-endpoint", "", "CRI endpoint: containerd's for the containerd scenario (default: deploy/local/containerd.sh up), or the external agent's")
	fs.StringVar(&o.Image, "image", "", "pod image (default localhost/actorlet/busybox:1)")
	fs.StringVar(&o.Sim, "sim", "", "sim runtime options for sim scenarios, as in sim://?QUERY (e.g. start-latency=50ms)")
	fs.Float64Var(&o.ChaosKillRate, "chaos-kill-rate", 0, "chaos, soak: actor crashes per second (default 20; soak 5)")
	fs.Float64Var(&o.ChurnRate, "churn-rate", 0, "churn, chaos, soak: pods replaced per second, each caller holding its pod until its turn (default 0: as fast as the callers go; soak 5)")
	fs.DurationVar(&o.SampleEvery, "sample-interval", 0, "soak: how often to sample the agent's RSS, goroutines, open files, disk entries, pods and actors (default 10s)")
	fs.Int64Var(&o.ChaosSeed, "chaos-seed", 0, "chaos: seed (default 42)")
	fs.DurationVar(&o.Timeout, "timeout", 0, "how long to wait for the pods to reach their goal (default 10m)")
	fs.StringVar(&o.RootDir, "root-dir", "", "the agent's --root-dir (default a temporary directory); --against upstream: the directory under which each agent gets its own")
	fs.BoolVar(&o.KeepDir, "keep", false, "keep the temporary root dir (agent log, sim socket)")
	fs.StringSliceVar(&o.AgentArgs, "agent-arg", nil, "extra flag for the agent (repeatable), e.g. --agent-arg=--pleg-relist-period=2s")
	fs.StringVar(&o.Kubeconfig, "kubeconfig", "", "cluster-sim: admin kubeconfig of the control plane (default: deploy/local/controlplane.sh up)")
	fs.StringVar(&o.Kubeconfig, "admin-kubeconfig", "", "cluster-sim: same as --kubeconfig")
	fs.StringVar(&o.NodeKubeconfig, "node-kubeconfig", "", "cluster-sim: the agent's kubeconfig, system:node:<node> (default: deploy/local/controlplane.sh node-kubeconfig)")
	fs.StringVar(&o.Node, "node-name", "", "cluster-sim: the agent's node name (default bench-node)")
	fs.DurationVar(&o.ProfileCPU, "cpu-profile-seconds", 0, "take a CPU profile of the agent for this long while pods start (needs /debug/pprof)")
	fs.DurationVar(&o.ProfileAfterReady, "cpu-profile-after-ready", 0, "--against upstream: a CPU profile of each agent for this long from its last pod Ready, at most 30 s (the pods are deleted then), into --cpu-profile's FILE-<agent>-after-ready: the events draining, the node at rest")
	fs.StringVar(&o.ProfileOut, "cpu-profile", "", "file for the CPU profile")
	fs.BoolVar(&o.ProfileAPIServer, "api-server-profile", false, "--against upstream: also profile kube-apiserver's CPU (its /debug/pprof, with the admin kubeconfig) from each agent's first pod create to its last pod Ready, in 2 s profiles into --cpu-profile's FILE-apiserver-<agent>-NNN (go tool pprof FILE-apiserver-<agent>-*: all of them as one): what the API server does for each agent's pods")
	fs.StringVar(&o.HeapOut, "heap-profile", "", "write the agent's heap profile at the end of the run to this file (needs /debug/pprof); with --against upstream, actorlet's: FILE-actorlet when every pod is Ready, FILE-actorlet-idle before the pods, FILE-actorlet-after-delete after them")
	fs.StringVar(&o.MutexOut, "mutex-profile", "", "write the agent's mutex profile (lock contention since it started) at the end of the run to this file (needs /debug/pprof; the agent the bench starts gets --contention-profiling, one given by --endpoint needs it)")
	fs.StringVar(&o.BlockOut, "block-profile", "", "write the agent's block profile (waits on locks and channels since it started) at the end of the run to this file (needs /debug/pprof; the agent the bench starts gets --contention-profiling, one given by --endpoint needs it)")
	fs.BoolVar(&o.AfterDelete, "after-delete", false, "standalone-sim: once every pod runs, hold them 30 s, delete them all and report the agent's memory idle, at the last pod running, 30 s later (steady) and 30 s after it runs none (JSON memory); with --heap-profile FILE the profiles, after a GC, are FILE (steady) and FILE-after-delete")
	fs.IntVar(&o.GOMAXPROCS, "gomaxprocs", 0, "GOMAXPROCS of the agent (its environment) and of the bench itself, for a scaling curve (default: each one's own, the machine's CPUs unless GOMAXPROCS is set)")
	fs.StringVar(&o.Against, "against", "", "upstream: the same load (cluster mode, pods through the local control plane) on actorlet and then on the upstream kubelet, each on its own fake CRI runtime, with a kill -9 recovery; both figures and their ratios (scenario against-upstream; default 100 pods)")
	fs.StringVar(&o.Kubelet, "kubelet", "", "--against upstream: the upstream kubelet binary (default: deploy/local/kubelet.sh build)")
	fs.IntVar(&o.RecoveryPods, "recovery-pods", 0, "--against upstream: pods running when each agent is killed with SIGKILL (default 200)")
	fs.IntVar(&o.Rounds, "rounds", 0, "--against upstream: rounds, each agent once per round, the order alternating (actorlet first, then upstream first, ...); the figures are each one's median (default 1)")
	fs.StringVar(&o.NodeIP, "node-ip", "", "--against upstream: both agents' --node-ip, not loopback (default: the host's first non-loopback IPv4 address)")
	fs.IntVar(&o.APIQPS, "kube-api-qps", 0, "--against upstream: both agents' API client QPS (default 50, upstream's kubeAPIQPS)")
	fs.IntVar(&o.APIBurst, "kube-api-burst", 0, "--against upstream: both agents' API client burst (default 100, or twice --kube-api-qps if more)")
	fs.BoolVar(&o.NoToken, "no-token", false, "cluster-sim, --against upstream: pods with automountServiceAccountToken: false (no projected token, no TokenRequest per pod)")
	fs.StringVar(&o.Only, "only", "", "--against upstream: run only this agent (actorlet or upstream), no ratios")
	fs.BoolVar(&o.NoRecovery, "no-recovery", false, "--against upstream: skip the kill -9 recovery")
	fs.StringVar(&o.ResizeAgent, "resize-agent", "", "resize: the agent, actorlet (default) or upstream (the upstream kubelet, --kubelet, on the sim served apart by actorlet simruntime)")
	fs.StringVar(&o.ResizeRuntime, "resize-runtime", "", "resize: the runtime, sim (default) or containerd (--runtime-endpoint, default deploy/local/containerd.sh up)")
	fs.IntVar(&o.ResizeRounds, "resize-rounds", 0, "resize: resizes per pod, one after the other (default 2)")
	fs.DurationVar(&o.ResizeTimeout, "resize-timeout", 0, "resize: how long one resize may take from its patch before it counts as failed (default 1m)")
	var markdown string
	fs.StringVar(&markdown, "markdown", "", "--against upstream: also write the comparison table between <!-- against-upstream-N --> and <!-- /against-upstream-N --> in this file (docs/BENCHMARKS.md), N the pod count")
	fs.BoolVar(&quiet, "quiet", false, "no progress on stderr")
	if done, code := parseFlags(fs, args); done {
		return code
	}
	level := slog.LevelInfo
	if quiet {
		level = slog.LevelError
	}
	o.Log = slog.New(slog.NewTextHandler(os.Stderr, &slog.HandlerOptions{Level: level}))
	if (o.ProfileCPU > 0 || o.ProfileAfterReady > 0 || o.ProfileAPIServer) && o.ProfileOut == "" {
		o.ProfileOut = "actorlet-cpu.pprof"
	}
	// The flags that only the against-upstream scenario reads.
	for flag, set := range map[string]bool{
		"--api-server-profile":      o.ProfileAPIServer,
		"--cpu-profile-after-ready": o.ProfileAfterReady > 0,
	} {
		if set && o.Against == "" {
			fmt.Fprintf(os.Stderr, "actorlet-bench: %s needs --against upstream\n", flag)
			return exitUsage
		}
	}

	res, err := bench.Run(ctx, o)
	if res == nil {
		fmt.Fprintf(os.Stderr, "actorlet-bench: %v\n", err)
		return exitUsage
	}
	if werr := res.WriteJSON(out); werr != nil {
		fmt.Fprintf(os.Stderr, "actorlet-bench: %v\n", werr)
		return exitError
	}
	if !quiet {
		fmt.Fprintln(os.Stderr, res.Summary())
	}
	if markdown != "" && res.Against != nil {
		link := ""
		if out != "-" && out != "" {
			if rel, rerr := filepath.Rel(filepath.Dir(markdown), out); rerr == nil {
				link = rel
			}
		}
		tag := res.Against.MarkdownTag(res.Pods)
		if werr := bench.WriteMarkdown(markdown, tag, res.Against.Markdown(res, link)); werr != nil {
			fmt.Fprintf(os.Stderr, "actorlet-bench: %v\n", werr)
			return exitError
		}
	}
	switch {
	case errors.Is(err, bench.ErrNotYet):
		fmt.Fprintf(os.Stderr, "actorlet-bench: %v\n", err)
		return exitNotYet
	case err != nil:
		fmt.Fprintf(os.Stderr, "actorlet-bench: %v\n", err)
		return exitError
	}
	return exitOK
}

// exitNotYet: the scenario needs what this actorlet does not have yet.
const exitNotYet = 3
