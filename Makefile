# actorlet: thin targets; the work is in scripts and Go tests.
GO        ?= go
# go-nvml is cgo and its header marks many functions deprecated: quiet.
export CGO_CFLAGS ?= -O2 -g -Wno-deprecated-declarations
BIN       := bin/actorlet
BENCH     := bin/actorlet-bench
RUN_DIR   ?= $(or $(TMPDIR),/tmp)/actorlet-run
GOTEST    ?= $(GO) test -race
PKGS      := ./...

.PHONY: all build bench run test unit lint vet fmt integration clean containerd-up containerd-down controlplane-up controlplane-down metrics-server-up metrics-server-down

all: build

# The agent is linked without its symbol table and DWARF (-s -w), as
# Kubernetes' release builds are: 59 MB instead of 83. Profiles and panics
# still name every function (they read the pclntab, which stays); DBG=1
# keeps the debug information for a debugger.
LDFLAGS_STRIP := $(if $(filter 1,$(DBG)),,-s -w)
build:
	$(GO) build -ldflags "$(LDFLAGS_STRIP)" -o $(BIN) ./cmd/actorlet

# The benchmark harness (cmd/actorlet-bench), beside the agent it starts by
# default: bin/actorlet-bench runs bin/actorlet unless --actorlet names another.
bench: build
	$(GO) build -o $(BENCH) ./cmd/actorlet-bench

# Standalone, embedded simulated runtime, the example pods.
run: build
	@mkdir -p $(RUN_DIR)
	@echo "actorlet: standalone on the simulated runtime with the pods in deploy/examples/"
	@echo "  look at them:   curl -s localhost:10255/pods | jq -r '.items[] | [.metadata.name, .status.phase] | @tsv'"
	@echo "  push a pod:     curl -sk -XPOST --data-binary @deploy/push/hello.yaml https://localhost:10250/pods"
	@echo "  its logs:       curl -sk https://localhost:10250/containerLogs/default/hello-actorlet-demo/hello"
	@echo "  remove it:      curl -sk -XDELETE https://localhost:10250/pods/default/hello-actorlet-demo"
	@echo "  (--port is TLS: a self-signed $(RUN_DIR)/pki/kubelet.crt; curl --cacert it instead of -k)"
	@echo "  health/metrics: curl -s localhost:10248/healthz; curl -s localhost:10255/metrics | grep ^kubelet_"
	./$(BIN) --container-runtime-endpoint sim:// \
		--pod-manifest-path deploy/examples --file-check-frequency 2s \
		--root-dir $(RUN_DIR) --pod-logs-dir $(RUN_DIR)/pods \
		--hostname-override actorlet-demo --node-ip 127.0.0.1 \
		--address 127.0.0.1 --port 10250 --read-only-port 10255 --healthz-port 10248

# Everything: vet, lint checks, unit tests, sim and containerd end-to-end
# tests (containerd is brought up by deploy/local/containerd.sh; as root).
test: vet lint-imports test-binaries test-binaries-containerd2
	$(GOTEST) -count=1 -timeout 60m $(PKGS)

# The binaries the end-to-end tests run, built once from the Go module
# proxy and cached outside the repo by version (a cold machine: ~15 min for
# the control plane, ~11 more for the v1.36.4 kube-apiserver and kubectl of
# the skew test, ~2.5 for metrics-server, ~1.5 for kubeadm), before the
# tests start so that no test's timeout pays for a build. Exit 3: this
# machine cannot build them (the tests that need them say so).
SKEW_K8S_VERSION ?= v1.36.4
.PHONY: test-binaries
test-binaries:
	@for s in controlplane controlplane-skew metrics-server kubeadm; do \
		case $$s in controlplane-skew) env="ACTORLET_K8S_VERSION=$(SKEW_K8S_VERSION)"; s=controlplane ;; *) env= ;; esac; \
		env $$env deploy/local/$$s.sh build >/dev/null || { rc=$$?; [ $$rc = 3 ] || exit $$rc; echo "$$s $$env: cannot build here (exit 3)"; }; \
	done

unit: vet
	$(GOTEST) -short $(PKGS)

integration: build
	$(GOTEST) -timeout 30m -run 'E2E|Containerd|ControlPlane|MetricsServer' ./test/... ./adapters/... ./internal/...

# The real-GPU check (docs/GPUS.md): skips where NVML finds no library or GPU.
.PHONY: gpu-check
gpu-check: build
	$(GO) test -count=1 -run 'TestRealGPU|TestE2ERealGPU' -v ./adapters/nvml/ ./test/e2e/

vet:
	$(GO) vet $(PKGS)

fmt:
	gofmt -w $$(git ls-files '*.go')

# golangci-lint (pinned, built once into the cache outside the repo) with
# the linters of docs/CONTRIBUTING.md and depguard for docs/DESIGN.md's
# import rules.
lint: vet lint-imports
	@test -z "$$(gofmt -l $$(git ls-files '*.go'))" || { gofmt -l $$(git ls-files '*.go'); echo "gofmt needed"; exit 1; }
	./hack/lint.sh

