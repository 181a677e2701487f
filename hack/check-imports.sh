#!/usr/bin/env bash
# Enforces the import rules of docs/DESIGN.md on non-test Go files (depguard in
# .golangci.yml states the same rules for golangci-lint):
#   actors/*            never import adapters/, supervisors/ or cmd/
#   adapters/*          never import actors/, supervisors/ or cmd/
#   runtimes/*          (the sim runtime) import neither actors, messages,
#                       supervisors nor cmd: a runtime knows nothing of the agent
#   outbound adapters   (adapters/cri, nvml, metrics, host, kube,
#                       volume, prober) import neither actors/ nor messages/
#   messages/           imports nothing of the project (plain values)
#   podspec/            imports nothing of the project (pure functions)
#   errdefs/            imports nothing of the project
#   supervisors/        never imports adapters/ or actors/
#   cmd/actorlet        (the node agent) links, directly or through any
#                       package, none of the benchmark's packages: the
#                       harness (internal/bench), the fakes (internal/fakecri,
#                       internal/fakesystemd, k8s.io/cri-client/pkg/fake,
#                       k8s.io/cri-api's fake services) and what only tests need (testing,
#                       net/http/httptest, testify, which the fake pulled in);
#                       they belong to cmd/actorlet-bench and to tests
#   k8s.io/dynamic-resource-allocation/kubeletplugin
#                       only test/dradriver (the DRA test driver) imports
#                       it; the agent links neither the driver nor it
#
# Usage: hack/check-imports.sh [module-dir]   (default: this repository)
# Exit status: 0 clean, 1 a rule is broken, 2 the packages could not be listed.
set -euo pipefail
cd "${1:-$(dirname "$0")/..}"
mod=$(go list -m)
m=${mod//./\\.} # as a regular expression

# One "importer imported" line per import of the module's own packages.
# -e lists a package that has errors (someone mid-change) with the imports
# it has; a go list that fails outright fails the check.
if ! all=$(go list -e -f '{{$p := .ImportPath}}{{range .Imports}}{{$p}} {{.}}{{"\n"}}{{end}}' ./...); then
	echo "check-imports: go list failed" >&2
	exit 2
fi
edges=$(grep -E " $m/" <<<"$all" || true)

fail=0
# rule FROM DENY WHY: packages FROM (dirs, '|'-separated, each with its
# subpackages) must not import packages DENY (same form; '.*': anything of
# the module).
rule() {
	local from=$1 deny=$2 why=$3 hits
	hits=$(grep -E "^$m/($from)(/[^ ]*)? $m/($deny)(/[^ ]*)?\$" <<<"$edges" || true)
	if [ -n "$hits" ]; then
		echo "import rule broken ($why):"
		sed 's/ / imports /; s/^/  /' <<<"$hits"
		fail=1
	fi
}
outbound='adapters/cri|adapters/nvml|adapters/metrics|adapters/host|adapters/kube|adapters/volume|adapters/prober'
rule actors 'adapters|supervisors|cmd' 'actors import neither adapters, supervisors nor cmd'
rule adapters 'actors|supervisors|cmd' 'adapters import neither actors, supervisors nor cmd'
rule "$outbound" 'actors|messages' 'outbound adapters import neither actors nor messages'
rule runtimes 'actors|messages|supervisors|cmd' 'runtimes import neither actors, messages, supervisors nor cmd'
rule messages '.*' 'messages are plain values: they import nothing of the project'
rule podspec '.*' 'podspec is pure: it imports nothing of the project'
rule errdefs '.*' 'errdefs imports nothing of the project'
rule supervisors 'adapters|actors' 'supervisors import neither adapters nor actors'

# The library's kubelet plugin helper is the driver side of DRA: only the
# project's DRA test driver builds on it.
kubeletplugin='k8s\.io/dynamic-resource-allocation/kubeletplugin'
hits=$(grep -E " $kubeletplugin(/[^ ]*)?\$" <<<"$all" | grep -vE "^$m/test/dradriver " || true)
if [ -n "$hits" ]; then
	echo "import rule broken (only test/dradriver, the DRA test driver, imports the kubelet plugin helper):"
	sed 's/ / imports /; s/^/  /' <<<"$hits"
	fail=1
fi

# The agent's whole dependency tree: the bench and the fakes stay out.
if [ -d cmd/actorlet ]; then
	if ! deps=$(go list -e -deps ./cmd/actorlet); then
		echo "check-imports: go list -deps ./cmd/actorlet failed" >&2
		exit 2
	fi
	benchonly="$m/internal/bench|$m/internal/fakecri|$m/internal/fakesystemd|k8s\.io/cri-client/pkg/fake|k8s\.io/cri-api/pkg/apis/testing"
	benchonly+="|testing|net/http/httptest|github\.com/stretchr/testify"
	benchonly+="|$m/test/dradriver|$kubeletplugin"
	hits=$(grep -E "^($benchonly)(/.*)?\$" <<<"$deps" || true)
	if [ -n "$hits" ]; then
		echo "import rule broken (the agent links no bench or fake package: they belong to cmd/actorlet-bench):"
		sed 's/^/  cmd\/actorlet links /' <<<"$hits"
		echo "  (go list -deps ./cmd/actorlet; find the importer with: go list -f '{{.ImportPath}} {{.Imports}}' -deps ./cmd/actorlet | grep PACKAGE)"
		fail=1
	fi
fi
[ "$fail" = 0 ] && echo "import rules: ok"
exit $fail
