#!/usr/bin/env bash
# Runs golangci-lint at a pinned version, built once from the Go module proxy
# and cached outside the repo (keyed by version).
set -euo pipefail
cd "$(dirname "$0")/.."
V=v2.6.2
BIN=${ACTORLET_CACHE:-${XDG_CACHE_HOME:-$HOME/.cache}/actorlet}/tools/golangci-lint-$V
if [ ! -x "$BIN/golangci-lint" ]; then
  echo "building golangci-lint $V (once) into $BIN" >&2
  GOBIN=$BIN go install "github.com/golangci/golangci-lint/v2/cmd/golangci-lint@$V"
fi
exec "$BIN/golangci-lint" run ./...