# docs/DESIGN.md's import rules (what depguard would enforce).
lint-imports:
	@./hack/check-imports.sh

containerd-up:
	deploy/local/containerd.sh up

containerd-down:
	deploy/local/containerd.sh down

# containerd 2.x and runc (deploy/containerd2/go.mod) built from the module
# proxy and cached by version (docs/CONTRIBUTING.md, "containerd 2.x").
.PHONY: containerd2-build test-containerd2 test-binaries-containerd2
containerd2-build:
	deploy/local/containerd.sh build --line 2

# Before `make test` (whose containerd 2.x tests would otherwise pay for a
# cold build, ~5 min on 2 idle cores); exit 3: this machine cannot build it.
test-binaries-containerd2:
	@deploy/local/containerd.sh build --line 2 >/dev/null || { rc=$$?; [ $$rc = 3 ] || exit $$rc; echo "containerd 2: cannot build here (exit 3)"; }

# The containerd end-to-end tests on containerd 2.x: its own state dir,
# bridge and subnet (ACTORLET_CONTAINERD2_DIR, _BRIDGE, _SUBNET), so a
# line-1 containerd may stay up beside it.
test-containerd2: containerd2-build
	ACTORLET_CONTAINERD_LINE=2 \
	ACTORLET_CONTAINERD_DIR=$${ACTORLET_CONTAINERD2_DIR:-/tmp/actorlet-containerd2} \
	ACTORLET_CNI_BRIDGE=$${ACTORLET_CONTAINERD2_BRIDGE:-actorlet2} \
	ACTORLET_CNI_SUBNET=$${ACTORLET_CONTAINERD2_SUBNET:-10.244.215.0/24} \
	$(GOTEST) -count=1 -timeout 60m -run 'Containerd' ./test/e2e

controlplane-up:
	deploy/local/controlplane.sh up

controlplane-down:
	deploy/local/controlplane.sh down

# metrics-server (v0.9.0 from the module proxy) behind the API server's
# aggregation layer: kubectl top node|pod (brings the control plane up).
metrics-server-up:
	deploy/local/metrics-server.sh up

metrics-server-down:
	deploy/local/metrics-server.sh down

clean:
	rm -rf bin

# The upstream e2e [NodeConformance] specs of Kubernetes v1.37.2 against
# actorlet on the local control plane and containerd (docs/CONFORMANCE.md;
# as root, ~45 min plus a cold build; not part of `make test`). Results in
# docs/CONFORMANCE.md. CONFORMANCE_FOCUS/CONFORMANCE_SKIP/CONFORMANCE_NODES
# narrow it; `deploy/local/conformance.sh run --slow` runs the [Slow] ones.
.PHONY: conformance conformance-down
conformance: build
	deploy/local/conformance.sh run

conformance-down:
	deploy/local/conformance.sh down

