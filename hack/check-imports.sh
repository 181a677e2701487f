#!/usr/bin/env bash
# Enforces the import rules of DESIGN.md on non-test Go files:
#   actors/*            never import adapters/
#   outbound adapters   (adapters/cri, adapters/nvml, adapters/metrics) import neither actors/ nor messages/
#   messages/           imports no actors/ and no adapters/
#   any adapter         never imports actors/
set -euo pipefail
cd "$(dirname "$0")/.."
mod=$(go list -m)
fail=0
check() { # dir pattern why
  local dir=$1 pat=$2 why=$3 hits
  [ -d "$dir" ] || return 0
  hits=$(go list -f '{{.ImportPath}}: {{join .Imports " "}}' "./$dir/..." 2>/dev/null | grep -E " $mod/($pat)" || true)
  if [ -n "$hits" ]; then
    echo "import rule broken ($why):"; echo "$hits" | sed 's/^/  /'; fail=1
  fi
}
check actors 'adapters' 'actors never import adapters'
check adapters/cri 'actors|messages' 'outbound adapters import neither actors nor messages'
check adapters/nvml 'actors|messages' 'outbound adapters import neither actors nor messages'
check adapters/metrics 'actors|messages' 'outbound adapters import neither actors nor messages'
check adapters 'actors' 'adapters never import actors'
check messages 'actors|adapters' 'messages are plain values'
exit $fail