# The big runs of docs/BENCHMARKS.md (not part of `make test`): results in
# docs/bench/*.json, charts in docs/bench/*.svg. bin/actorlet-bench runs them;
# BENCH_BIN may name the agent it starts instead of bin/actorlet (one built
# with /debug wired, for the profiles); containerd needs root; cluster-sim
# brings up deploy/local/controlplane.sh (built once, ~11 min).
BENCH_DIR ?= docs/bench
BENCH_BIN ?= $(BIN)
RUN_BENCH  = ./$(BENCH) --actorlet $(abspath $(BENCH_BIN))
.PHONY: bench-runs
bench-runs: bench
	@mkdir -p $(BENCH_DIR)
	$(RUN_BENCH) --quiet --scenario standalone-sim --pods 100   --out $(BENCH_DIR)/standalone-sim-100.json
	$(RUN_BENCH) --quiet --scenario standalone-sim --pods 1000  --out $(BENCH_DIR)/standalone-sim-1000.json
	$(RUN_BENCH) --quiet --scenario standalone-sim --pods 10000 --timeout 20m --out $(BENCH_DIR)/standalone-sim-10000.json
	$(RUN_BENCH) --quiet --scenario churn  --pods 100 --duration 60s --out $(BENCH_DIR)/churn.json
	$(RUN_BENCH) --quiet --scenario probes --pods 1000 --duration 60s --out $(BENCH_DIR)/probes.json
	$(RUN_BENCH) --quiet --scenario chaos  --pods 100 --duration 60s --chaos-kill-rate 20 --out $(BENCH_DIR)/chaos.json
	$(RUN_BENCH) --quiet --scenario containerd --pods 50 --out $(BENCH_DIR)/containerd-50.json
	$(RUN_BENCH) --quiet --scenario cluster-sim --pods 100  --out $(BENCH_DIR)/cluster-sim-100.json
	$(RUN_BENCH) --quiet --scenario cluster-sim --pods 1000 --out $(BENCH_DIR)/cluster-sim-1000.json
	$(RUN_BENCH) --quiet --scenario eviction --pods 30 --out $(BENCH_DIR)/eviction-30.json
	$(RUN_BENCH) --quiet --scenario eviction-density --pods 1000 --out $(BENCH_DIR)/eviction-density-1000.json
	$(RUN_BENCH) --quiet --scenario stats --pods 1000 --out $(BENCH_DIR)/stats-1000.json
	cd hack/benchplot && $(GO) run . -cdf ../../$(BENCH_DIR)/start-latency-cdf.svg -timeline ../../$(BENCH_DIR)/standalone-sim-10000-timeline.svg \
		../../$(BENCH_DIR)/standalone-sim-10000.json ../../$(BENCH_DIR)/standalone-sim-1000.json ../../$(BENCH_DIR)/standalone-sim-100.json ../../$(BENCH_DIR)/containerd-50.json
	cd hack/benchplot && $(GO) run . -markdown ../../docs/BENCHMARKS.md $$(ls ../../$(BENCH_DIR)/*.json)

# docs/BENCHMARKS.md "Against the upstream kubelet" (not part of `make bench-runs`): the same cluster load
# on actorlet and on the upstream kubelet (deploy/local/kubelet.sh builds it; root), each on its own
# fake CRI runtime, with a kill -9 recovery of UPSTREAM_RECOVERY_PODS pods; JSON in
# docs/bench/upstream/ (apart: `make bench-runs`' table reads docs/bench/*.json), tables in
# docs/BENCHMARKS.md (between <!-- against-upstream-N --> markers).
UPSTREAM_PODS ?= 100 1000
UPSTREAM_RECOVERY_PODS ?= 200
UPSTREAM_ROUNDS ?= 1
.PHONY: bench-upstream
bench-upstream: bench
	@mkdir -p $(BENCH_DIR)/upstream
	@set -e; for n in $(UPSTREAM_PODS); do \
		$(RUN_BENCH) --against upstream --pods $$n --recovery-pods $(UPSTREAM_RECOVERY_PODS) --rounds $(UPSTREAM_ROUNDS) \
			--out $(BENCH_DIR)/upstream/against-upstream-$$n.json --markdown docs/BENCHMARKS.md; \
	done

# docs/BENCHMARKS.md "Density" (issue 14): both agents unthrottled (client QPS 1000, burst 2000) at
# DENSITY_PODS pods, and at upstream's QPS 50 with pods that have no service account token (the
# limiter test: one status write per pod at 50/s). Tables between <!-- against-upstream-N-qps1000 -->
# and <!-- against-upstream-1000-notoken --> markers.
DENSITY_PODS ?= 1000 2000
DENSITY_ROUNDS ?= 1
.PHONY: bench-density
bench-density: bench
	@mkdir -p $(BENCH_DIR)/upstream
	@set -e; for n in $(DENSITY_PODS); do \
		$(RUN_BENCH) --against upstream --pods $$n --kube-api-qps 1000 --kube-api-burst 2000 --no-recovery --rounds $(DENSITY_ROUNDS) \
			--out $(BENCH_DIR)/upstream/against-upstream-$$n-qps1000.json --markdown docs/BENCHMARKS.md; \
	done
	$(RUN_BENCH) --against upstream --pods 1000 --no-token --no-recovery --rounds $(DENSITY_ROUNDS) \
		--out $(BENCH_DIR)/upstream/against-upstream-1000-notoken.json --markdown docs/BENCHMARKS.md

# The soak of docs/BENCHMARKS.md (not part of `make bench-runs`: it runs an
# hour): chaos plus churn, the agent's RSS, goroutines, open files and disk
# entries sampled every 10 s; exit 1 when one grows or an invariant breaks.
SOAK_DURATION ?= 60m
.PHONY: soak
soak: bench
	@mkdir -p $(BENCH_DIR)
	$(RUN_BENCH) --scenario soak --duration $(SOAK_DURATION) --pods 50 --churn-rate 5 --chaos-kill-rate 5 \
		--sample-interval 10s --out $(BENCH_DIR)/soak.json

# Native Go fuzzing (README "Tests"): each target for FUZZTIME, one at a
# time (go test -fuzz takes one target). `make test` already runs the seeds
# and the regression cases in testdata/fuzz/; a new failing input is
# written there.
FUZZTIME ?= 30s
FUZZ_TARGETS := ./adapters/manifest:FuzzDecodeAndValidate ./adapters/httpapi:FuzzNodeAPI \
	./podspec:FuzzCRILabels ./runtimes/sim:FuzzShellParser \
	./adapters/cri:FuzzLeanDecode ./adapters/kube:FuzzPodStatusPatch
.PHONY: fuzz
fuzz:
	@set -e; for t in $(FUZZ_TARGETS); do \
		pkg=$${t%%:*}; fn=$${t##*:}; \
		echo "== $$fn ($$pkg) for $(FUZZTIME)"; \
		$(GO) test -run '^$$' -fuzz "^$$fn\$$" -fuzztime $(FUZZTIME) $$pkg; \
	done
